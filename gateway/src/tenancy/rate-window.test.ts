import { describe, expect, it } from 'vitest';
import { computeWaitMs, describeDecision, estimateRate, fitsLimits, WINDOW_MS } from './rate-window.ts';

const counts = (rc: number, rp: number, tc = 0, tp = 0) => ({
  requests: { current: rc, previous: rp },
  tokens: { current: tc, previous: tp },
});

describe('sliding-minute estimate', () => {
  it('weights the previous window by the share of the minute it still covers', () => {
    expect(estimateRate({ current: 10, previous: 60 }, 0.25)).toBe(55);
    expect(estimateRate({ current: 10, previous: 60 }, 0)).toBe(70);
  });

  it('no 2x burst at a window boundary: a full previous minute still counts at its start', () => {
    const limits = { requestsPerMinute: 60 };
    expect(fitsLimits(counts(0, 60), limits, 0.01, 1)).toBe('requests');
    expect(fitsLimits(counts(0, 60), limits, 0.5, 1)).toBeUndefined();
  });

  it('tokens: refused once the estimate reaches the limit; requests are checked first', () => {
    expect(fitsLimits(counts(0, 0, 999, 0), { tokensPerMinute: 1000 }, 0, 1)).toBeUndefined();
    expect(fitsLimits(counts(0, 0, 1000, 0), { tokensPerMinute: 1000 }, 0, 1)).toBe('tokens');
    expect(fitsLimits(counts(5, 0, 1000, 0), { requestsPerMinute: 5, tokensPerMinute: 1000 }, 0, 1)).toBe(
      'requests',
    );
    expect(fitsLimits(counts(1e9, 1e9, 1e9, 1e9), {}, 0, 1)).toBeUndefined();
  });

  it('a batch needs room for all its requests; one larger than the limit fits only an empty window', () => {
    const limits = { requestsPerMinute: 10 };
    expect(fitsLimits(counts(7, 0), limits, 0, 3)).toBeUndefined();
    expect(fitsLimits(counts(7, 0), limits, 0, 4)).toBe('requests');
    expect(fitsLimits(counts(0, 0), limits, 0, 25)).toBeUndefined();
    expect(fitsLimits(counts(1, 0), limits, 0, 25)).toBe('requests');
  });
});

describe('computeWaitMs', () => {
  it('within this window when the previous one is what holds the estimate up', () => {
    // 60·(1−f)+10 ≤ 39 ⇒ f ≥ 31/60
    expect(computeWaitMs({ current: 10, previous: 60 }, 0.25, 39)).toBeCloseTo(
      (31 / 60 - 0.25) * WINDOW_MS,
      6,
    );
  });

  it('into the next window when this one alone is over', () => {
    // rest of this window, then 50·(1−g) ≤ 39 ⇒ g ≥ 11/50
    expect(computeWaitMs({ current: 50, previous: 0 }, 0.5, 39)).toBeCloseTo((0.5 + 11 / 50) * WINDOW_MS, 6);
    expect(computeWaitMs({ current: 1, previous: 0 }, 0.5, 5)).toBe(0);
  });
});

describe('describeDecision', () => {
  it('remaining counts this request; a refusal names its limit and when to retry', () => {
    const limits = { requestsPerMinute: 3, tokensPerMinute: 500 };
    const ok = describeDecision(counts(1, 0, 100, 0), limits, 0, { requests: 1, tokens: 50 }, undefined);
    expect(ok).toEqual({
      allowed: true,
      requests: { limit: 3, remaining: 1 },
      tokens: { limit: 500, remaining: 350 },
    });
    const no = describeDecision(
      counts(3, 0),
      { requestsPerMinute: 3 },
      0.5,
      { requests: 1, tokens: 0 },
      'requests',
    );
    expect(no).toMatchObject({ allowed: false, limited: 'requests', requests: { limit: 3, remaining: 0 } });
    // 3·(1−g) ≤ 2 ⇒ g ≥ 1/3: 30 s + 20 s
    expect(no.allowed ? 0 : no.retryAfterSeconds).toBe(50);
  });
});
