import { describe, expect, it } from 'vitest';
import { computePageDigests, computeSaltSeed, toBlockHash } from './kv-event-hash.ts';

const seq = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

// What SGLang 0.5.23's own radix cache (UnifiedRadixCache over the Rust tree core,
// KV events on, page size 4) published for these keys (`kit tree-events`).
describe('KV event block hashes', () => {
  it('chains SHA-256 over little-endian uint32 pages; publishes the first 8 bytes as a signed int64', () => {
    const hashes = computePageDigests(null, seq(1, 12), 4).map(toBlockHash);
    expect(hashes).toEqual([-3488128144981237669n, 5674439469042975057n, -1307369107475853156n]);
  });

  it('continues a chain from a parent digest (a child node hashes like the whole path)', () => {
    const head = computePageDigests(null, seq(1, 8), 4);
    const tail = computePageDigests(head.at(-1) ?? null, seq(9, 4), 4);
    expect(tail.map(toBlockHash)).toEqual([-1307369107475853156n]);
  });

  it('starts a salted chain from SHA-256("sglang-cache-salt-v1\\0" + salt)', () => {
    const hashes = computePageDigests(computeSaltSeed('s'), seq(1, 8), 4).map(toBlockHash);
    expect(hashes).toEqual([-7176757890424379025n, 6476392991220973965n]);
    expect(computeSaltSeed(null)).toBeNull();
  });

  it('hashes one token a block at page size 1, and refuses ids beyond uint32', () => {
    expect(computePageDigests(null, [7, 8, 9], 1)).toHaveLength(3);
    expect(() => computePageDigests(null, [2 ** 32], 1)).toThrow(RangeError);
  });
});
