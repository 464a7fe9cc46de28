// Figures the conformance suites report for `make conformance`'s last line:
// each suite adds its counts under a file of its own in CONFORMANCE_REPORT_DIR,
// and hack/conformance-summary.ts sums them into one JSON line.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const CONFORMANCE_KEYS = [
  'specs_checked',
  'disagreements',
  'responses_validated',
  'catalogue_drift',
  'differential_mismatches',
  'pd_differential_mismatches',
  'l3_differential_mismatches',
] as const;
export type ConformanceKey = (typeof CONFORMANCE_KEYS)[number];
export type ConformanceCounts = Partial<Record<ConformanceKey, number>>;

/** Records a suite's counts (a no-op outside `make conformance`, which sets the directory). */
export function recordConformance(suite: string, counts: ConformanceCounts): void {
  const dir = process.env['CONFORMANCE_REPORT_DIR'];
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${suite.replaceAll(/[^A-Za-z0-9_-]/g, '_')}.json`);
  writeFileSync(file, JSON.stringify(counts));
}

/** The sum of every suite's counts in `dir`; a key no suite reported is absent. */
export function sumConformance(dir: string): ConformanceCounts {
  const total: ConformanceCounts = {};
  for (const name of readdirSync(dir)
    .filter((n) => n.endsWith('.json'))
    .sort()) {
    const counts = JSON.parse(readFileSync(join(dir, name), 'utf8')) as ConformanceCounts;
    for (const key of CONFORMANCE_KEYS) {
      const v = counts[key];
      if (typeof v === 'number') total[key] = (total[key] ?? 0) + v;
    }
  }
  return total;
}
