import { describe, expect, it } from 'vitest';
import type { OverheadStats } from './bench-overhead.ts';
import { judgeOverheadAgainstRouter, judgeTierGoal } from './bench-report.ts';
import { buildRouterResult as row } from '../support/bench/router-result.ts';

describe('judgeTierGoal (the HiCache profile)', () => {
  it('is absent where the tier-blind baseline was not run', () => {
    expect(judgeTierGoal({ 'cache-aware': row({}) })).toBeUndefined();
  });

  it('is met when tier-aware routing has the lower TTFT p50, and says by how much', () => {
    const aware = row({ ttft_p50_ms: 90, ttft_p99_ms: 400, hit_rate: 0.3 });
    const blind = row({ ttft_p50_ms: 100, ttft_p99_ms: 500, hit_rate: 0.31 });
    const g = judgeTierGoal({ 'cache-aware': aware, 'cache-aware-tier-blind': blind });
    expect(g?.met).toBe(true);
    expect(g?.detail).toBe('TTFT p50 90 vs 100 ms (x0.900), p99 x0.800, hit 0.3 vs 0.31');
    expect(judgeTierGoal({ 'cache-aware': blind, 'cache-aware-tier-blind': aware })?.met).toBe(false);
  });

  it('cannot judge when either run failed', () => {
    const g = judgeTierGoal({ 'cache-aware': { failed: 'x' }, 'cache-aware-tier-blind': row({}) });
    expect(g).toMatchObject({ met: null });
  });
});

describe("judgeOverheadAgainstRouter (issue 12: added p99 no higher than SGLang router's)", () => {
  const stats = (p99: number, cpu?: number): OverheadStats => ({
    sent: 100,
    ok: 100,
    errors: 0,
    p50_ms: 1,
    p99_ms: p99,
    max_ms: p99,
    rps: 500,
    ...(cpu === undefined ? {} : { cpu_ms_per_req: cpu }),
  });

  it('compares the added p99 and names the Node floor and CPU per request', () => {
    const g = judgeOverheadAgainstRouter(
      {
        direct: stats(2),
        gateway: stats(9, 0.8),
        'sglang-router': stats(6, 0.4),
        'node-floor': stats(7, 0.5),
      },
      500,
    );
    expect(g).toEqual({
      goal: "added latency p99 <= SGLang router's at 500 req/s",
      met: false,
      detail:
        'gateway +7.000 ms, 0.8 ms CPU/request; SGLang router +4.000 ms, 0.4 ms CPU/request; ' +
        "Node floor (a bare proxy) +5.000 ms, 0.5 ms CPU/request, above SGLang router's",
    });
    const faster = judgeOverheadAgainstRouter(
      { direct: stats(2), gateway: stats(5), 'sglang-router': stats(6) },
      500,
    );
    expect(faster?.met).toBe(true);
    const floorWithin = judgeOverheadAgainstRouter(
      { direct: stats(2), gateway: stats(9), 'sglang-router': stats(6), 'node-floor': stats(6) },
      500,
    );
    expect(floorWithin?.detail).toMatch(/Node floor \(a bare proxy\) \+4\.000 ms, within SGLang router's$/);
  });

  it('cannot judge without SGLang router, and is absent without the gateway', () => {
    expect(judgeOverheadAgainstRouter({ direct: stats(2), gateway: stats(5) }, 500)?.met).toBeNull();
    expect(judgeOverheadAgainstRouter({ direct: stats(2) }, 500)).toBeUndefined();
  });
});
