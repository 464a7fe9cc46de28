// The benchmark's verdicts and human table (pure).

import type { OverheadStats } from './bench-overhead.ts';
import type { TierMetrics } from './tier-report.ts';

import type { ExchangeLag } from './exchange-lag.ts';

export interface RouterResult {
  /** Router processes the requests were spread over, in turn (bench-replicas.ts). */
  readonly replicas: number;
  readonly hit_rate: number;
  /** The fleet's pooled-cache bound (pooled-bound.ts), the same for every row of a run. */
  readonly pooled_bound: number;
  /** hit_rate / pooled_bound. */
  readonly hit_rate_vs_bound: number;
  /** hit_rate / the infinite-cache bound. */
  readonly hit_rate_vs_infinite: number;
  readonly ttft_p50_ms: number;
  readonly ttft_p99_ms: number;
  readonly e2e_p50_ms: number;
  readonly e2e_p99_ms: number;
  /** Inter-token latency: gaps between streamed output chunks, over every request. */
  readonly itl_p50_ms?: number;
  readonly itl_p99_ms?: number;
  /**
   * Noise: half the difference between the requests of even and of odd index, per metric
   * (its hit rate from the clients' usage, the row's from the simulators' counters).
   */
  readonly spread?: TierMetrics;
  readonly throughput_rps: number;
  readonly imbalance: number;
  readonly requests: number;
  readonly errors: number;
  /** Hit rate from the clients' usage.prompt_tokens_details (cross-check of the simulators' counters). */
  readonly hit_rate_client: number;
  readonly per_worker: Record<string, number>;
  readonly duration_s: number;
  /** 1-minute load average of the machine: mean and max of samples during the run. */
  readonly loadavg_mean: number;
  readonly loadavg_max: number;
  readonly first_error?: string;
  /** Gateway rows: (replica, endpoint) pairs whose KV index routing could use at the end, e.g. "12/12". */
  readonly kv_index_usable?: string;
  /** Gateway rows at R > 1: how stale the replicas' view of each other's load was (exchange-lag.ts). */
  readonly exchange_lag?: ExchangeLag;
  /** Gateway rows at R > 1: how many peers each replica heard over the load exchange at the end. */
  readonly exchange_peers_at_end?: readonly (number | null)[];
}

export type RouterEntry = RouterResult | { readonly skipped: string } | { readonly failed: string };

export function isResult(e: RouterEntry | undefined): e is RouterResult {
  return e !== undefined && 'hit_rate' in e;
}

export interface Goal {
  readonly goal: string;
  /** true / false, or null when it cannot be judged (a router was skipped). */
  readonly met: boolean | null;
  readonly detail: string;
}

export function judgeGoals(
  routers: Readonly<Record<string, RouterEntry>>,
  overhead: Readonly<Record<string, OverheadStats>> | undefined,
  overheadRate: number,
): Goal[] {
  const ca = routers['cache-aware'];
  const sg = routers['sglang-router'];
  const rr = routers['round-robin'];
  const goals: Goal[] = [];
  if (isResult(ca) && isResult(sg)) {
    goals.push({
      goal: "hit rate >= SGLang router's at no worse imbalance",
      met: ca.hit_rate >= sg.hit_rate && ca.imbalance <= sg.imbalance,
      detail: `hit ${ca.hit_rate} vs ${sg.hit_rate}, imbalance ${ca.imbalance} vs ${sg.imbalance}`,
    });
  } else {
    goals.push({
      goal: "hit rate >= SGLang router's at no worse imbalance",
      met: null,
      detail: 'cache-aware or sglang-router did not run',
    });
  }
  if (isResult(ca) && isResult(rr) && rr.ttft_p50_ms > 0) {
    const cut = 1 - ca.ttft_p50_ms / rr.ttft_p50_ms;
    goals.push({
      goal: 'TTFT p50 >= 30% below round-robin',
      met: cut >= 0.3,
      detail: `${ca.ttft_p50_ms} vs ${rr.ttft_p50_ms} ms: ${(cut * 100).toFixed(1)}% below`,
    });
  } else {
    goals.push({ goal: 'TTFT p50 >= 30% below round-robin', met: null, detail: 'a run is missing' });
  }
  const gw = overhead?.['gateway'];
  const direct = overhead?.['direct'];
  if (gw && direct) {
    const p99 = gw.p99_ms - direct.p99_ms;
    goals.push({
      goal: `added latency p99 < 2 ms at ${overheadRate} req/s`,
      met: p99 < 2 && gw.errors === 0 && gw.rps >= 0.95 * overheadRate,
      detail: `+${p99.toFixed(3)} ms p99, ${gw.rps} req/s achieved, ${gw.errors} errors`,
    });
  } else {
    goals.push({ goal: 'added latency p99 < 2 ms', met: null, detail: 'overhead not measured' });
  }
  const peer = judgeOverheadAgainstRouter(overhead, overheadRate);
  if (peer) goals.push(peer);
  return goals;
}

