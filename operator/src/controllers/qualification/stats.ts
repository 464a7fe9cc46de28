// The statistics of a qualification, pure: quantiles of per-request latencies,
// and a bootstrap interval on the difference of the arms' medians. The PRNG is
// seeded so a report (and a test) is reproducible from its record.
import { CDF_STEPS, type Quantiles } from '#api/qualification.ts';
import { createSeededRandom } from '#kube/seeded-random.ts';

/** The q-quantile (0..1) of sorted values by linear interpolation (numpy's default); undefined when empty. */
export function quantileSorted(sorted: readonly number[], q: number): number | undefined {
  if (sorted.length === 0) return undefined;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] ?? 0;
  const b = sorted[hi] ?? 0;
  return a + (b - a) * (pos - lo);
}

const byNumber = (a: number, b: number): number => a - b;

export function median(values: readonly number[]): number | undefined {
  return quantileSorted([...values].sort(byNumber), 0.5);
}

/** p50, p90 and p99, rounded to 0.01; undefined without values. */
export function computeQuantiles(values: readonly number[]): Quantiles | undefined {
  const sorted = [...values].sort(byNumber);
  const at = (q: number) => round2(quantileSorted(sorted, q) ?? 0);
  return sorted.length === 0 ? undefined : { p50: at(0.5), p90: at(0.9), p99: at(0.99) };
}

/** The values at quantiles 0, 1/CDF_STEPS, …, 1, rounded to 0.01; undefined without values. */
export function computeCdf(values: readonly number[]): number[] | undefined {
  const sorted = [...values].sort(byNumber);
  if (sorted.length === 0) return undefined;
  return Array.from({ length: CDF_STEPS + 1 }, (_, i) => round2(quantileSorted(sorted, i / CDF_STEPS) ?? 0));
}

export function round2(x: number): number {
  return Math.round(x * 100) / 100;
}

export interface BootstrapOptions {
  resamples: number;
  /** Two-sided coverage, e.g. 0.95. */
  confidence: number;
  seed: number;
}

export interface MedianDifference {
  /** median(arm 2) - median(arm 1), over every value of each arm. */
  difference: number;
  low: number;
  high: number;
  /** What was resampled: whole samples (requests of one sample move together) or requests. */
  unit: 'samples' | 'requests';
}

function resampleMedian(groups: readonly (readonly number[])[], random: () => number): number {
  const pooled: number[] = [];
  for (let i = 0; i < groups.length; i++) {
    const g = groups[Math.floor(random() * groups.length)] ?? [];
    for (const v of g) pooled.push(v);
  }
  return median(pooled) ?? Number.NaN;
}

/**
 * A percentile bootstrap interval on median(arm 2) - median(arm 1). The
 * requests of one sample share its cache state and its moment, so they are not
 * independent: with two or more samples on each arm whole samples are
 * resampled (a cluster bootstrap); with fewer, requests are, and `unit` says so.
 * Undefined when an arm has no value.
 */
export function bootstrapMedianDifference(
  arm1: readonly (readonly number[])[],
  arm2: readonly (readonly number[])[],
  opts: BootstrapOptions,
): MedianDifference | undefined {
  const a = arm1.filter((g) => g.length > 0);
  const b = arm2.filter((g) => g.length > 0);
  const m1 = median(a.flat());
  const m2 = median(b.flat());
  if (m1 === undefined || m2 === undefined) return undefined;
  const unit = a.length >= 2 && b.length >= 2 ? 'samples' : 'requests';
  const g1 = unit === 'samples' ? a : a.flat().map((v) => [v]);
  const g2 = unit === 'samples' ? b : b.flat().map((v) => [v]);
  const random = createSeededRandom(opts.seed);
  const diffs: number[] = [];
  for (let i = 0; i < opts.resamples; i++)
    diffs.push(resampleMedian(g2, random) - resampleMedian(g1, random));
  diffs.sort(byNumber);
  const tail = (1 - opts.confidence) / 2;
  return {
    difference: round2(m2 - m1),
    low: round2(quantileSorted(diffs, tail) ?? 0),
    high: round2(quantileSorted(diffs, 1 - tail) ?? 0),
    unit,
  };
}
