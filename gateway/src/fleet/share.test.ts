import { describe, expect, it } from 'vitest';
import { createRng, pickInt } from '../../../test/support/gateway/rng.ts';
import { computeFleetShare } from './share.ts';

describe('computeFleetShare', () => {
  it('gives a lone replica the whole bound', () => {
    expect(computeFleetShare(128, [], 'gw-a')).toBe(128);
    expect(computeFleetShare(128, ['gw-a'], 'gw-a')).toBe(128);
  });

  it('splits the bound so the shares add up to it, the remainder to the first names', () => {
    const members = ['gw-c', 'gw-a', 'gw-b'];
    expect(members.map((m) => computeFleetShare(10, members, m))).toEqual([3, 4, 3]);
  });

  it('counts itself even before the peers list it', () => {
    expect(computeFleetShare(10, ['gw-a', 'gw-b'], 'gw-c')).toBe(3);
  });

  it('never gives less than one permit, and keeps a bound of zero (no queue) at zero', () => {
    expect(['a', 'b', 'c'].map((m) => computeFleetShare(2, ['a', 'b', 'c'], m))).toEqual([1, 1, 1]);
    expect(['a', 'b', 'c'].map((m) => computeFleetShare(0, ['a', 'b', 'c'], m))).toEqual([0, 0, 0]);
  });

  it('shares add up to the bound whenever it is at least the number of replicas (seeded)', () => {
    const rng = createRng(7);
    for (let run = 0; run < 500; run++) {
      const n = pickInt(rng, 1, 12);
      const members = Array.from({ length: n }, (_, i) => `gw-${pickInt(rng, 0, 1e6)}-${i}`);
      const total = pickInt(rng, n, 5000);
      const sum = members.reduce((s, m) => s + computeFleetShare(total, members, m), 0);
      expect(sum).toBe(total);
    }
  });
});
