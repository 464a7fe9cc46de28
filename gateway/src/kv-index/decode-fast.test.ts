import { Encoder } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import type { KvCacheEvent } from '#sglang/kv-events.ts';
import { encodeEventBatch } from '../../../test/sim/kv-event-codec.ts';
import { createRng, pickInt } from '../../../test/support/gateway/rng.ts';
import { decodeEventBatchGenerally } from './decode.ts';
import { readFastBatch } from './decode-fast.ts';
import { SGLANG_BATCHES } from './sglang-batches.testdata.ts';

const encoder = new Encoder({ useBigInt64: true, ignoreUndefined: true });

/** The fast reader agrees with the general decoder, or declines; never another answer. */
function expectAgreesOrDeclines(payload: Uint8Array, note: string): boolean {
  const fast = readFastBatch(payload);
  if (fast === null) return false;
  expect(decodeEventBatchGenerally(payload), note).toEqual({ ok: true, value: fast });
  return true;
}

const stored = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  type: 'BlockStored',
  block_hashes: [1, -5, 2n ** 40n, -(2n ** 63n)],
  parent_block_hash: null,
  token_ids: [1, 200, 70_000, 0xffff_ffff],
  block_size: 4,
  lora_id: null,
  medium: 'GPU',
  ...over,
});

describe('readFastBatch', () => {
  it("reads SGLang's own batches and the simulator's as the general decoder does", () => {
    for (const b of SGLANG_BATCHES)
      expect(expectAgreesOrDeclines(Buffer.from(b.hex, 'hex'), b.note)).toBe(true);
    const rng = createRng(2928);
    for (let i = 0; i < 50; i++) {
      const events: KvCacheEvent[] = Array.from({ length: pickInt(rng, 0, 4) }, (_, j) => {
        const hashes = Array.from({ length: pickInt(rng, 0, 40) }, () =>
          BigInt.asIntN(
            64,
            BigInt(pickInt(rng, 0, 2 ** 30)) * BigInt(pickInt(rng, 1, 2 ** 30)) * (j % 2 ? -1n : 1n),
          ),
        );
        if (j % 3 === 2) return { type: 'BlockRemoved', blockHashes: hashes, medium: 'CPU_PINNED' };
        return {
          type: 'BlockStored',
          blockHashes: hashes,
          parentBlockHash: j % 2 ? (hashes[0] ?? null) : null,
          tokenIds: Array.from({ length: hashes.length * 4 }, () => pickInt(rng, 0, 2 ** 31)),
          blockSize: 4,
          loraId: null,
          medium: 'GPU',
          cacheSalt: j % 2 ? 'tenant-a' : null,
        };
      });
      expect(
        expectAgreesOrDeclines(encodeEventBatch(1_700_000_000.25, events, i % 3), `sim batch ${i}`),
      ).toBe(true);
    }
  });

  it.each([
    ['an integer timestamp, two fields, every integer width', [17, [stored()]], true],
    [
      'a float32-free float timestamp and a nil rank',
      [1.5, [stored({ medium: undefined, cache_salt: 'x' })], null],
      true,
    ],
    [
      'a removal and a clear',
      [1.5, [{ type: 'BlockRemoved', block_hashes: [3], medium: 'DISK' }, { type: 'AllBlocksCleared' }], 0],
      true,
    ],
    ['a key it skips', [1.5, [stored({ lora_name: 'a', session_id: null })], 0], true],
    ['a key it does not know', [1.5, [stored({ priority: 'a' })], 0], false],
    ['a skipped key of another kind', [1.5, [stored({ session_id: 7 })], 0], false],
    ['a hash as a float', [1.5, [stored({ block_hashes: [1.5] })], 0], false],
    ['an integral float hash', [1.5, [stored({ block_hashes: [3.0 + 0.5 - 0.5] })], 0], null],
    ['a hash past int64', [1.5, [stored({ block_hashes: [2n ** 63n] })], 0], false],
    ['a negative token id', [1.5, [stored({ token_ids: [-1] })], 0], false],
    ['no parent key', [1.5, [stored({ parent_block_hash: undefined })], 0], false],
    ['no lora_id key', [1.5, [stored({ lora_id: undefined })], 0], false],
    ['block size 0', [1.5, [stored({ block_size: 0 })], 0], false],
    ['an unknown medium', [1.5, [stored({ medium: 'TAPE' })], 0], false],
    ['an unknown type', [1.5, [{ type: 'BlockMoved' }], 0], false],
    ['a batch of four', [1.5, [], 0, 0], false],
    ['an event as an array', [1.5, [[1, 2]], 0], false],
  ] as const)('%s: agrees or declines', (note, batch, read) => {
    const got = expectAgreesOrDeclines(encoder.encode(batch), note);
    if (read !== null) expect(got).toBe(read);
  });

  it('gives a string read before only for the same bytes (salts of one length, non-ASCII)', () => {
    const salts = ['tenant-a', 'tenant-b', 'tenant-ä', 'tenant-a', 'tenant-ab', 'tenant-', 'tenant-b'];
    for (const cache_salt of salts) {
      const payload = encoder.encode([1_700_000_000, [stored({ cache_salt })], null]);
      expect(expectAgreesOrDeclines(payload, cache_salt)).toBe(true);
      const event = readFastBatch(payload)?.events[0];
      expect(event?.type === 'BlockStored' ? event.cacheSalt : undefined).toBe(cache_salt);
    }
  });

  it('agrees or declines on damaged bytes: flipped, cut short, with bytes left over', () => {
    const rng = createRng(43);
    const good = encodeEventBatch(
      1_700_000_000.5,
      [
        {
          type: 'BlockStored',
          blockHashes: [1n, -(2n ** 62n)],
          parentBlockHash: 9n,
          tokenIds: [1, 2, 3, 4, 5, 6, 7, 8],
          blockSize: 4,
          loraId: null,
          medium: 'GPU',
          cacheSalt: 's',
        },
        { type: 'BlockRemoved', blockHashes: [2n ** 40n], medium: 'GPU' },
      ],
      0,
    );
    let read = 0;
    for (let i = 0; i < 3_000; i++) {
      const bytes = Uint8Array.from(good);
      const at = pickInt(rng, 0, bytes.length - 1);
      bytes[at] = pickInt(rng, 0, 255);
      const cut = i % 5 === 0 ? bytes.subarray(0, pickInt(rng, 0, bytes.length)) : bytes;
      if (expectAgreesOrDeclines(cut, `byte ${at} of case ${i}`)) read++;
    }
    expect(read).toBeGreaterThan(0);
    expect(readFastBatch(Buffer.concat([good, Buffer.of(0xc0)]))).toBeNull();
  });
});
