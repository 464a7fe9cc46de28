import { Encoder } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import type { KvCacheEvent } from '#sglang/kv-events.ts';
import { encodeEventBatch } from '../../../test/sim/kv-event-codec.ts';
import { createRng, pickInt } from '../../../test/support/gateway/rng.ts';
import { decodeEventBatch } from './decode.ts';
import { SGLANG_BATCHES } from './sglang-batches.testdata.ts';

const stored = (over: Partial<KvCacheEvent & { type: 'BlockStored' }> = {}): KvCacheEvent => ({
  type: 'BlockStored',
  blockHashes: [1n],
  parentBlockHash: null,
  tokenIds: [1, 2, 3, 4],
  blockSize: 4,
  loraId: null,
  medium: 'GPU',
  cacheSalt: null,
  ...over,
});

const encoder = new Encoder({ useBigInt64: true, ignoreUndefined: true }); // undefined: the key is left out
const wire = (batch: unknown): Uint8Array => encoder.encode(batch);
const wireStored = (over: Record<string, unknown> = {}) => ({
  type: 'BlockStored',
  block_hashes: [1],
  parent_block_hash: null,
  token_ids: [1, 2, 3, 4],
  block_size: 4,
  lora_id: null,
  medium: 'GPU',
  ...over,
});

describe('decodeEventBatch', () => {
  it.each(SGLANG_BATCHES.map((b) => [b.note, b] as const))(
    "decodes SGLang's own bytes: %s",
    (_note, batch) => {
      expect(decodeEventBatch(Buffer.from(batch.hex, 'hex'))).toEqual({
        ok: true,
        value: { timestampMs: batch.timestampMs, events: batch.events, dpRank: batch.dpRank },
      });
    },
  );

  it("round-trips the simulator's encoder: every integer width msgspec uses, salts, tiers, removals, clears", () => {
    const events: KvCacheEvent[] = [
      stored({
        // fixint, int8, int32, uint32 edge, 64-bit both signs, int64 extremes.
        blockHashes: [
          7n,
          -5n,
          -(2n ** 31n),
          2n ** 32n - 1n,
          2n ** 32n,
          -(2n ** 31n) - 1n,
          2n ** 63n - 1n,
          -(2n ** 63n),
        ],
        parentBlockHash: -3488128144981237669n,
        cacheSalt: 'tenant-a',
        medium: 'CPU_PINNED',
      }),
      { type: 'BlockRemoved', blockHashes: [9n, -9n], medium: 'GPU' },
      { type: 'AllBlocksCleared' },
    ];
    const r = decodeEventBatch(encodeEventBatch(1733000000.125, events, 3));
    expect(r).toEqual({ ok: true, value: { timestampMs: 1733000000125, events, dpRank: 3 } });
    if (r.ok)
      for (const h of (r.value.events[0] as { blockHashes: bigint[] }).blockHashes)
        expect(typeof h).toBe('bigint');
  });

  it('ignores fields it does not know, reads an omitted medium as GPU and a nil rank as null', () => {
    const r = decodeEventBatch(
      wire([1.5, [wireStored({ medium: undefined, session_id: 's', lora_name: 'a', future: [1] })], null]),
    );
    expect(r).toEqual({ ok: true, value: { timestampMs: 1500, events: [stored()], dpRank: null } });
  });

  it.each([
    ['truncated bytes', Buffer.from(SGLANG_BATCHES[1]?.hex ?? '', 'hex').subarray(0, 30), 'not-msgpack'],
    ['trailing bytes', Buffer.concat([wire([1, [], 0]), Buffer.from([0])]), 'not-msgpack'],
    ['a map for the batch', wire({ ts: 1, events: [] }), 'bad-shape'],
    ['a string timestamp', wire(['1', [], 0]), 'bad-shape'],
    ['an unknown event type', wire([1, [{ type: 'BlockMoved' }], 0]), 'bad-shape'],
    ['an untagged event', wire([1, [wireStored({ type: undefined })], 0]), 'bad-shape'],
    ['a hash past int64', wire([1, [wireStored({ block_hashes: [2n ** 63n] })], 0]), 'bad-shape'],
    ['a float hash', wire([1, [wireStored({ block_hashes: [1.5] })], 0]), 'bad-shape'],
    ['an unknown medium', wire([1, [wireStored({ medium: 'NVME' })], 0]), 'bad-shape'],
    ['a negative token id', wire([1, [wireStored({ token_ids: [-1] })], 0]), 'bad-shape'],
    ['a missing block_size', wire([1, [wireStored({ block_size: undefined })], 0]), 'bad-shape'],
  ])('returns an error for %s, never throws', (_name, bytes, code) => {
    const r = decodeEventBatch(bytes);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.code).toBe(code);
  });

  it('never throws on damaged bytes (seeded: flipped, cut and random bytes of real batches)', () => {
    const rng = createRng(7);
    const real = SGLANG_BATCHES.map((b) => Buffer.from(b.hex, 'hex'));
    let errors = 0;
    for (let i = 0; i < 3000; i++) {
      const base = Buffer.from(real[pickInt(rng, 0, real.length - 1)] ?? Buffer.alloc(0));
      const bytes =
        i % 3 === 0
          ? Buffer.from(Array.from({ length: pickInt(rng, 0, 64) }, () => pickInt(rng, 0, 255)))
          : i % 3 === 1
            ? base.subarray(0, pickInt(rng, 0, base.length))
            : base.map((b) => (rng() < 0.05 ? pickInt(rng, 0, 255) : b));
      const r = decodeEventBatch(bytes);
      if (!r.ok) errors++;
    }
    expect(errors).toBeGreaterThan(1500);
  });

  it('says where a bad event is', () => {
    const r = decodeEventBatch(wire([1, [wireStored(), wireStored({ medium: 'NVME' })], 0]));
    expect(r).toMatchObject({ ok: false, error: { code: 'bad-shape', path: [1, 1, 'medium'] } });
    if (!r.ok) expect(r.error.message).toMatch(/^1\.1\.medium: /);
  });
});
