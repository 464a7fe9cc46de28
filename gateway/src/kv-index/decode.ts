// One KV event payload off the wire, as SGLang 0.5.23 encodes it with msgspec
// (disaggregation/kv_events.py):
//
// - the batch is a positional array [ts (float, seconds since the epoch),
//   [events...], attn_dp_rank (int, or nil)];
// - an event is a map tagged by "type" (the class name); optional fields left
//   at None are omitted. Keys this decoder does not know (session_id,
//   lora_name, whatever a later version adds) are ignored, as msgspec's own
//   decoder ignores them: an older consumer keeps working;
// - an omitted medium is "GPU": SGLang's recorder always names one, and GPU
//   is what it defaults to;
// - integers take msgspec's smallest form, so a hash may arrive as a number
//   (|h| < 2^32) or, past that, as a 64-bit integer: @msgpack/msgpack with
//   useBigInt64 gives a bigint for those. Hashes are normalised to bigint and
//   must fit SGLang's signed int64.
//
// Pure and total: a malformed payload is an error value, never a throw, so
// the subscriber's loop decides what a bad batch means. The checks are
// written out rather than a zod schema: a batch carries every stored page's
// token ids, and zod's per-element checks cost ten times msgpack's own
// decoding (a 2k-token store: 240 us with zod, about 50 us with these checks,
// 24 of them msgpack's).

import { Decoder } from '@msgpack/msgpack';
import { STORAGE_MEDIA, StorageMedium, type KvCacheEvent } from '#sglang/kv-events.ts';
import { readFastBatch } from './decode-fast.ts';

export interface KvEventBatch {
  /** Publisher's wall clock when it took the batch, in ms since the epoch. */
  readonly timestampMs: number;
  readonly events: KvCacheEvent[];
  /** The attention DP rank that published (null when SGLang left it unset). */
  readonly dpRank: number | null;
}

export type DecodeIssue =
  | { readonly code: 'not-msgpack'; readonly message: string }
  | { readonly code: 'bad-shape'; readonly path: readonly (string | number)[]; readonly message: string };

export type DecodeResult = { ok: true; value: KvEventBatch } | { ok: false; error: DecodeIssue };

type Path = readonly (string | number)[];

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const MEDIA = new Set<string>(STORAGE_MEDIA);

// One decoder for every call: it keeps a key cache for the maps' repeated field names.
const decoder = new Decoder({ useBigInt64: true });

/** Thrown inside this module only; decodeEventBatch turns it into an error value. */
class ShapeError extends Error {
  readonly path: Path;
  // The path is built here, on failure only: the success path allocates none.
  constructor(parent: Path, key: string | number | null, message: string) {
    const path = key === null ? parent : [...parent, key];
    super(`${path.join('.') || 'batch'}: ${message}`);
    this.path = path;
  }
}

export function decodeEventBatch(payload: Uint8Array): DecodeResult {
  // SGLang's usual shape straight off the bytes (decode-fast.ts); anything else the general way.
  const fast = readFastBatch(payload);
  return fast ? { ok: true, value: fast } : decodeEventBatchGenerally(payload);
}

/** decodeEventBatch through @msgpack/msgpack and the checks below, whatever the payload's shape. */
export function decodeEventBatchGenerally(payload: Uint8Array): DecodeResult {
  let raw: unknown;
  try {
    raw = decoder.decode(payload);
  } catch (e) {
    return { ok: false, error: { code: 'not-msgpack', message: e instanceof Error ? e.message : String(e) } };
  }
  try {
    return { ok: true, value: readBatch(raw) };
  } catch (e) {
    if (!(e instanceof ShapeError)) throw e;
    return { ok: false, error: { code: 'bad-shape', path: e.path, message: e.message } };
  }
}

