// How stale the tier's view of its peers' load was in a wall-clock run: each
// replica's cacheroute_gateway_peer_load_lag_seconds histogram (fleet/
// tier-load.ts: sender's change to receipt), summed over the replicas. The
// quantiles are the histogram's bucket bounds (the smallest bound holding
// the quantile), so they are ceilings at the buckets' resolution.

/** The staleness the exchange's caught-up changes measured, over the whole tier. */
export interface ExchangeLag {
  /** Changes caught up, over every replica. */
  readonly changes: number;
  /** Bucket bound holding the median / the 99th percentile (ms); null past the last finite bound. */
  readonly p50_le_ms: number | null;
  readonly p99_le_ms: number | null;
  readonly mean_ms: number;
}

const METRIC = 'cacheroute_gateway_peer_load_lag_seconds';

/** One /metrics text's lag histogram: cumulative count per bucket bound (s), the sum (s) and count. */
export function parseLagHistogram(text: string): {
  buckets: Map<number, number>;
  sum: number;
  count: number;
} {
  const buckets = new Map<number, number>();
  let sum = 0;
  let count = 0;
  for (const line of text.split('\n')) {
    const bucket = new RegExp(`^${METRIC}_bucket\\{le="([^"]+)"\\} (\\S+)$`).exec(line);
    if (bucket) buckets.set(bucket[1] === '+Inf' ? Infinity : Number(bucket[1]), Number(bucket[2]));
    const s = new RegExp(`^${METRIC}_sum (\\S+)$`).exec(line);
    if (s) sum = Number(s[1]);
    const c = new RegExp(`^${METRIC}_count (\\S+)$`).exec(line);
    if (c) count = Number(c[1]);
  }
  return { buckets, sum, count };
}

/** The replicas' histograms summed, and its quantiles; undefined when no replica measured a change. */
export function computeExchangeLag(metricsTexts: readonly string[]): ExchangeLag | undefined {
  const buckets = new Map<number, number>();
  let sum = 0;
  let count = 0;
  for (const text of metricsTexts) {
    const h = parseLagHistogram(text);
    for (const [le, n] of h.buckets) buckets.set(le, (buckets.get(le) ?? 0) + n);
    sum += h.sum;
    count += h.count;
  }
  if (count === 0) return undefined;
  const bounds = [...buckets.keys()].sort((a, b) => a - b);
  const quantile = (q: number): number | null => {
    const le = bounds.find((b) => (buckets.get(b) ?? 0) >= q * count);
    return le === undefined || !Number.isFinite(le) ? null : Number((le * 1000).toFixed(3));
  };
  return {
    changes: count,
    p50_le_ms: quantile(0.5),
    p99_le_ms: quantile(0.99),
    mean_ms: Number(((sum / count) * 1000).toFixed(3)),
  };
}
