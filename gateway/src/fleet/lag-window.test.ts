import { describe, expect, it } from 'vitest';
import { LagWindow } from './lag-window.ts';

describe('LagWindow', () => {
  const filled = (lags: readonly number[], opts = {}): LagWindow => {
    const w = new LagWindow({ minSamples: 10, fallbackMs: 20, floorMs: 0.25, ceilingMs: 40, ...opts });
    lags.forEach((l, i) => w.add(l, i));
    return w;
  };

  it('answers the fallback until enough lags were measured', () => {
    expect(filled([1, 1, 1]).unheardMs(3)).toBe(20);
  });

  it('answers a high quantile of the recent lags, not their mean', () => {
    const lags = [...Array<number>(98).fill(0.3), 7, 9];
    expect(filled(lags).unheardMs(100)).toBe(7); // p99 of 100: the 99th smallest
    expect(filled(lags, { quantile: 0.5 }).unheardMs(100)).toBe(0.3);
    // In numeric order, not as strings ("10" < "2"), whatever order they came in.
    expect(filled([30, 10, ...Array<number>(98).fill(2)]).unheardMs(100)).toBe(10);
  });

  it('keeps the answer within its bounds: a stalled process is not what a hold waits out', () => {
    expect(filled(Array<number>(20).fill(0)).unheardMs(20)).toBe(0.25);
    expect(filled(Array<number>(20).fill(900)).unheardMs(20)).toBe(40);
  });

  it('forgets lags older than maxAgeMs, and the oldest once it holds size of them', () => {
    const w = filled(Array<number>(20).fill(30), { maxAgeMs: 1000 });
    expect(w.unheardMs(500)).toBe(30);
    for (let i = 0; i < 20; i++) w.add(2, 600 + i);
    expect(w.unheardMs(620)).toBe(30); // the old ones still count
    expect(w.unheardMs(1100)).toBe(2); // now they are gone
    const small = filled(Array<number>(20).fill(30), { size: 20 });
    for (let i = 0; i < 20; i++) small.add(2, 20 + i);
    expect(small.unheardMs(40)).toBe(2);
  });

  it('answers the mean of the recent lags for the picks in transit, each within the ceiling', () => {
    const lags = [...Array<number>(98).fill(0.3), 7, 900];
    expect(filled(lags).meanMs(100)).toBeCloseTo((98 * 0.3 + 7 + 40) / 100, 6);
    expect(filled([1, 1, 1]).meanMs(3)).toBe(20);
  });
});
