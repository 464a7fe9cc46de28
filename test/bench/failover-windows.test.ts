import { describe, expect, it } from 'vitest';
import { computeRoundSpread, computeWindowHit, judgeFailover } from './failover-windows.ts';
import type { RequestRecord } from './replay-stats.ts';

const rec = (sentAtMs: number, prompt: number, cached: number, ok = true, worker = 'w0'): RequestRecord => ({
  index: sentAtMs,
  ok,
  status: ok ? 200 : 502,
  worker,
  sentAtMs,
  ttftMs: 1,
  e2eMs: 2,
  promptTokens: prompt,
  cachedTokens: cached,
  completionTokens: 1,
});

describe('failover windows', () => {
  it('pools the answered requests sent in [from, to), by send time', () => {
    const records = [rec(0, 100, 90), rec(999, 100, 10), rec(1000, 100, 100), rec(500, 100, 0, false)];
    expect(computeWindowHit(records, 0, 1000)).toEqual({ requests: 2, hit: 0.5 });
    expect(computeWindowHit(records, 1000, 2000)).toEqual({ requests: 1, hit: 1 });
    expect(computeWindowHit(records, 2000, 3000)).toEqual({ requests: 0, hit: null });
    expect(computeWindowHit(records, 0, 2000, (r) => r.cachedTokens > 50)).toEqual({
      requests: 2,
      hit: 0.95,
    });
  });

  it('meets the goals within the tolerance, and says a miss storm when the window after the restart drops', () => {
    const w = (hit: number | null) => ({ requests: 10, hit });
    expect(
      judgeFailover({ failover: 0.295, baseline: 0.3 }, { failover: w(0.29), baseline: w(0.3) }).map(
        (g) => g.met,
      ),
    ).toEqual([true, true]);
    const storm = judgeFailover({ failover: 0.28, baseline: 0.3 }, { failover: w(0.1), baseline: w(0.3) });
    expect(storm.map((g) => g.met)).toEqual([false, false]);
    expect(storm[1]?.detail).toBe('0.100 (10 requests) vs 0.300 (10)');
    expect(
      judgeFailover({ failover: 0.3, baseline: 0.3 }, { failover: w(null), baseline: w(0.3) })[1]?.met,
    ).toBe(null);
  });

  it('gives the spread of each hit rate and of the gap over the rounds as half their range', () => {
    expect(
      computeRoundSpread([
        { baseline: 0.3, failover: 0.29 },
        { baseline: 0.31, failover: 0.296 },
      ]),
    ).toEqual({ baseline: 0.005, failover: 0.003, gap: 0.002 });
    expect(computeRoundSpread([{ baseline: 0.3, failover: 0.29 }])).toEqual({
      baseline: 0,
      failover: 0,
      gap: 0,
    });
  });
});
