// What a failover run is judged by (pure): the hit rate of the requests sent
// in a window of wall time, the same windows in the run without the kill, and
// the verdicts. Windows are by send time: a request belongs to the routing
// state of the tier when it was routed.

import type { RequestRecord } from './replay-stats.ts';

export interface WindowHit {
  /** Answered requests sent in the window. */
  readonly requests: number;
  /** Cached / prompt tokens over them (the runtimes' own usage reports); null with none. */
  readonly hit: number | null;
}

/** Requests sent in [fromMs, toMs) that were answered, and their pooled hit rate. */
export function computeWindowHit(
  records: readonly RequestRecord[],
  fromMs: number,
  toMs: number,
  keep: (r: RequestRecord) => boolean = () => true,
): WindowHit {
  let prompt = 0;
  let cached = 0;
  let requests = 0;
  for (const r of records) {
    if (!r.ok || r.sentAtMs < fromMs || r.sentAtMs >= toMs || !keep(r)) continue;
    requests++;
    prompt += r.promptTokens;
    cached += r.cachedTokens;
  }
  return { requests, hit: prompt > 0 ? Number((cached / prompt).toFixed(4)) : null };
}

export interface FailoverVerdict {
  readonly goal: string;
  readonly met: boolean | null;
  readonly detail: string;
}

const fmt = (x: number | null): string => (x === null ? 'n/a' : x.toFixed(3));

/**
 * Issue 31's failover goals: the run's hit rate within `tolerance` of the run without the kill,
 * and no miss storm: the window after the restart keeps the hit rate the same window had
 * without the kill (within `tolerance` too; the trace's own hit rate drifts over time, so the
 * run without the kill is the yardstick, and the window before the kill is reported beside it).
 */
export function judgeFailover(
  hit: { readonly failover: number; readonly baseline: number },
  after: { readonly failover: WindowHit; readonly baseline: WindowHit },
  tolerance = 0.01,
): FailoverVerdict[] {
  const runGap = hit.failover - hit.baseline;
  const a = after.failover.hit;
  const b = after.baseline.hit;
  return [
    {
      goal: `hit rate over the replay within ${tolerance} of the run without the kill`,
      met: Math.abs(runGap) <= tolerance,
      detail: `${fmt(hit.failover)} vs ${fmt(hit.baseline)} (${runGap >= 0 ? '+' : ''}${runGap.toFixed(4)})`,
    },
    {
      goal: `no miss storm: hit rate in the window after the restart within ${tolerance} of the same window without the kill, or above it`,
      met: a === null || b === null ? null : a >= b - tolerance,
      detail: `${fmt(a)} (${after.failover.requests} requests) vs ${fmt(b)} (${after.baseline.requests})`,
    },
  ];
}

/** One round of the failover bench: both runs' hit rates over the replay. */
export interface FailoverRound {
  readonly baseline: number;
  readonly failover: number;
}

/**
 * Each measure's spread over the rounds: half the range, so "0.238 ±0.004" reads as rounds at
 * 0.234 and 0.242; a gap inside it is not a result.
 */
export function computeRoundSpread(rounds: readonly FailoverRound[]): {
  readonly baseline: number;
  readonly failover: number;
  readonly gap: number;
} {
  const half = (xs: number[]): number =>
    xs.length === 0 ? 0 : Number(((Math.max(...xs) - Math.min(...xs)) / 2).toFixed(4));
  return {
    baseline: half(rounds.map((r) => r.baseline)),
    failover: half(rounds.map((r) => r.failover)),
    gap: half(rounds.map((r) => r.failover - r.baseline)),
  };
}
