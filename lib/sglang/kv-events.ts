// SGLang 0.5.23's KV cache events as values (disaggregation/kv_events.py): the
// one description the simulator publishes from and the gateway decodes into.
//
// - BlockStored: pages stored on one medium, a chain of block hashes whose
//   first page links to `parentBlockHash` (null under a namespace root), the
//   pages' token ids, `blockSize` tokens a page, the storing request's
//   `cacheSalt` (null when unsalted);
// - BlockRemoved: block hashes dropped from one medium;
// - AllBlocksCleared: the whole cache is empty (construction, /flush_cache).
// - Medium is the tier: "GPU" (L1 device), "CPU_PINNED" (L2 host, HiCache),
//   "DISK" and "EXTERNAL" (L3 storage; declared by 0.5.23, not yet published).
//
// The wire frames: [topic, seq, payload], seq an 8-byte big-endian counter
// from 0 per publisher; a replay ends with the marker seq -1 (all ones).

export const StorageMedium = {
  gpu: 'GPU',
  cpuPinned: 'CPU_PINNED',
  disk: 'DISK',
  external: 'EXTERNAL',
} as const;
export type StorageMedium = (typeof StorageMedium)[keyof typeof StorageMedium];
export const STORAGE_MEDIA: readonly StorageMedium[] = Object.values(StorageMedium);

export interface BlockStored {
  readonly type: 'BlockStored';
  readonly blockHashes: bigint[];
  readonly parentBlockHash: bigint | null;
  readonly tokenIds: number[];
  readonly blockSize: number;
  readonly loraId: number | null;
  readonly medium: StorageMedium;
  readonly cacheSalt: string | null;
}

export interface BlockRemoved {
  readonly type: 'BlockRemoved';
  readonly blockHashes: bigint[];
  readonly medium: StorageMedium;
}

export interface AllBlocksCleared {
  readonly type: 'AllBlocksCleared';
}

export type KvCacheEvent = BlockStored | BlockRemoved | AllBlocksCleared;

/** The sequence number a replay's end marker carries. */
export const REPLAY_END_SEQ = -1;

/** The 8-byte big-endian sequence frame. */
export function encodeSeq(seq: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(BigInt(seq));
  return b;
}

/**
 * A sequence frame's value: -1 for the replay end marker, else the counter.
 * Null when the frame is not 8 bytes or the counter is past 2^53 (a publisher
 * would need centuries of batches to get there).
 */
export function decodeSeq(frame: Uint8Array): number | null {
  if (frame.length !== 8) return null;
  const v = Buffer.from(frame.buffer, frame.byteOffset, 8).readBigInt64BE(0);
  if (v === -1n) return REPLAY_END_SEQ;
  return v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : null;
}
