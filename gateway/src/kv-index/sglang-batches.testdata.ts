// Payloads SGLang 0.5.23 itself produced: its UnifiedRadixCache (page size 4,
// KV events on, as hack/sglang/cacheroute_kit/tree_events.py builds it)
// recorded the events of the operations named in `note`, and
// msgspec.msgpack.Encoder().encode(KVEventBatch(ts, events, attn_dp_rank=0))
// gave these bytes. The "extra fields" batch was built by hand from SGLang's
// own structs (session_id and lora_name set, a medium and the rank left None).
// `events` is what the kit's decoder (msgspec.to_builtins) read back, as
// KvCacheEvent values.

import type { KvCacheEvent } from '#sglang/kv-events.ts';

export interface SglangBatch {
  readonly note: string;
  readonly hex: string;
  readonly timestampMs: number;
  readonly dpRank: number | null;
  readonly events: KvCacheEvent[];
}

export const SGLANG_BATCHES: readonly SglangBatch[] = [
  {
    note: 'construction',
    hex: '93cb41d9d2ded02000009181a474797065b0416c6c426c6f636b73436c656172656400',
    timestampMs: 1733000000500,
    dpRank: 0,
    events: [{ type: 'AllBlocksCleared' }],
  },
  {
    note: 'insert 1..12',
    hex: '93cb41d9d2ded05000009187a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657393d3cf97adeedb59e05bcf4ebfa8a1f3c34151d3eddb4ab93695109cb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739c0102030405060708090a0b0caa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da347505500',
    timestampMs: 1733000001250,
    dpRank: 0,
    events: [
      {
        type: 'BlockStored',
        blockHashes: [-3488128144981237669n, 5674439469042975057n, -1307369107475853156n],
        parentBlockHash: null,
        tokenIds: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
        blockSize: 4,
        loraId: null,
        medium: 'GPU',
        cacheSalt: null,
      },
    ],
  },
  {
    note: 'insert 1..8 salted tenant-a',
    hex: '93cb41d9d2ded08000009188a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392cf339927f491605c4bcf2dea906acb1a41cdb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473980102030405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055aa63616368655f73616c74a874656e616e742d6100',
    timestampMs: 1733000002000,
    dpRank: 0,
    events: [
      {
        type: 'BlockStored',
        blockHashes: [3718046898735569995n, 3308615664605479373n],
        parentBlockHash: null,
        tokenIds: [1, 2, 3, 4, 5, 6, 7, 8],
        blockSize: 4,
        loraId: null,
        medium: 'GPU',
        cacheSalt: 'tenant-a',
      },
    ],
  },
  {
    note: 'insert 1..4,99,98,97,96',
    hex: '93cb41d9d2ded0c000009187a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391cf2a09e750ffe9dfbbb1706172656e745f626c6f636b5f68617368d3cf97adeedb59e05ba9746f6b656e5f6964739463626160aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da347505500',
    timestampMs: 1733000003000,
    dpRank: 0,
    events: [
      {
        type: 'BlockStored',
        blockHashes: [3029206559460286395n],
        parentBlockHash: -3488128144981237669n,
        tokenIds: [99, 98, 97, 96],
        blockSize: 4,
        loraId: null,
        medium: 'GPU',
        cacheSalt: null,
      },
    ],
  },
  {
    note: 'evict 8 tokens',
    hex: '93cb41d9d2ded10000009183a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657392cf339927f491605c4bcf2dea906acb1a41cda66d656469756da347505500',
    timestampMs: 1733000004000,
    dpRank: 0,
    events: [
      { type: 'BlockRemoved', blockHashes: [3718046898735569995n, 3308615664605479373n], medium: 'GPU' },
    ],
  },
  {
    note: 'extra fields; medium omitted; dp rank None',
    hex: '93cb41d9d2ded14000009289a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657393cf7fffffffffffffffd3800000000000000005b1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739c070707070707070707070707aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756daa4350555f50494e4e4544aa73657373696f6e5f6964a6736573732d31a96c6f72615f6e616d65a76164617074657282a474797065ac426c6f636b52656d6f766564ac626c6f636b5f6861736865739105c0',
    timestampMs: 1733000005000,
    dpRank: null,
    events: [
      {
        type: 'BlockStored',
        blockHashes: [9223372036854775807n, -9223372036854775808n, 5n],
        parentBlockHash: null,
        tokenIds: [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7],
        blockSize: 4,
        loraId: null,
        medium: 'CPU_PINNED',
        cacheSalt: null,
      },
      { type: 'BlockRemoved', blockHashes: [5n], medium: 'GPU' },
    ],
  },
  {
    note: 'reset',
    hex: '93cb41d9d2ded18000009181a474797065b0416c6c426c6f636b73436c656172656400',
    timestampMs: 1733000006000,
    dpRank: 0,
    events: [{ type: 'AllBlocksCleared' }],
  },
];
