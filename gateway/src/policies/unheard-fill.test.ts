import { describe, expect, it } from 'vitest';
import { hashToUnit } from '#kube/seeded-random.ts';
import { pickByFill, pourOver, rankedDrawPoint } from './unheard-fill.ts';

describe('pourOver', () => {
  it('raises the cheapest costs to one level, the volume shared among them', () => {
    expect(pourOver([180, 190], 40)).toEqual([25, 15]);
    expect(pourOver([10, 0, 30], 20)).toEqual([5, 15, 0]);
  });

  it('reaches no cost further above the cheapest than the volume', () => {
    expect(pourOver([100, 200, 150], 40)).toEqual([40, 0, 0]);
  });

  it('fills nothing with nothing to pour', () => {
    expect(pourOver([1, 2], 0)).toEqual([0, 0]);
    expect(pourOver([], 5)).toEqual([]);
  });
});

describe('pickByFill', () => {
  it('takes each filled index for its share of the unit interval, in order', () => {
    expect(pickByFill([0, 25, 15], 0)).toBe(1);
    expect(pickByFill([0, 25, 15], 0.62)).toBe(1);
    expect(pickByFill([0, 25, 15], 0.63)).toBe(2);
    expect(pickByFill([0, 25, 15], 0.999_999)).toBe(2);
    expect(pickByFill([0, 0], 0.5)).toBeUndefined();
  });
});

describe('rankedDrawPoint', () => {
  it('shifts the shared point by rank / k: k consecutive ranks cover k equal shares', () => {
    const shares = (u: number) =>
      [0, 1, 2].map((rank) => pickByFill([10, 10, 10], rankedDrawPoint(rank, 3, u))).sort();
    expect(shares(0)).toEqual([0, 1, 2]);
    expect(shares(0.5)).toEqual([0, 1, 2]);
    expect(shares(0.99)).toEqual([0, 1, 2]);
    expect(rankedDrawPoint(1, 2, 0.75)).toBe(0.25);
  });
});

describe('hashToUnit, as the draw among runtimes', () => {
  it('is the same for a key, within [0, 1), and spread evenly over sequential keys', () => {
    expect(hashToUnit('3:q1')).toBe(hashToUnit('3:q1'));
    const draws = Array.from({ length: 4000 }, (_x, i) => hashToUnit(`${i % 8}:${i}`));
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...draws)).toBeLessThan(1);
    const tenths = Array<number>(10).fill(0);
    for (const d of draws) tenths[Math.floor(d * 10)]!++;
    for (const n of tenths) expect(n).toBeGreaterThan(320);
  });
});
