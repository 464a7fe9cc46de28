import { describe, expect, it } from 'vitest';
import { PrefillTracker } from './prefill-tracker.ts';

describe('PrefillTracker', () => {
  it('counts sent prompt tokens until the first byte, once', () => {
    const t = new PrefillTracker();
    t.sent('r1', 'a', 1000, 0);
    t.sent('r2', 'a', 500, 0);
    t.sent('r3', 'b', 200, 0);
    expect(t.pendingTokens('a')).toBe(1500);
    t.firstByte('r1', 100);
    expect(t.pendingTokens('a')).toBe(500);
    t.finished('r1', { promptTokens: 1000, cachedTokens: 0 }); // already settled
    expect(t.pendingTokens('a')).toBe(500);
    t.finished('r2', undefined); // ended without a first byte (non-streaming, failed)
    expect(t.pendingTokens('a')).toBe(0);
    expect(t.pendingTokens('b')).toBe(200);
  });

  it('learns the rate from a request alone on its endpoint: uncached tokens over time to first byte', () => {
    const t = new PrefillTracker();
    t.sent('r1', 'a', 2000, 1_000);
    t.firstByte('r1', 1_500); // 0.5 s
    t.finished('r1', { promptTokens: 2000, cachedTokens: 1000 }); // 1000 prefilled
    expect(t.tokensPerSecond('a')).toBe(2000);
    expect(t.tokensPerSecond('b')).toBeUndefined();
  });

  it('does not learn from a request that queued behind another, or whose first byte it never saw', () => {
    const t = new PrefillTracker();
    t.sent('r1', 'a', 1000, 0);
    t.sent('r2', 'a', 1000, 0); // behind r1: its wait is a queue, not its prefill
    t.firstByte('r1', 1000);
    t.firstByte('r2', 2000);
    t.finished('r2', { promptTokens: 1000, cachedTokens: 0 });
    expect(t.tokensPerSecond('a')).toBeUndefined();
    t.finished('r1', { promptTokens: 1000, cachedTokens: 0 });
    expect(t.tokensPerSecond('a')).toBe(1000);
    t.sent('r3', 'b', 1000, 0);
    t.finished('r3', { promptTokens: 1000, cachedTokens: 0 }); // buffered: completion is not prefill
    expect(t.tokensPerSecond('b')).toBeUndefined();
  });

  it('smooths samples (EWMA) and skips a fully cached prompt', () => {
    const t = new PrefillTracker();
    const sample = (id: string, ms: number, cached: number) => {
      t.sent(id, 'a', 1000, 0);
      t.firstByte(id, ms);
      t.finished(id, { promptTokens: 1000, cachedTokens: cached });
    };
    sample('r1', 1000, 0); // 1000 tok/s
    sample('r2', 500, 0); // 2000 tok/s → 1000 + 0.2 x 1000
    expect(t.tokensPerSecond('a')).toBeCloseTo(1200);
    sample('r3', 10, 1000); // nothing prefilled: no sample
    expect(t.tokensPerSecond('a')).toBeCloseTo(1200);
  });

  it('stays bounded: past 100,000 open requests the oldest stops counting', () => {
    const t = new PrefillTracker();
    for (let i = 0; i < 100_001; i++) t.sent(`r${i}`, 'a', 1, 0);
    expect(t.pendingTokens('a')).toBe(100_000);
  });
});
