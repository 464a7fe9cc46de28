// The virtual-time tier bench's rows and verdicts (pure).
//
// Noise: every row carries its spread over interleaved halves: the requests
// of even and of odd index summarised apart. `spread` of a metric is half the
// difference between the halves' values, so "0.238 ±0.004" reads as the two
// halves at 0.234 and 0.242; a difference between rows inside the spreads is
// not a result.

import { percentile, type RequestRecord } from './replay-stats.ts';
import type { Goal } from './bench-report.ts';

export interface TierMetrics {
  readonly hit_rate: number;
  readonly ttft_p50_ms: number;
  readonly ttft_p99_ms: number;
  readonly itl_p50_ms: number;
  readonly itl_p99_ms: number;
  readonly e2e_p50_ms: number;
  readonly e2e_p99_ms: number;
}

export interface TierRow extends TierMetrics {
  readonly router: string;
  readonly replicas: number;
  readonly requests: number;
  readonly hit_rate_vs_bound: number;
  /** Half the difference between the interleaved halves, per metric. */
  readonly spread: TierMetrics;
  /** How stale a replica's view of its peers' load was at its decisions (ms); absent without an exchange. */
  readonly staleness_p50_ms?: number;
  readonly staleness_p99_ms?: number;
}

const r1 = (x: number): number => Number(x.toFixed(1));
const r4 = (x: number): number => Number(x.toFixed(4));

export function computeTierMetrics(
  records: readonly RequestRecord[],
  itl: ReadonlyMap<number, readonly number[]> = new Map(),
): TierMetrics {
  const ok = records.filter((r) => r.ok);
  const prompt = ok.reduce((s, r) => s + r.promptTokens, 0);
  const cached = ok.reduce((s, r) => s + r.cachedTokens, 0);
  const gaps = ok.flatMap((r) => itl.get(r.index) ?? r.itlMs ?? []);
  const ttft = ok.map((r) => r.ttftMs);
  const e2e = ok.map((r) => r.e2eMs);
  return {
    hit_rate: r4(prompt > 0 ? cached / prompt : 0),
    ttft_p50_ms: r1(percentile(ttft, 50)),
    ttft_p99_ms: r1(percentile(ttft, 99)),
    itl_p50_ms: r1(percentile(gaps, 50)),
    itl_p99_ms: r1(percentile(gaps, 99)),
    e2e_p50_ms: r1(percentile(e2e, 50)),
    e2e_p99_ms: r1(percentile(e2e, 99)),
  };
}

const KEYS = [
  'hit_rate',
  'ttft_p50_ms',
  'ttft_p99_ms',
  'itl_p50_ms',
  'itl_p99_ms',
  'e2e_p50_ms',
  'e2e_p99_ms',
] as const satisfies readonly (keyof TierMetrics)[];

/** Half the difference between the requests of even and of odd index, per metric. */
export function computeSpread(
  records: readonly RequestRecord[],
  itl: ReadonlyMap<number, readonly number[]> = new Map(),
): TierMetrics {
  const even = computeTierMetrics(
    records.filter((r) => r.index % 2 === 0),
    itl,
  );
  const odd = computeTierMetrics(
    records.filter((r) => r.index % 2 === 1),
    itl,
  );
  return Object.fromEntries(
    KEYS.map((k) => [
      k,
      k === 'hit_rate' ? r4(Math.abs(even[k] - odd[k]) / 2) : r1(Math.abs(even[k] - odd[k]) / 2),
    ]),
  ) as unknown as TierMetrics;
}

export function buildTierRow(
  router: string,
  replicas: number,
  records: readonly RequestRecord[],
  itl: ReadonlyMap<number, readonly number[]>,
  bound: number,
  staleness: readonly number[],
): TierRow {
  const all = computeTierMetrics(records, itl);
  const spread = computeSpread(records, itl);
  return {
    router,
    replicas,
    requests: records.length,
    ...all,
    hit_rate_vs_bound: bound > 0 ? r4(all.hit_rate / bound) : 0,
    spread,
    ...(staleness.length > 0
      ? { staleness_p50_ms: r1(percentile(staleness, 50)), staleness_p99_ms: r1(percentile(staleness, 99)) }
      : {}),
  };
}

const fmt = (x: number, d = 3): string => x.toFixed(d);

/** One goal's ratio: the value, and the limit it must stay within (`atLeast`: a floor). */
export interface TierRatio {
  readonly value: number;
  readonly limit: number;
  readonly atLeast: boolean;
}

const ratio = (a: number, b: number): number => (b > 0 ? a / b : Infinity);

/**
 * The goal ratios from one run's rows, by goal: at each R > 1 (shared load) hit and
 * TTFT p50 against R = 1; at R = 1 TTFT p50, p99 and e2e p99 against SGLang's router.
 */
