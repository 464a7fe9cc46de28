// The tier bench's goal ratios over several draws of the same trace (`--draw-salts`).
//
// Where replicas split tied runtimes at random (cache-aware's in-transit draw hashes the
// request's id, ADR 0046), one run of a trace is one draw: changing only the hash's key moved
// one trace's R=8 ratio by about ±0.05 (docs/benchmarks.md, "exact ties"). A rule is judged on
// the ratios' mean and range over salts, not on one sample.

import { isRatioMet, type TierRatio } from './tier-report.ts';

/** A goal's ratio over draws: mean, range, and in how many draws it was met. */
export interface DrawSummary {
  readonly mean: number;
  readonly min: number;
  readonly max: number;
  readonly met: number;
  readonly draws: number;
}

/** Each goal's summary over the draws (goals missing from a draw are left out of its figures). */
export function summarizeDraws(
  draws: readonly Readonly<Record<string, TierRatio>>[],
): Record<string, DrawSummary> {
  const goals = [...new Set(draws.flatMap((d) => Object.keys(d)))];
  return Object.fromEntries(
    goals.map((goal) => {
      const seen = draws.flatMap((d) => (d[goal] ? [d[goal]] : []));
      const values = seen.map((r) => r.value);
      const r4 = (x: number): number => Number(x.toFixed(4));
      return [
        goal,
        {
          mean: r4(values.reduce((s, v) => s + v, 0) / values.length),
          min: r4(Math.min(...values)),
          max: r4(Math.max(...values)),
          met: seen.filter(isRatioMet).length,
          draws: seen.length,
        },
      ];
    }),
  );
}

/** The summary as lines for the human table. */
export function renderDrawSummary(
  salts: readonly string[],
  summary: Readonly<Record<string, DrawSummary>>,
): string {
  const lines = [`over ${salts.length} draws (salts ${salts.join(', ')}): mean [min, max], met in`];
  for (const [goal, s] of Object.entries(summary))
    lines.push(
      `  ${goal}: ${s.mean.toFixed(3)} [${s.min.toFixed(3)}, ${s.max.toFixed(3)}], met in ${s.met} of ${s.draws}`,
    );
  return lines.join('\n');
}