function readBatch(raw: unknown): KvEventBatch {
  const batch = readArray(raw, [], null);
  if (batch.length < 2 || batch.length > 3)
    throw new ShapeError([], null, 'expected [ts, events, attn_dp_rank]');
  const [ts, events, rank] = batch;
  if (typeof ts !== 'number' || !Number.isFinite(ts)) throw new ShapeError([], 0, 'expected a timestamp');
  return {
    timestampMs: ts * 1000,
    events: readArray(events, [], 1).map((e, i) => readEvent(e, [1, i])),
    dpRank: rank === undefined || rank === null ? null : readInt(rank, [], 2),
  };
}

// Each reader takes the value, its parent's path and its key there.
function readEvent(raw: unknown, path: Path): KvCacheEvent {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new ShapeError(path, null, 'expected an event map');
  const e = raw as Record<string, unknown>;
  switch (e.type) {
    case 'BlockStored':
      return {
        type: 'BlockStored',
        blockHashes: readHashes(e.block_hashes, path, 'block_hashes'),
        parentBlockHash:
          e.parent_block_hash === null ? null : readInt64(e.parent_block_hash, path, 'parent_block_hash'),
        tokenIds: readTokenIds(e.token_ids, path, 'token_ids'),
        blockSize: readPositiveInt(e.block_size, path, 'block_size'),
        loraId: e.lora_id === null ? null : readInt(e.lora_id, path, 'lora_id'),
        medium: readMedium(e.medium, path, 'medium'),
        cacheSalt: readOptionalString(e.cache_salt, path, 'cache_salt'),
      };
    case 'BlockRemoved':
      return {
        type: 'BlockRemoved',
        blockHashes: readHashes(e.block_hashes, path, 'block_hashes'),
        medium: readMedium(e.medium, path, 'medium'),
      };
    case 'AllBlocksCleared':
      return { type: 'AllBlocksCleared' };
    default:
      throw new ShapeError(path, 'type', 'expected BlockStored, BlockRemoved or AllBlocksCleared');
  }
}

type Key = string | number | null;

function readArray(raw: unknown, path: Path, key: Key): unknown[] {
  if (!Array.isArray(raw)) throw new ShapeError(path, key, 'expected an array');
  return raw;
}

function readHashes(raw: unknown, path: Path, key: string): bigint[] {
  const hashes = readArray(raw, path, key);
  const out = new Array<bigint>(hashes.length);
  for (let i = 0; i < hashes.length; i++) out[i] = readInt64(hashes[i], [...path, key], i);
  return out;
}

function readInt64(raw: unknown, path: Path, key: Key): bigint {
  if (typeof raw === 'number' && Number.isInteger(raw)) return BigInt(raw);
  if (typeof raw === 'bigint' && raw >= INT64_MIN && raw <= INT64_MAX) return raw;
  throw new ShapeError(path, key, 'expected a signed 64-bit integer');
}

function readInt(raw: unknown, path: Path, key: Key): number {
  if (typeof raw === 'number' && Number.isSafeInteger(raw)) return raw;
  throw new ShapeError(path, key, 'expected an integer');
}

function readPositiveInt(raw: unknown, path: Path, key: Key): number {
  const n = readInt(raw, path, key);
  if (n < 1) throw new ShapeError(path, key, 'expected a positive integer');
  return n;
}

function readTokenIds(raw: unknown, path: Path, key: string): number[] {
  const ids = readArray(raw, path, key);
  for (let i = 0; i < ids.length; i++) {
    const t = ids[i];
    // uint32, as SGLang hashes them; msgpack gives numbers for every id that fits.
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > 0xffff_ffff)
      throw new ShapeError([...path, key], i, 'expected a token id');
  }
  return ids as number[];
}

function readMedium(raw: unknown, path: Path, key: Key): StorageMedium {
  if (raw === undefined || raw === null) return StorageMedium.gpu;
  if (typeof raw === 'string' && MEDIA.has(raw)) return raw as StorageMedium;
  throw new ShapeError(path, key, `expected one of ${STORAGE_MEDIA.join(', ')}`);
}

function readOptionalString(raw: unknown, path: Path, key: Key): string | null {
  if (raw === undefined || raw === null) return null;
  if (typeof raw === 'string') return raw;
  throw new ShapeError(path, key, 'expected a string');
}
