// The benchmark's workload (pure): what a trace slice asks of the fleet, and
// how far apart its prefix reuses are, to size the simulators' KV pools.

import { BLOCK_TOKENS, computeBound, type TraceRecord } from './replay-trace.ts';
import { percentile } from './replay-stats.ts';

export interface WorkloadStats {
  readonly requests: number;
  /** Trace time from the first to the last arrival, seconds. */
  readonly span_s: number;
  readonly mean_input_tokens: number;
  readonly mean_output_tokens: number;
  /** Prompt tokens per second of trace time. */
  readonly prompt_tps: number;
  /** Infinite-cache hit rate of the slice (computeBound). */
  readonly bound: number;
  /** Distinct prompt tokens the slice touches (block chains x 512). */
  readonly distinct_tokens: number;
  /** LRU stack distance of block reuses, in tokens (distinct tokens touched since the last use). */
  readonly reuse_distance_p50_tokens: number;
  readonly reuse_distance_p90_tokens: number;
  /** Share of block reuses that one LRU pool of `pool` tokens would serve, fed the whole stream. */
  readonly reuse_within_one_pool: number;
  /** ... a pool the size of the whole fleet (an ideal partition at best comes close to this). */
  readonly reuse_within_fleet_pool: number;
}

/** Fenwick tree over access positions, for LRU stack distances in O(n log n). */
class Fenwick {
  readonly #t: Int32Array;
  constructor(n: number) {
    this.#t = new Int32Array(n + 1);
  }
  add(i: number, v: number): void {
    for (let k = i + 1; k < this.#t.length; k += k & -k) this.#t[k] = (this.#t[k] ?? 0) + v;
  }
  /** Sum of positions 0..i. */
  sum(i: number): number {
    let s = 0;
    for (let k = i + 1; k > 0; k -= k & -k) s += this.#t[k] ?? 0;
    return s;
  }
}

/** Block-chain keys in access order: a block is reusable only behind the same prefix. */
function listAccesses(records: readonly TraceRecord[]): string[] {
  const out: string[] = [];
  for (const r of records) {
    let chain = '';
    let remaining = r.input_length;
    for (const h of r.hash_ids) {
      if (remaining <= 0) break;
      chain = chain === '' ? String(h) : `${chain},${h}`;
      out.push(chain);
      remaining -= BLOCK_TOKENS;
    }
  }
  return out;
}

/** LRU stack distances of the slice's block reuses, in tokens, sorted ascending. */
export function computeReuseDistances(records: readonly TraceRecord[]): number[] {
  const acc = listAccesses(records);
  const fw = new Fenwick(acc.length);
  const lastAt = new Map<string, number>();
  const distances: number[] = [];
  for (let i = 0; i < acc.length; i++) {
    const key = acc[i] ?? '';
    const prev = lastAt.get(key);
    if (prev !== undefined) {
      distances.push((fw.sum(i - 1) - fw.sum(prev)) * BLOCK_TOKENS);
      fw.add(prev, -1);
    }
    fw.add(i, 1);
    lastAt.set(key, i);
  }
  return distances.sort((a, b) => a - b);
}

/** Share of reuses an LRU pool of `cap` tokens fed the whole stream would serve (sorted input). */
export function shareWithin(sorted: readonly number[], cap: number): number {
  if (sorted.length === 0) return 0;
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((sorted[mid] ?? 0) < cap) lo = mid + 1;
    else hi = mid;
  }
  return lo / sorted.length;
}

export interface PoolChoice {
  readonly pool: number;
  /** Candidate pool → [share within one pool, share within the fleet's pooled KV]. */
  readonly curve: Readonly<Record<string, readonly [number, number]>>;
}

/**
 * The KV pool per worker at which placement matters most: the candidate that
 * maximises share(fleet pool) - share(one pool), i.e. the slice's reuses
 * mostly do not fit in one worker but do fit in the fleet. Candidates are
 * multiples of `step` from `min` (at least the largest request) up to 32 steps.
 * Depends on the trace only, never on a router's result.
 */
export function choosePool(
  records: readonly TraceRecord[],
  workers: number,
  step = 250_000,
  min = 250_000,
): PoolChoice {
  const d = computeReuseDistances(records);
  const largest = records.reduce((m, r) => Math.max(m, r.input_length + r.output_length), 0);
  const floor = Math.max(min, Math.ceil((largest + 1024) / step) * step);
  let best = floor;
  let bestGap = -1;
  const curve: Record<string, readonly [number, number]> = {};
  for (let k = 0; k < 32; k++) {
    const cap = floor + k * step;
    const one = shareWithin(d, cap);
    const fleet = shareWithin(d, cap * workers);
    curve[String(cap)] = [Number(one.toFixed(3)), Number(fleet.toFixed(3))];
    if (fleet - one > bestGap + 1e-9) {
      bestGap = fleet - one;
      best = cap;
    }
  }
  return { pool: best, curve };
}

export function computeWorkload(
  records: readonly TraceRecord[],
  poolTokens: number,
  workers: number,
): WorkloadStats {
  const n = records.length;
  const first = records[0]?.timestamp ?? 0;
  const last = records[n - 1]?.timestamp ?? first;
  const spanS = Math.max(1e-3, (last - first) / 1000);
  const input = records.reduce((s, r) => s + r.input_length, 0);
  const output = records.reduce((s, r) => s + r.output_length, 0);
  const distances = computeReuseDistances(records);
  const distinct = new Set(listAccesses(records)).size;
  const r4 = (x: number): number => Number(x.toFixed(4));
  return {
    requests: n,
    span_s: Number(spanS.toFixed(1)),
    mean_input_tokens: Math.round(input / Math.max(1, n)),
    mean_output_tokens: Math.round(output / Math.max(1, n)),
    prompt_tps: Math.round(input / spanS),
    bound: r4(computeBound(records).hitRate),
    distinct_tokens: distinct * BLOCK_TOKENS,
    reuse_distance_p50_tokens: percentile(distances, 50),
    reuse_distance_p90_tokens: percentile(distances, 90),
    reuse_within_one_pool: r4(shareWithin(distances, poolTokens)),
    reuse_within_fleet_pool: r4(shareWithin(distances, poolTokens * workers)),
  };
}

/**
 * Arrival stretch so that the slice's prompt tokens, with no cache hit at all,
 * load the fleet's prefill to `targetLoad` (never compressed below the trace's
 * own rate: stretch >= 1).
 */
export function computeStretch(promptTps: number, fleetPrefillTps: number, targetLoad: number): number {
  if (!(targetLoad > 0) || !(fleetPrefillTps > 0)) return 1;
  return Math.max(1, promptTps / (targetLoad * fleetPrefillTps));
}
