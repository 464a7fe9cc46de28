import { describe, expect, it } from 'vitest';
import { buildRouterResult } from '../support/bench/router-result.ts';
import { judgeGoals, renderTable, type RouterEntry } from './bench-report.ts';
import { computeStretch, computeWorkload } from './bench-workload.ts';
import type { TraceRecord } from './replay-trace.ts';

const rec = (timestamp: number, hash_ids: number[], input = hash_ids.length * 512): TraceRecord => ({
  timestamp,
  input_length: input,
  output_length: 10,
  hash_ids,
});

describe('computeWorkload', () => {
  it('measures LRU reuse distances over block chains', () => {
    // a: [1,2]; b: [3]; a again: [1,2] → each of a's blocks was followed by 2 other distinct chains.
    const w = computeWorkload([rec(0, [1, 2]), rec(1000, [3]), rec(2000, [1, 2])], 1024, 2);
    expect(w.requests).toBe(3);
    expect(w.span_s).toBe(2);
    expect(w.distinct_tokens).toBe(3 * 512);
    // Reuse of chain "1": since then "1,2" and "3" were touched → 2 blocks; reuse of "1,2": "3","1" → 2 blocks.
    expect(w.reuse_distance_p50_tokens).toBe(1024);
    expect(w.reuse_within_one_pool).toBe(0); // a 1024-token pool holds 2 blocks: distance must be < pool
    expect(w.reuse_within_fleet_pool).toBe(1);
    expect(w.bound).toBeGreaterThan(0);
  });

  it('does not treat a block as reusable behind a different prefix', () => {
    const w = computeWorkload([rec(0, [1, 2]), rec(1, [9, 2])], 10_000, 1);
    expect(w.reuse_distance_p50_tokens).toBe(0); // no reuse at all
    expect(w.reuse_within_one_pool).toBe(0);
  });
});

describe('computeStretch', () => {
  it('stretches arrivals to the target no-cache load, never compresses', () => {
    expect(computeStretch(40_000, 32_000, 0.8)).toBeCloseTo(1.5625);
    expect(computeStretch(10_000, 32_000, 0.8)).toBe(1);
  });
});

const result = buildRouterResult;

describe('judgeGoals', () => {
  it('judges the goals and says n/a when a router is skipped', () => {
    const routers: Record<string, RouterEntry> = {
      'cache-aware': result({ hit_rate: 0.25, imbalance: 1.1, ttft_p50_ms: 60 }),
      'round-robin': result({ ttft_p50_ms: 100 }),
      'sglang-router': result({ hit_rate: 0.24, imbalance: 1.2 }),
    };
    const overhead = {
      direct: { sent: 10, ok: 10, errors: 0, p50_ms: 0.3, p99_ms: 1, max_ms: 2, rps: 500 },
      gateway: { sent: 10, ok: 10, errors: 0, p50_ms: 0.8, p99_ms: 2.5, max_ms: 3, rps: 499 },
    };
    const goals = judgeGoals(routers, overhead, 500);
    // The last: the added p99 against SGLang router's, whose overhead was not measured here.
    expect(goals.map((g) => g.met)).toEqual([true, true, true, null]);
    const skipped = judgeGoals({ ...routers, 'sglang-router': { skipped: 'no wheel' } }, undefined, 500);
    expect(skipped.map((g) => g.met)).toEqual([null, true, null]);
    expect(renderTable({ ...routers, smg: { skipped: 'no wheel' } }, overhead, goals, ['h'])).toContain(
      'skipped: no wheel',
    );
  });
});
