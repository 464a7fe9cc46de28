import { describe, expect, it } from 'vitest';
import { judgeTierGoal } from './bench-report.ts';
import { buildRouterResult as row } from './router-result.testkit.ts';

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
