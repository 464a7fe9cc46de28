// The `picker` row's ratios and verdicts (pure): the gateway as GIE's endpoint picker behind
// Envoy against the standalone gateway (`cache-aware`), replayed in the same run on the same
// simulators; and, in the overhead phase, Envoy + picker against smg.
//
// Noise: each row carries its spread (half the difference between the requests of even and of
// odd index, tier-report.ts). A ratio's spread adds the two rows' relative spreads (first order:
// (a ± da) / (b ± db) ≈ a/b · (1 ± (da/a + db/b))), so a ratio inside 1 ± spread is no result.

import type { OverheadStats } from './bench-overhead.ts';
import { isResult, type Goal, type RouterEntry } from './bench-report.ts';
import type { TierMetrics } from './tier-report.ts';

export const STANDALONE_ROW = 'cache-aware';
export const PICKER_ROW_KEY = 'picker';

const METRICS = [
  'hit_rate',
  'ttft_p50_ms',
  'ttft_p99_ms',
  'itl_p50_ms',
  'itl_p99_ms',
  'e2e_p50_ms',
  'e2e_p99_ms',
] as const satisfies readonly (keyof TierMetrics)[];

export interface Ratio {
  /** picker / standalone. */
  readonly ratio: number;
  /** The ratio's spread, from the two rows' spreads. */
  readonly spread: number;
}

/** Per metric: picker / standalone gateway, or null where the standalone value is 0 or missing. */
export type PickerComparison = { readonly [K in (typeof METRICS)[number]]: Ratio | null };

const r4 = (x: number): number => Number(x.toFixed(4));

/** The picker row over the standalone gateway's, per metric; undefined unless both ran. */
export function comparePickerRow(
  routers: Readonly<Record<string, RouterEntry>>,
): PickerComparison | undefined {
  const base = routers[STANDALONE_ROW];
  const picker = routers[PICKER_ROW_KEY];
  if (!isResult(base) || !isResult(picker)) return undefined;
  const one = (k: (typeof METRICS)[number]): Ratio | null => {
    const a = picker[k];
    const b = base[k];
    if (a === undefined || b === undefined || !(b > 0)) return null;
    const ratio = a / b;
    const rel = (x: number, dx: number | undefined): number => (x > 0 ? (dx ?? 0) / x : 0);
    return { ratio: r4(ratio), spread: r4(ratio * (rel(a, picker.spread?.[k]) + rel(b, base.spread?.[k]))) };
  };
  return Object.fromEntries(METRICS.map((k) => [k, one(k)])) as PickerComparison;
}

const fmt = (x: number): string => x.toFixed(3);
const show = (r: Ratio): string => `${fmt(r.ratio)} ±${fmt(r.spread)}`;

/**
 * Issue 32's goals for the row: hit rate >= 0.98 and TTFT p50 <= 1.02 of the standalone
 * gateway's. Judged on the ratio itself; its spread is in the detail. `asked`: the run
 * included the picker row (none of this when --routers left it out).
 */
export function judgePickerGoals(routers: Readonly<Record<string, RouterEntry>>, asked = true): Goal[] {
  if (!asked) return [];
  const hitGoal = "picker hit rate >= 0.98 of the standalone gateway's";
  const ttftGoal = "picker TTFT p50 <= 1.02 of the standalone gateway's";
  const c = comparePickerRow(routers);
  const base = routers[STANDALONE_ROW];
  const picker = routers[PICKER_ROW_KEY];
  if (!c || !isResult(base) || !isResult(picker) || !c.hit_rate || !c.ttft_p50_ms) {
    const detail = `${STANDALONE_ROW} or ${PICKER_ROW_KEY} did not run`;
    return [
      { goal: hitGoal, met: null, detail },
      { goal: ttftGoal, met: null, detail },
    ];
  }
  return [
    {
      goal: hitGoal,
      met: c.hit_rate.ratio >= 0.98,
      detail: `${fmt(picker.hit_rate)} / ${fmt(base.hit_rate)} = ${show(c.hit_rate)}`,
    },
    {
      goal: ttftGoal,
      met: c.ttft_p50_ms.ratio <= 1.02,
      detail: `${picker.ttft_p50_ms} / ${base.ttft_p50_ms} ms = ${show(c.ttft_p50_ms)}`,
    },
  ];
}

/**
 * Issue 32's overhead goal: what Envoy + picker adds at p99 over the direct baseline, no more
 * than smg adds, measured in the same interleaved rounds. The detail names Envoy alone on a
 * static route (the floor of any ext_proc path) and each one's CPU per request.
 */
export function judgePickerOverhead(
  overhead: Readonly<Record<string, OverheadStats>> | undefined,
  rate: number,
): Goal | undefined {
  const direct = overhead?.['direct'];
  const picker = overhead?.['envoy-picker'];
  if (!direct || !picker) return undefined;
  const goal = `Envoy + picker added latency p99 <= smg's at ${rate} req/s`;
  const smg = overhead['smg'];
  if (!smg) return { goal, met: null, detail: 'smg did not run' };
  const added = (s: OverheadStats): string => {
    const cpu = s.cpu_ms_per_req === undefined ? '' : `, ${s.cpu_ms_per_req} ms CPU/request`;
    const errors = s.errors > 0 ? `, ${s.errors} errors` : '';
    return `+${(s.p99_ms - direct.p99_ms).toFixed(3)} ms${cpu}${errors}`;
  };
  const floor = overhead['envoy-static'];
  return {
    goal,
    met: picker.p99_ms <= smg.p99_ms && picker.errors === 0,
    detail:
      `Envoy + picker ${added(picker)}; smg ${added(smg)}` +
      (floor ? `; Envoy alone (static route, the floor) ${added(floor)}` : ''),
  };
}

/** The table's lines for the ratios (none when the comparison could not be made). */
export function renderPickerLines(c: PickerComparison | null | undefined): string[] {
  if (!c) return [];
  const cell = (label: string, r: Ratio | null): string => `${label} ${r ? show(r) : '-'}`;
  return [
    '',
    'picker / standalone gateway (same run, same simulators; ±: the spreads carried into the ratio):',
    `  ${cell('hit', c.hit_rate)}   ${cell('ttft p50', c.ttft_p50_ms)}   ${cell('ttft p99', c.ttft_p99_ms)}`,
    `  ${cell('itl p50', c.itl_p50_ms)}   ${cell('itl p99', c.itl_p99_ms)}   ${cell('e2e p50', c.e2e_p50_ms)}   ${cell('e2e p99', c.e2e_p99_ms)}`,
  ];
}
