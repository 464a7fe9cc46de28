import { describe, expect, it } from 'vitest';
import { createRng } from '../../../test/support/gateway/rng.ts';
import { TierBursts } from './tier-bursts.ts';

/** A steady (Poisson) stream of `perSecond` arrivals, seeded. */
function steady(perSecond: number, n = 128, seed = 7): number[] {
  const rng = createRng(seed);
  let t = 0;
  return Array.from({ length: n }, () => (t += (-Math.log(1 - rng()) * 1000) / perSecond));
}

const noted = (times: readonly number[]): TierBursts => {
  const b = new TierBursts();
  for (const t of times) b.note(t);
  return b;
};

describe('TierBursts', () => {
  it('takes no steady stream for bursts, however fast: a hold cannot make its picks heard sooner', () => {
    // At 50 a second 63% of the gaps are under the 20-ms window, as a steady stream's are.
    for (const perSecond of [2, 20, 50, 200])
      expect(noted(steady(perSecond)).bursty(20), `${perSecond}/s`).toBe(false);
  });

  it('takes arrivals together for bursts, within a steady stream too', () => {
    const bursts = (size: number, gapMs: number) =>
      Array.from({ length: 16 }, (_x, k) => Array<number>(size).fill(k * gapMs)).flat();
    expect(noted(bursts(9, 3000)).bursty(20)).toBe(true);
    // Two a second steadily, and every second eight at one instant.
    expect(noted([...steady(2, 32), ...bursts(8, 1000)].sort((a, b) => a - b)).bursty(20)).toBe(true);
  });

  it("sees a burst spread one request a replica once the peers' arrivals are noted, late ones in place", () => {
    // Eight replicas, nine requests a burst, 3 s apart: one replica's own picks come one a burst.
    const own = noted(Array.from({ length: 16 }, (_x, k) => k * 3000));
    expect(own.bursty(20)).toBe(false);
    // The peers' arrivals of each burst, heard 20 ms after this replica's own next one.
    for (let k = 0; k < 16; k++) for (let p = 0; p < 8; p++) own.note(k * 3000 + p * 0.1);
    expect(own.bursty(20)).toBe(true);
  });
});