/**
 * The gateway's added p99 against SGLang's router's, measured in the same run (issue 12's
 * goal). The detail carries the floor under any Node gateway (node-floor-proxy.ts) and each
 * one's CPU per request, which say how much of the gap is the gateway's own work.
 */
export function judgeOverheadAgainstRouter(
  overhead: Readonly<Record<string, OverheadStats>> | undefined,
  overheadRate: number,
): Goal | undefined {
  const direct = overhead?.['direct'];
  const gw = overhead?.['gateway'];
  const sg = overhead?.['sglang-router'];
  if (!direct || !gw) return undefined;
  const goal = `added latency p99 <= SGLang router's at ${overheadRate} req/s`;
  if (!sg) return { goal, met: null, detail: 'sglang-router did not run' };
  const added = (s: OverheadStats): string => {
    const cpu = s.cpu_ms_per_req === undefined ? '' : `, ${s.cpu_ms_per_req} ms CPU/request`;
    return `+${(s.p99_ms - direct.p99_ms).toFixed(3)} ms${cpu}`;
  };
  const floor = overhead['node-floor'];
  return {
    goal,
    met: gw.p99_ms <= sg.p99_ms && gw.errors === 0,
    detail:
      `gateway ${added(gw)}; SGLang router ${added(sg)}` +
      // Whether any Node gateway could meet it in this run: the floor does no work of its own.
      (floor
        ? `; Node floor (a bare proxy) ${added(floor)}, ${floor.p99_ms <= sg.p99_ms ? 'within' : 'above'} SGLang router's`
        : ''),
  };
}

/**
 * The HiCache profile's verdict: tier-aware cache-aware routing (a host-memory prefix counts
 * hostWeight of a GPU one) against the same policy blind to the tier (hostWeight 1).
 */
export function judgeTierGoal(routers: Readonly<Record<string, RouterEntry>>): Goal | undefined {
  const aware = routers['cache-aware'];
  const blind = routers['cache-aware-tier-blind'];
  if (blind === undefined) return undefined;
  const goal = 'HiCache: tier-aware routing TTFT p50 below tier-blind';
  if (!isResult(aware) || !isResult(blind) || blind.ttft_p50_ms <= 0)
    return { goal, met: null, detail: 'cache-aware or cache-aware-tier-blind did not run' };
  const ratio = aware.ttft_p50_ms / blind.ttft_p50_ms;
  const p99 = blind.ttft_p99_ms > 0 ? aware.ttft_p99_ms / blind.ttft_p99_ms : NaN;
  return {
    goal,
    met: ratio < 1,
    detail:
      `TTFT p50 ${aware.ttft_p50_ms} vs ${blind.ttft_p50_ms} ms (x${ratio.toFixed(3)}), ` +
      `p99 x${p99.toFixed(3)}, hit ${aware.hit_rate} vs ${blind.hit_rate}`,
  };
}

const pad = (s: string, n: number): string => (s.length >= n ? s : s + ' '.repeat(n - s.length));
const lpad = (s: string, n: number): string => (s.length >= n ? s : ' '.repeat(n - s.length) + s);

