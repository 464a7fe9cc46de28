import { describe, expect, it } from 'vitest';
import { computePooledBound } from './pooled-bound.ts';
import { BLOCK_TOKENS, computeBound, type TraceRecord } from './replay-trace.ts';

const B = BLOCK_TOKENS;
const req = (hash_ids: number[], input_length = hash_ids.length * B): TraceRecord => ({
  timestamp: 0,
  input_length,
  output_length: 1,
  hash_ids,
});

describe('computePooledBound', () => {
  it('equals the infinite-cache bound when the pool holds everything', () => {
    const records = [req([1, 2, 3]), req([1, 2, 4], 2 * B + 100), req([1, 2, 3, 5]), req([7]), req([1, 2])];
    const inf = computeBound(records);
    const pooled = computePooledBound(records, 1e9);
    expect(pooled.cached).toBe(inf.cached);
    expect(pooled.hitRate).toBeCloseTo(inf.hitRate, 12);
  });

  it('loses a reuse whose distance exceeds the pool, keeps one within it', () => {
    // A (2 blocks), B (2 blocks), A again: B pushes out A's leaf first, then its prefix.
    const records = [req([1, 2]), req([3, 4]), req([1, 2])];
    expect(computePooledBound(records, 2 * B).cached).toBe(0);
    expect(computePooledBound(records, 3 * B).cached).toBe(B);
    expect(computePooledBound(records, 4 * B).cached).toBe(2 * B - 1);
  });

  it('evicts a request’s deeper blocks before its prefix', () => {
    // Room for 3 blocks: after [1,2] then [3], block 2 (the leaf of the older request) goes
    // before block 1 when [4] arrives; [1, 9] then still finds block 1.
    const records = [req([1, 2]), req([3]), req([4]), req([1, 9])];
    expect(computePooledBound(records, 3 * B).cached).toBe(B);
  });

  it('counts whole pages only, and never the last token', () => {
    const records = [req([1, 2], B + 100), req([1, 2], B + 100)];
    // Second request: 612 tokens cached at most 611, in pages of 64: 576.
    expect(computePooledBound(records, 1e9, 64).cached).toBe(576);
    expect(computePooledBound(records, 1e9, 1).cached).toBe(B + 99);
  });

  it('a pool smaller than one request keeps the prefix that fits', () => {
    expect(computePooledBound([req([1, 2, 3]), req([1, 2, 3])], B + 100).cached).toBe(B);
    expect(computePooledBound([req([1, 2, 3]), req([1, 2, 3])], B - 1).cached).toBe(0);
  });
});
