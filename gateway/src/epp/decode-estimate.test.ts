import { assert, describe, expect, it } from 'vitest';
import type { BlockStored } from '#sglang/kv-events.ts';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { OutputAttribution, type MeasuredOutput } from '../kv-index/output-attribution.ts';
import { DecodeEstimate, type DecodingStream } from './decode-estimate.ts';

function setup(): { clock: ManualClock; estimate: DecodeEstimate; reports: number[] } {
  const clock = new ManualClock();
  return { clock, estimate: new DecodeEstimate(clock), reports: [] };
}

/** Ends `s` as having run to its end, unmeasured: its timing, to be handed back with its measurement. */
function endTimed(s: DecodingStream): number {
  const ms = s.end(true);
  assert(ms !== undefined, 'a stream that ran to its end unmeasured hands out its timing');
  return ms;
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

  /** Eight answers of `output` real tokens at 10 ms a token, each asked up to `cap`, measured after their end. */
  function measureEight(clock: ManualClock, estimate: DecodeEstimate, output: number, cap: number): void {
    for (let i = 0; i < 8; i++) {
      const s = estimate.start('e', cap, () => undefined, { id: `m${i}`, cap });
      clock.advance((output - 1) * 10);
      const streamedMs = endTimed(s);
      clock.advance(100);
      estimate.measured('e', { id: `m${i}`, min: output, max: output, cap, streamedMs });
    }
  }

  it("counts a running answer's decode as what measured answers still ran, not its max_tokens", () => {
    const { clock, estimate, reports } = setup();
    // Answers stop at 100 tokens though each may run 1,000.
    measureEight(clock, estimate, 100, 1000);
    expect(estimate.realPaceOf('e')).toBeCloseTo(10);
    estimate.start('e', 1000, (t) => reports.push(t), { id: 'r', cap: 1000 });
    clock.advance(100);
    // At the first look 1 + 100 / 10 tokens are out and 89 to come: 1,000 - 89 on the books' terms.
    expect(reports).toEqual([911]);
    clock.advance(500);
    expect(reports.at(-1)).toBe(961);
  });

  it('keeps max_tokens - streamed where measured answers ran to their cap', () => {
    const { clock, estimate, reports } = setup();
    measureEight(clock, estimate, 200, 200);
    estimate.start('e', 200, (t) => reports.push(t), { id: 'r', cap: 200 });
    clock.advance(300);
    // 1 + t / 10 tokens out, said as it passes 16 (at 200 ms: 21), and 32 (at 400 ms: 41).
    expect(reports).toEqual([21]);
    clock.advance(100);
    expect(reports).toEqual([21, 41]);
  });

  it('ends a stream whose output was measured while it streamed: the runtime finished it', () => {
    const { clock, estimate, reports } = setup();
    estimate.start('e', 300, (t) => reports.push(t), { id: 'r', cap: 300 });
    clock.advance(50);
    estimate.measured('e', { id: 'r', min: 40, max: 40, cap: 300 });
    expect(reports).toEqual([300]);
    expect(estimate.lengthsOf('e')?.observations).toBe(1);
  });

  it("hands an ended stream's timing out once, and learns no real pace from a measurement without it", () => {
    const { clock, estimate } = setup();
    const s = estimate.start('e', 100, () => undefined, { id: 'r' });
    clock.advance(990);
    expect(s.end(true)).toBe(990);
    expect(s.end(true)).toBeUndefined();
    estimate.measured('e', { id: 'r', min: 100, max: 100 });
    expect(estimate.realPaceOf('e')).toBeUndefined();
    expect(estimate.start('e', 100, () => undefined, { id: 'x' }).end(false)).toBeUndefined();
  });

  it('learns the real pace from a store the attribution takes up to 5 s after the end, not later', () => {
    // The attribution keeps the only book of ended answers: the stream's timing goes in with its end
    // (as the exchange hands it over) and comes back with its measurement, within the grace.
    const { clock, estimate } = setup();
    const attribution = new OutputAttribution();
    const page = (lastPage: bigint): BlockStored => ({
      type: 'BlockStored',
      blockHashes: [lastPage + 1n],
      parentBlockHash: lastPage,
      tokenIds: [1],
      blockSize: 1,
      loraId: null,
      medium: 'GPU',
      cacheSalt: null,
    });
    for (const [id, lastPage] of [
      ['a', 10n],
      ['b', 20n],
    ] as const)
      attribution.expect('e', { id, lastPage, tail: [], blockSize: 1, cacheSalt: null });
    const a = estimate.start('e', 100, () => undefined, { id: 'a' });
    const b = estimate.start('e', 100, () => undefined, { id: 'b' });
    clock.advance(990);
    attribution.ended('a', clock.now(), a.end(true));
    attribution.ended('b', clock.now(), b.end(true));
    clock.advance(5000);
    // At page size 1 one stored page past the prompt: an output of 2 tokens, 990 ms after the first.
    const ma = attribution.stored('e', page(10n), clock.now());
    expect(ma).toEqual({ id: 'a', min: 2, max: 2, streamedMs: 990 });
    estimate.measured('e', ma as MeasuredOutput);
    expect(estimate.realPaceOf('e')).toBeCloseTo(990);
    clock.advance(1);
    expect(attribution.stored('e', page(20n), clock.now())).toBeUndefined();
    expect(attribution.sizeOf('e')).toBe(0);
  });

  it('takes an answer whose page-wide measurement reaches its max_tokens as having run to it', () => {
    const { clock, estimate } = setup();
    const s = estimate.start('e', 20, () => undefined, { id: 'r', cap: 20 });
    clock.advance(190);
    const streamedMs = endTimed(s);
    // At page size 16 its store says 13-20 tokens: 20, at 10 ms each after the first (the middle would say 12.3).
    estimate.measured('e', { id: 'r', min: 13, max: 20, cap: 20, streamedMs });
    expect(estimate.realPaceOf('e')).toBeCloseTo(10);
  });
});