export function renderTable(
  routers: Readonly<Record<string, RouterEntry>>,
  overhead: Readonly<Record<string, OverheadStats>> | undefined,
  goals: readonly Goal[],
  header: readonly string[],
): string {
  const lines: string[] = [...header, ''];
  const cols = [
    'router',
    'hit',
    'hit/pool',
    'hit/inf',
    'ttft p50',
    'ttft p99',
    'e2e p50',
    'e2e p99',
    'itl p50',
    'itl p99',
    '± hit/ttft50/e2e99',
    'req/s',
    'imbal',
    'err',
    'load1m',
  ];
  const widths = [16, 7, 8, 7, 9, 9, 9, 9, 8, 8, 19, 7, 6, 5, 7];
  lines.push(cols.map((c, i) => (i === 0 ? pad(c, widths[i] ?? 8) : lpad(c, widths[i] ?? 8))).join(' '));
  for (const [name, e] of Object.entries(routers)) {
    if (!isResult(e)) {
      const why = 'skipped' in e ? `skipped: ${e.skipped}` : `failed: ${e.failed}`;
      lines.push(`${pad(name, 16)} ${why}`);
      continue;
    }
    const cells = [
      name,
      e.hit_rate.toFixed(3),
      e.hit_rate_vs_bound.toFixed(3),
      e.hit_rate_vs_infinite.toFixed(3),
      e.ttft_p50_ms.toFixed(0),
      e.ttft_p99_ms.toFixed(0),
      e.e2e_p50_ms.toFixed(0),
      e.e2e_p99_ms.toFixed(0),
      e.itl_p50_ms?.toFixed(1) ?? '-',
      e.itl_p99_ms?.toFixed(1) ?? '-',
      e.spread
        ? `${e.spread.hit_rate.toFixed(3)}/${e.spread.ttft_p50_ms.toFixed(0)}/${e.spread.e2e_p99_ms.toFixed(0)}`
        : '-',
      e.throughput_rps.toFixed(2),
      e.imbalance.toFixed(3),
      String(e.errors),
      e.loadavg_mean.toFixed(1),
    ];
    lines.push(cells.map((c, i) => (i === 0 ? pad(c, widths[i] ?? 8) : lpad(c, widths[i] ?? 8))).join(' '));
  }
  if (overhead) {
    lines.push('', 'overhead (tiny requests, zero-latency simulator; ms):');
    lines.push(
      `  ${pad('target', 21)} ${lpad('p50', 8)} ${lpad('p99', 8)} ${lpad('+p50', 8)} ${lpad('+p99', 8)} ${lpad('req/s', 8)} ${lpad('err', 5)} ${lpad('cpu/req', 8)}`,
    );
    const direct = overhead['direct'];
    for (const [name, s] of Object.entries(overhead)) {
      const d50 = direct ? (s.p50_ms - direct.p50_ms).toFixed(3) : '-';
      const d99 = direct ? (s.p99_ms - direct.p99_ms).toFixed(3) : '-';
      lines.push(
        `  ${pad(name, 21)} ${lpad(s.p50_ms.toFixed(3), 8)} ${lpad(s.p99_ms.toFixed(3), 8)} ${lpad(d50, 8)} ${lpad(d99, 8)} ${lpad(s.rps.toFixed(1), 8)} ${lpad(String(s.errors), 5)} ${lpad(s.cpu_ms_per_req?.toFixed(3) ?? '-', 8)}${renderCpuParts(s)}`,
      );
    }
  }
  lines.push('', 'goals:');
  for (const g of goals) {
    const mark = g.met === null ? 'n/a ' : g.met ? 'MET ' : 'MISS';
    lines.push(`  [${mark}] ${g.goal} — ${g.detail}`);
  }
  return lines.join('\n');
}

/** ` (envoy 0.3 + picker 0.6)`: a target's CPU a request by part, where it names parts. */
function renderCpuParts(s: OverheadStats): string {
  const parts = Object.entries(s.cpu_ms_per_req_parts ?? {});
  return parts.length === 0 ? '' : ` (${parts.map(([p, ms]) => `${p} ${ms.toFixed(3)}`).join(' + ')})`;
}
