// The bytes SGLang 0.5.23 puts on its event sockets, as msgspec encodes them
// (disaggregation/kv_events.py, scheduler_components/load_publisher.py):
//
// - a message is three frames: topic (UTF-8), sequence number (8 bytes,
//   big-endian), msgpack payload;
// - a KV payload is EventBatch, a positional array
//   [ts (float64), [events...], attn_dp_rank];
// - an event is a map tagged by "type" (the class name) first, then its
//   fields in declaration order; optional fields left at None are omitted
//   (medium, cache_salt), required ones are nil (parent_block_hash, lora_id);
// - a load payload is LoadStat, a tagged positional array
//   ["LoadStat", num_running_reqs, num_waiting_reqs, num_tokens,
//    max_total_num_tokens, attn_dp_rank, num_waiting_uncached_tokens,
//    num_total_tokens, max_running_requests, total_prefill_uncached_tokens,
//    total_prefill_busy_us];
// - integers take msgspec's smallest form: fixint/uint8..uint32 or
//   int8..int32 when they fit, else uint64 (non-negative) or int64.
//
// Pure. @msgpack/msgpack writes the maps and arrays; the timestamp is
// written on its own so an integral float stays a float64, as msgspec does.

import { Encoder } from '@msgpack/msgpack';
import { encodeSeq, type KvCacheEvent } from '#sglang/kv-events.ts';

const encoder = new Encoder({ useBigInt64: true });
const floatEncoder = new Encoder({ forceIntegerToFloat: true });

/** msgspec's integer width: 32-bit forms as numbers, wider ones as 64-bit. */
function toWireInt(v: bigint | number): bigint | number {
  // Token ids and sizes are small numbers: no bigint for them (a 220 KB prompt stores ~45k ids).
  if (typeof v === 'number' && Number.isInteger(v) && v >= -(2 ** 31) && v < 2 ** 32) return v;
  const b = BigInt(v);
  return b >= -(2n ** 31n) && b < 2n ** 32n ? Number(b) : b;
}

function toWireEvent(e: KvCacheEvent): Record<string, unknown> {
  switch (e.type) {
    case 'BlockStored':
      return {
        type: e.type,
        block_hashes: e.blockHashes.map(toWireInt),
        parent_block_hash: e.parentBlockHash === null ? null : toWireInt(e.parentBlockHash),
        token_ids: e.tokenIds.map(toWireInt),
        block_size: toWireInt(e.blockSize),
        lora_id: null,
        medium: e.medium,
        ...(e.cacheSalt === null ? {} : { cache_salt: e.cacheSalt }),
      };
    case 'BlockRemoved':
      return { type: e.type, block_hashes: e.blockHashes.map(toWireInt), medium: e.medium };
    case 'AllBlocksCleared':
      return { type: e.type };
  }
}

/** msgspec's KVEventBatch: [ts, events, attn_dp_rank]. */
export function encodeEventBatch(ts: number, events: readonly KvCacheEvent[], attnDpRank: number): Buffer {
  return Buffer.concat([
    Uint8Array.of(0x93), // fixarray of 3
    floatEncoder.encode(ts),
    encoder.encode(events.map(toWireEvent)),
    encoder.encode(toWireInt(attnDpRank)),
  ]);
}

export interface LoadStat {
  readonly numRunningReqs: number;
  readonly numWaitingReqs: number;
  readonly numTokens: number;
  readonly maxTotalNumTokens: number;
  readonly attnDpRank: number;
  readonly numWaitingUncachedTokens: number;
  readonly numTotalTokens: number;
  readonly maxRunningRequests: number;
  readonly totalPrefillUncachedTokens: number;
  readonly totalPrefillBusyUs: number;
}

/** msgspec's LoadStat (tagged, array-like, no omitted defaults). */
export function encodeLoadStat(s: LoadStat): Buffer {
  const fields = [
    s.numRunningReqs,
    s.numWaitingReqs,
    s.numTokens,
    s.maxTotalNumTokens,
    s.attnDpRank,
    s.numWaitingUncachedTokens,
    s.numTotalTokens,
    s.maxRunningRequests,
    s.totalPrefillUncachedTokens,
    s.totalPrefillBusyUs,
  ];
  return Buffer.from(encoder.encode(['LoadStat', ...fields.map(toWireInt)]));
}

/** The three frames of one published message. */
export function buildFrames(topic: string, seq: number, payload: Buffer): [Buffer, Buffer, Buffer] {
  return [Buffer.from(topic, 'utf8'), encodeSeq(seq), payload];
}
