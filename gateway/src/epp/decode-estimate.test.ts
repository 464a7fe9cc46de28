import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { DecodeEstimate } from './decode-estimate.ts';

function setup(): { clock: ManualClock; estimate: DecodeEstimate; reports: number[] } {
  const clock = new ManualClock();
  return { clock, estimate: new DecodeEstimate(clock), reports: [] };
}

describe('DecodeEstimate', () => {
  it("reports nothing before an endpoint's first stream ended, then every 16 tokens at its pace", () => {
    const { clock, estimate, reports } = setup();
    const first = estimate.start('e', 100, (t) => reports.push(t));
    clock.advance(2000);
    expect(reports).toEqual([]);
    first.end(true);
    expect(estimate.paceOf('e')).toBe(20);
    estimate.start('e', 100, (t) => reports.push(t));
    clock.advance(1000);
    // 20 ms a predicted token: 16 at 320 ms (reported at the 400 ms look), 32 at 640 (700), ...
    expect(reports).toEqual([20, 35, 50]);
    clock.advance(10_000);
    expect(reports.at(-1)).toBe(100);
    expect(reports.filter((t) => t === 100)).toHaveLength(1);
  });

  it('says a prediction shorter than a step once, when it has streamed', () => {
    const { clock, estimate, reports } = setup();
    const first = estimate.start('e', 5, () => undefined);
    clock.advance(100);
    first.end(true);
    estimate.start('e', 5, (t) => reports.push(t));
    clock.advance(1000);
    expect(reports).toEqual([5]);
  });

  it("learns each endpoint's pace apart, and only from answers that ran to their end", () => {
    const { clock, estimate } = setup();
    const a = estimate.start('a', 10, () => undefined);
    const b = estimate.start('b', 10, () => undefined);
    clock.advance(100);
    a.end(true);
    b.end(false);
    expect(estimate.paceOf('a')).toBe(10);
    expect(estimate.paceOf('b')).toBeUndefined();
    const again = estimate.start('a', 10, () => undefined);
    clock.advance(300);
    again.end(true);
    // EWMA: 10 + 0.1 x (30 - 10)
    expect(estimate.paceOf('a')).toBeCloseTo(12);
  });

  it('keeps no timer while no answer streams', () => {
    const { clock, estimate } = setup();
    const s = estimate.start('e', 10, () => undefined);
    expect(clock.pendingTimers).toBe(1);
    s.end(true);
    clock.advance(100);
    expect(clock.pendingTimers).toBe(0);
  });
});
