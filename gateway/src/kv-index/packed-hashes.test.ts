import { describe, expect, it } from 'vitest';
import { PackedBlockHashes, joinBlockHash, splitBlockHash, splitHi, splitLo } from './packed-hashes.ts';
import { computeRequestBlockHashes, computeRequestPackedHashes } from './request-hashes.ts';

const EDGES = [
  0n,
  1n,
  -1n,
  2n ** 31n,
  -(2n ** 31n),
  2n ** 32n,
  2n ** 63n - 1n,
  -(2n ** 63n),
  -3488128144981237669n,
];

describe('packed block hashes', () => {
  it('splits a signed int64 into its high and low int32 halves and joins them back', () => {
    splitBlockHash(-3488128144981237669n);
    // -3488128144981237669 = 0xcf97_e3a4_1b2c_1a5b as two's complement: the halves as int32s.
    const unsigned = BigInt.asUintN(64, -3488128144981237669n);
    expect([splitHi(), splitLo()]).toEqual([
      Number(BigInt.asIntN(32, unsigned >> 32n)),
      Number(BigInt.asIntN(32, unsigned)),
    ]);
    for (const h of EDGES) {
      splitBlockHash(h);
      expect(joinBlockHash(splitHi(), splitLo())).toBe(h);
    }
    expect(PackedBlockHashes.from(EDGES).toBigInts()).toEqual(EDGES);
  });

  it("packs a request's hashes equal to the bigints SGLang publishes, salted or not, whole pages only", () => {
    const tokens = Array.from({ length: 1003 }, (_, i) => (i * 7919) % 32768);
    for (const salt of [null, 'tenant-a'])
      for (const pageSize of [1, 4, 16])
        expect(computeRequestPackedHashes(tokens, pageSize, salt).toBigInts()).toEqual(
          computeRequestBlockHashes(tokens, pageSize, salt),
        );
    expect(() => computeRequestPackedHashes(tokens, 0, null)).toThrow(RangeError);
  });
});
