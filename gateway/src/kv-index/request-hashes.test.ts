import { describe, expect, it } from 'vitest';
import { computeSaltSeed } from '#sglang/kv-event-hash.ts';
import { computeRequestBlockHashes, readSaltSeed } from './request-hashes.ts';
import { SGLANG_BATCHES } from './sglang-batches.testdata.ts';

const seq = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

function storedBy(note: string): bigint[] {
  const e = SGLANG_BATCHES.find((b) => b.note === note)?.events[0];
  if (e?.type !== 'BlockStored') throw new Error(`no BlockStored in ${note}`);
  return e.blockHashes;
}

describe('computeRequestBlockHashes', () => {
  it('gives the hashes SGLang published for the same pages, unsalted and salted', () => {
    expect(computeRequestBlockHashes(seq(1, 12), 4, null)).toEqual(storedBy('insert 1..12'));
    expect(computeRequestBlockHashes(seq(1, 8), 4, 'tenant-a')).toEqual(
      storedBy('insert 1..8 salted tenant-a'),
    );
  });

  it('chains across pages: a page after a shared first page has its own hash', () => {
    const [first, second] = computeRequestBlockHashes([1, 2, 3, 4, 99, 98, 97, 96], 4, null);
    expect(first).toBe(storedBy('insert 1..12')[0]);
    expect(second).toBe(storedBy('insert 1..4,99,98,97,96')[0]);
  });

  it('hashes whole pages only', () => {
    expect(computeRequestBlockHashes(seq(1, 11), 4, null)).toHaveLength(2);
    expect(computeRequestBlockHashes(seq(1, 3), 4, null)).toEqual([]);
  });

  it('never gives two salts (or none) a common block', () => {
    const all = [null, 'a', 'b', ''].flatMap((s) => computeRequestBlockHashes(seq(1, 32), 4, s));
    expect(new Set(all).size).toBe(all.length);
  });

  it('refuses a page size that is not a positive integer', () => {
    expect(() => computeRequestBlockHashes([1], 0, null)).toThrow(RangeError);
  });
});

describe('readSaltSeed', () => {
  it("is computeSaltSeed's digest, computed once per salt", () => {
    const first = readSaltSeed('team-a');
    expect(first).toEqual(computeSaltSeed('team-a'));
    expect(readSaltSeed('team-a')).toBe(first);
    expect(readSaltSeed('team-b')).not.toEqual(first);
    expect(readSaltSeed(null)).toBeNull();
  });
});
