import { describe, expect, it } from 'vitest';
import { buildRouterResult } from '../support/bench/router-result.ts';
import { computeScaling, judgeReplicaGoals, parseReplicaList, rowKey } from './bench-replicas.ts';
import type { RouterEntry } from './bench-report.ts';

const row = buildRouterResult;

describe('replica rows', () => {
  it('keys a row by router, and by router@R beyond one replica', () => {
    expect(rowKey('cache-aware', 1)).toBe('cache-aware');
    expect(rowKey('sglang-router', 3)).toBe('sglang-router@3');
  });

  it('parses the replica list', () => {
    expect(parseReplicaList('1,3')).toEqual([1, 3]);
    expect(parseReplicaList('3, 1,3')).toEqual([3, 1]);
    expect(parseReplicaList('1,x')).toMatch(/'x' is not a replica count/);
    expect(parseReplicaList('0')).toMatch(/not a replica count/);
  });
});

describe('judgeReplicaGoals', () => {
  const routers: Record<string, RouterEntry> = {
    'cache-aware': row({ hit_rate: 0.24, hit_rate_vs_bound: 0.985, ttft_p50_ms: 100 }),
    'cache-aware@3': row({ replicas: 3, hit_rate: 0.235, ttft_p50_ms: 104, ttft_p99_ms: 550 }),
    'sglang-router': row({ hit_rate: 0.24, ttft_p50_ms: 120 }),
    'sglang-router@3': row({ replicas: 3, hit_rate: 0.14, ttft_p50_ms: 170 }),
    smg: { skipped: 'no wheel' },
  };

  it('compares each tier with its one-replica row', () => {
    const s = computeScaling(routers);
    expect(Object.keys(s)).toEqual(['cache-aware@3', 'sglang-router@3']);
    expect(s['cache-aware@3']).toEqual({
      replicas: 3,
      hit_ratio: 0.9792,
      ttft_p50_ratio: 1.04,
      ttft_p99_ratio: 1.1,
    });
    expect(s['sglang-router@3']?.hit_ratio).toBeCloseTo(0.5833, 4);
  });

  it('judges the bound, hit and TTFT goals, and the peers; n/a where a run is missing', () => {
    const goals = judgeReplicaGoals(routers, computeScaling(routers), 'conv');
    expect(goals.map((g) => g.met)).toEqual([true, true, true, true, null]);
    expect(goals[3]?.detail).toContain('sglang-router keeps 0.583x hit');

    const worse = { ...routers, 'cache-aware@3': row({ replicas: 3, hit_rate: 0.2, ttft_p50_ms: 110 }) };
    expect(judgeReplicaGoals(worse, computeScaling(worse), 'conv').map((g) => g.met)).toEqual([
      true,
      false,
      false,
      true,
      null,
    ]);

    const single = { 'cache-aware': row({ hit_rate_vs_bound: 0.9 }) };
    expect(judgeReplicaGoals(single, computeScaling(single), 'conv').map((g) => g.met)).toEqual([
      false,
      null,
      null,
    ]);
  });
});
