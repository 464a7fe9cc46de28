import { describe, expect, it } from 'vitest';
import { createSeededRandom } from '#kube/seeded-random.ts';
import { bootstrapMedianDifference, computeCdf, computeQuantiles, quantileSorted } from './stats.ts';

describe('quantiles', () => {
  it('interpolates between ranks as numpy does', () => {
    expect(quantileSorted([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantileSorted([10], 0.99)).toBe(10);
    expect(quantileSorted([], 0.5)).toBeUndefined();
    const v = Array.from({ length: 101 }, (_, i) => i);
    expect(computeQuantiles(v.reverse())).toEqual({ p50: 50, p90: 90, p99: 99 });
  });
});

describe('computeCdf', () => {
  it('holds the minimum, every 5% step and the maximum, in order', () => {
    const v = Array.from({ length: 101 }, (_, i) => 100 - i);
    const cdf = computeCdf(v);
    expect(cdf).toHaveLength(21);
    expect(cdf?.[0]).toBe(0);
    expect(cdf?.[1]).toBe(5);
    expect(cdf?.[10]).toBe(50);
    expect(cdf?.[20]).toBe(100);
    expect(computeCdf([])).toBeUndefined();
    expect(computeCdf([7])).toEqual(Array.from({ length: 21 }, () => 7));
  });
});

describe('bootstrapMedianDifference', () => {
  const opts = { resamples: 1000, confidence: 0.95, seed: 42 };
  const jitter = (base: number, n: number, seed: number) => {
    const r = createSeededRandom(seed);
    return Array.from({ length: n }, () => base + r() * 10);
  };

  it('is reproducible from its seed', () => {
    const a = [jitter(100, 8, 1), jitter(100, 8, 2), jitter(100, 8, 3)];
    const b = [jitter(60, 8, 4), jitter(60, 8, 5), jitter(60, 8, 6)];
    expect(bootstrapMedianDifference(a, b, opts)).toEqual(bootstrapMedianDifference(a, b, opts));
  });

  it('puts a clear speed-up wholly below zero, resampling whole samples', () => {
    const a = [jitter(100, 8, 1), jitter(100, 8, 2), jitter(100, 8, 3)];
    const b = [jitter(60, 8, 4), jitter(60, 8, 5), jitter(60, 8, 6)];
    const d = bootstrapMedianDifference(a, b, opts)!;
    expect(d.unit).toBe('samples');
    expect(d.difference).toBeGreaterThan(-45);
    expect(d.difference).toBeLessThan(-35);
    expect(d.high).toBeLessThan(0);
    expect(d.low).toBeLessThanOrEqual(d.difference);
  });

  it('straddles zero when the arms are drawn alike', () => {
    const a = [jitter(100, 8, 1), jitter(100, 8, 2), jitter(100, 8, 3)];
    const b = [jitter(100, 8, 7), jitter(100, 8, 8), jitter(100, 8, 9)];
    const d = bootstrapMedianDifference(a, b, opts)!;
    expect(d.low).toBeLessThan(0);
    expect(d.high).toBeGreaterThan(0);
  });

  it('falls back to requests with one sample an arm, and says so', () => {
    const d = bootstrapMedianDifference([jitter(100, 8, 1)], [jitter(50, 8, 2)], opts)!;
    expect(d.unit).toBe('requests');
    expect(d.high).toBeLessThan(0);
  });

  it('has no answer for an arm without values', () => {
    expect(bootstrapMedianDifference([[]], [[1]], opts)).toBeUndefined();
  });
});