export function computeTierRatios(rows: Readonly<Record<string, TierRow>>): Record<string, TierRatio> {
  const out: Record<string, TierRatio> = {};
  const one = rows['cache-aware'];
  if (!one) return out;
  for (const [key, row] of Object.entries(rows)) {
    if (!key.startsWith('cache-aware@') || key.includes('/')) continue;
    out[`${key} hit >= 0.97 of 1 replica`] = {
      value: one.hit_rate > 0 ? row.hit_rate / one.hit_rate : 0,
      limit: 0.97,
      atLeast: true,
    };
    out[`${key} TTFT p50 <= 1.05 of 1 replica`] = {
      value: one.ttft_p50_ms > 0 ? row.ttft_p50_ms / one.ttft_p50_ms : 0,
      limit: 1.05,
      atLeast: false,
    };
  }
  const sg = rows['sglang-router'];
  if (!sg) return out;
  out['TTFT p50 <= 0.7 of SGLang router'] = {
    value: ratio(one.ttft_p50_ms, sg.ttft_p50_ms),
    limit: 0.7,
    atLeast: false,
  };
  out['TTFT p99 <= 0.7 of SGLang router'] = {
    value: ratio(one.ttft_p99_ms, sg.ttft_p99_ms),
    limit: 0.7,
    atLeast: false,
  };
  out['e2e p99 <= SGLang router'] = { value: ratio(one.e2e_p99_ms, sg.e2e_p99_ms), limit: 1, atLeast: false };
  return out;
}

export function isRatioMet(r: TierRatio): boolean {
  return r.atLeast ? r.value >= r.limit : r.value <= r.limit;
}

/**
 * The goals judged on one run's ratios (computeTierRatios), each with the figures it
 * came from and their spreads.
 */
export function judgeTierGoals(rows: Readonly<Record<string, TierRow>>): Goal[] {
  const one = rows['cache-aware'];
  const sg = rows['sglang-router'];
  if (!one) return [{ goal: 'cache-aware ran at 1 replica', met: false, detail: 'missing row' }];
  const ratios = computeTierRatios(rows);
  const judged = (goal: string, detail: (value: string) => string): Goal => {
    const r = ratios[goal] as TierRatio;
    return { goal, met: isRatioMet(r), detail: detail(fmt(r.value)) };
  };
  const goals: Goal[] = [];
  for (const [key, row] of Object.entries(rows)) {
    if (!key.startsWith('cache-aware@') || key.includes('/')) continue;
    goals.push(
      judged(`${key} hit >= 0.97 of 1 replica`, (v) => `${fmt(row.hit_rate)} / ${fmt(one.hit_rate)} = ${v}`),
      judged(
        `${key} TTFT p50 <= 1.05 of 1 replica`,
        (v) =>
          `${row.ttft_p50_ms} / ${one.ttft_p50_ms} = ${v} (spreads ±${row.spread.ttft_p50_ms}, ±${one.spread.ttft_p50_ms})`,
      ),
    );
  }
  if (!sg) {
    goals.push({
      goal: 'at 1 replica against SGLang router',
      met: null,
      detail: 'sglang-router did not run',
    });
    return goals;
  }
  goals.push(
    judged('TTFT p50 <= 0.7 of SGLang router', (v) => v),
    judged('TTFT p99 <= 0.7 of SGLang router', (v) => v),
    judged(
      'e2e p99 <= SGLang router',
      (v) =>
        `${v} (${one.e2e_p99_ms} ±${one.spread.e2e_p99_ms} vs ${sg.e2e_p99_ms} ±${sg.spread.e2e_p99_ms})`,
    ),
  );
  return goals;
}

const pad = (s: string, n: number): string => (s.length >= n ? s : s + ' '.repeat(n - s.length));
const lpad = (s: string, n: number): string => (s.length >= n ? s : ' '.repeat(n - s.length) + s);

export function renderTierTable(
  rows: Readonly<Record<string, TierRow>>,
  goals: readonly Goal[],
  header: readonly string[],
): string {
  const lines = [
    ...header,
    '',
    'each cell: value ±spread (half the difference between interleaved halves); ms of model time',
    '',
  ];
  const cols = [
    'router',
    'hit',
    'ttft p50',
    'ttft p99',
    'itl p50',
    'itl p99',
    'e2e p50',
    'e2e p99',
    'stale p50/p99',
  ];
  const widths = [22, 15, 13, 15, 11, 11, 15, 15, 14];
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i === 0 ? pad(c, widths[i] ?? 10) : lpad(c, widths[i] ?? 10))).join(' ');
  lines.push(line(cols));
  for (const [key, r] of Object.entries(rows)) {
    const cell = (k: keyof TierMetrics, d: number): string => `${r[k].toFixed(d)} ±${r.spread[k].toFixed(d)}`;
    lines.push(
      line([
        key,
        cell('hit_rate', 3),
        cell('ttft_p50_ms', 0),
        cell('ttft_p99_ms', 0),
        cell('itl_p50_ms', 1),
        cell('itl_p99_ms', 1),
        cell('e2e_p50_ms', 0),
        cell('e2e_p99_ms', 0),
        r.staleness_p50_ms === undefined ? '-' : `${r.staleness_p50_ms}/${r.staleness_p99_ms ?? 0}`,
      ]),
    );
  }
  lines.push('', 'goals:');
  for (const g of goals)
    lines.push(`  [${g.met === null ? 'n/a ' : g.met ? 'MET ' : 'MISS'}] ${g.goal} — ${g.detail}`);
  return lines.join('\n');
}
