import { describe, expect, it } from 'vitest';
import type { RequestRecord } from './replay-stats.ts';
import { buildTierRow, computeSpread, judgeTierGoals } from './tier-report.ts';
import { computeArrivals } from './virtual-tier.ts';

const rec = (index: number, ttftMs: number, e2eMs: number, cachedTokens: number): RequestRecord => ({
  index,
  ok: true,
  status: 200,
  worker: 'w0',
  sentAtMs: 0,
  ttftMs,
  e2eMs,
  promptTokens: 100,
  cachedTokens,
  completionTokens: 3,
  itlMs: [index % 2 === 0 ? 10 : 20, 10],
});

describe('tier report', () => {
  it('states each metric with half the difference between the interleaved halves', () => {
    const records = [
      rec(0, 100, 1000, 50),
      rec(1, 300, 2000, 30),
      rec(2, 100, 1000, 50),
      rec(3, 300, 2000, 30),
    ];
    expect(computeSpread(records)).toEqual({
      hit_rate: 0.1,
      ttft_p50_ms: 100,
      ttft_p99_ms: 100,
      itl_p50_ms: 0,
      itl_p99_ms: 5,
      e2e_p50_ms: 500,
      e2e_p99_ms: 500,
    });
    const row = buildTierRow('cache-aware', 3, records, new Map(), 0.5, [0, 0, 4]);
    expect(row).toMatchObject({ hit_rate: 0.4, hit_rate_vs_bound: 0.8, itl_p99_ms: 20, staleness_p99_ms: 4 });
  });

  it('judges R replicas against one, and one against SGLang router', () => {
    const row = (hit: number, ttft50: number, ttft99: number, e2e99: number) =>
      buildTierRow(
        'x',
        1,
        [rec(0, ttft50, e2e99, hit * 100), rec(1, ttft99, e2e99, hit * 100)],
        new Map(),
        1,
        [],
      );
    const goals = judgeTierGoals({
      'sglang-router': row(0.3, 200, 1000, 5000),
      'cache-aware': row(0.3, 100, 600, 4000),
      'cache-aware@3': row(0.295, 104, 700, 4100),
      'cache-aware@3/own': row(0.2, 500, 900, 9000),
    });
    expect(goals.map((g) => [g.goal, g.met])).toEqual([
      ['cache-aware@3 hit >= 0.97 of 1 replica', true],
      ['cache-aware@3 TTFT p50 <= 1.05 of 1 replica', true],
      ['TTFT p50 <= 0.7 of SGLang router', true],
      ['TTFT p99 <= 0.7 of SGLang router', true],
      ['e2e p99 <= SGLang router', true],
    ]);
  });
});

describe('computeArrivals', () => {
  it('keeps the stamps, or spreads a burst evenly over the gap to the next stamp', () => {
    const stamps = [0, 0, 0, 3000, 3000, 6000];
    expect(computeArrivals(stamps, false)).toEqual([0, 0, 0, 3000, 3000, 6000]);
    expect(computeArrivals(stamps, true)).toEqual([0, 1000, 2000, 3000, 4500, 6000]);
  });
});
