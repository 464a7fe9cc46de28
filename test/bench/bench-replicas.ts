// Router replicas in the benchmark (pure): row keys, the --gateway-replicas
// list, and the verdicts on what a tier of R replicas keeps of one replica.
//
// Key scheme: a router's row at one replica is its name ("cache-aware",
// "sglang-router"); at R > 1 replicas it is "<name>@<R>" ("cache-aware@3").
// So the rows of earlier runs keep their keys, and each row's `replicas`
// field says the same thing as data.

import { isResult, type Goal, type RouterEntry } from './bench-report.ts';

export function rowKey(router: string, replicas: number): string {
  return replicas === 1 ? router : `${router}@${replicas}`;
}

/** "1,3" → [1, 3]: distinct positive integers in the order given; an error message otherwise. */
export function parseReplicaList(raw: string): number[] | string {
  const out: number[] = [];
  for (const part of raw.split(',').map((s) => s.trim())) {
    const n = Number(part);
    if (part === '' || !Number.isInteger(n) || n < 1 || n > 16)
      return `--gateway-replicas: '${part}' is not a replica count (1-16)`;
    if (!out.includes(n)) out.push(n);
  }
  return out;
}

export interface ReplicaScaling {
  readonly replicas: number;
  /** Hit rate at R replicas / at 1. */
  readonly hit_ratio: number;
  readonly ttft_p50_ratio: number;
  readonly ttft_p99_ratio: number;
}

/** Per router that ran at both 1 and R > 1 replicas: what R replicas keep of one (keyed by the R row). */
export function computeScaling(
  routers: Readonly<Record<string, RouterEntry>>,
): Record<string, ReplicaScaling> {
  const out: Record<string, ReplicaScaling> = {};
  const r4 = (x: number): number => Number(x.toFixed(4));
  for (const [key, e] of Object.entries(routers)) {
    const at = key.lastIndexOf('@');
    if (at < 0 || !isResult(e)) continue;
    const one = routers[key.slice(0, at)];
    if (!isResult(one)) continue;
    out[key] = {
      replicas: e.replicas,
      hit_ratio: one.hit_rate > 0 ? r4(e.hit_rate / one.hit_rate) : 0,
      ttft_p50_ratio: one.ttft_p50_ms > 0 ? r4(e.ttft_p50_ms / one.ttft_p50_ms) : 0,
      ttft_p99_ratio: one.ttft_p99_ms > 0 ? r4(e.ttft_p99_ms / one.ttft_p99_ms) : 0,
    };
  }
  return out;
}

const fmt = (x: number): string => x.toFixed(3);

/**
 * The goals for a tier: at the largest R, the gateway keeps >= 0.97 of
 * its one-replica hit rate and <= 1.05 of its TTFT p50, and loses less than
 * SGLang's router at the same R; at one replica, its hit rate is >= 0.98 of
 * the pooled-cache bound.
 */
export function judgeReplicaGoals(
  routers: Readonly<Record<string, RouterEntry>>,
  scaling: Readonly<Record<string, ReplicaScaling>>,
  trace: string,
): Goal[] {
  const goals: Goal[] = [];
  const one = routers['cache-aware'];
  const pooledGoal = 'gateway hit rate >= 0.98 of the pooled-cache bound at 1 replica';
  goals.push(
    isResult(one)
      ? {
          goal: pooledGoal,
          met: one.hit_rate_vs_bound >= 0.98,
          detail: `${fmt(one.hit_rate)} / ${fmt(one.pooled_bound)} = ${fmt(one.hit_rate_vs_bound)} (${trace})`,
        }
      : { goal: pooledGoal, met: null, detail: 'cache-aware did not run' },
  );
  const tiers = Object.entries(scaling).filter(([k]) => k.startsWith('cache-aware@'));
  const [key, gw] = tiers.sort((a, b) => b[1].replicas - a[1].replicas)[0] ?? [];
  if (key === undefined || gw === undefined) {
    const why = 'cache-aware did not run at 1 and R > 1 replicas (--gateway-replicas 1,3)';
    goals.push({ goal: 'gateway at R replicas keeps >= 0.97 of its hit rate', met: null, detail: why });
    goals.push({ goal: 'gateway at R replicas keeps TTFT p50 <= 1.05x', met: null, detail: why });
    return goals;
  }
  const R = gw.replicas;
  goals.push({
    goal: `gateway at ${R} replicas keeps >= 0.97 of its 1-replica hit rate`,
    met: gw.hit_ratio >= 0.97,
    detail: `${key}: ${fmt(gw.hit_ratio)}x`,
  });
  goals.push({
    goal: `gateway at ${R} replicas keeps TTFT p50 <= 1.05x of 1 replica`,
    met: gw.ttft_p50_ratio <= 1.05,
    detail: `${key}: ${fmt(gw.ttft_p50_ratio)}x (p99 ${fmt(gw.ttft_p99_ratio)}x)`,
  });
  for (const peer of ['sglang-router', 'smg']) {
    const p = scaling[rowKey(peer, R)];
    const goal = `gateway at ${R} replicas loses less hit rate than ${peer} at ${R}`;
    goals.push(
      p
        ? {
            goal,
            met: gw.hit_ratio > p.hit_ratio,
            detail: `${peer} keeps ${fmt(p.hit_ratio)}x hit, TTFT p50 ${fmt(p.ttft_p50_ratio)}x, p99 ${fmt(p.ttft_p99_ratio)}x; gateway ${fmt(gw.hit_ratio)}x`,
          }
        : { goal, met: null, detail: `${peer} did not run at 1 and ${R} replicas` },
    );
  }
  return goals;
}
