// Per-request records → the replay summary (pure).

import type { StreamOutcome } from './replay-client.ts';

export interface RequestRecord {
  readonly index: number;
  readonly ok: boolean;
  readonly status: number;
  readonly error?: string;
  readonly worker: string;
  readonly sentAtMs: number;
  readonly ttftMs: number;
  /** Gaps between consecutive output tokens (chunks), ms, where measured. */
  readonly itlMs?: readonly number[];
  readonly e2eMs: number;
  readonly promptTokens: number;
  readonly cachedTokens: number;
  readonly completionTokens: number;
}

/** The record of a request answered over HTTP; `worker` when the answer did not name one. */
export function buildStreamRecord(
  index: number,
  o: StreamOutcome,
  sentAtMs: number,
  worker: string,
): RequestRecord {
  return {
    index,
    ok: o.status === 200 && o.error === undefined,
    status: o.status,
    ...(o.error === undefined ? {} : { error: o.error }),
    worker: o.worker ?? worker,
    sentAtMs,
    ttftMs: o.ttftMs,
    itlMs: o.itlMs,
    e2eMs: o.e2eMs,
    promptTokens: o.promptTokens,
    cachedTokens: o.cachedTokens,
    completionTokens: o.completionTokens,
  };
}

/** The record of a request an engine finished in virtual time (always HTTP 200 there). */
export function buildVirtualRecord(
  index: number,
  worker: string,
  r: {
    finish: string;
    arrivedAt: number;
    ttftMs: number;
    e2eMs: number;
    promptTokens: number;
    cachedTokens: number;
    completionTokens: number;
  },
): RequestRecord {
  return {
    index,
    ok: r.finish === 'length',
    status: 200,
    worker,
    sentAtMs: r.arrivedAt,
    ttftMs: r.ttftMs,
    e2eMs: r.e2eMs,
    promptTokens: r.promptTokens,
    cachedTokens: r.cachedTokens,
    completionTokens: r.completionTokens,
  };
}

export interface Summary {
  readonly requests: number;
  readonly ok: number;
  readonly errors: number;
  readonly prompt_tokens: number;
  readonly cached_tokens: number;
  readonly hit_rate: number;
  readonly bound: number;
  readonly hit_rate_vs_bound: number;
  readonly ttft_p50_ms: number;
  readonly ttft_p99_ms: number;
  readonly e2e_p50_ms: number;
  readonly e2e_p99_ms: number;
  readonly throughput_rps: number;
  readonly duration_s: number;
  readonly scale: number;
  readonly per_worker: Record<string, number>;
  readonly imbalance: number;
}

/** Nearest-rank percentile of `values` (p in 0..100); 0 for no values. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] ?? 0;
}

const round = (x: number, digits = 4): number => Number(x.toFixed(digits));

export function computeSummary(
  records: readonly RequestRecord[],
  bound: number,
  durationMs: number,
  scale: number,
): Summary {
  const ok = records.filter((r) => r.ok);
  const prompt = ok.reduce((s, r) => s + r.promptTokens, 0);
  const cached = ok.reduce((s, r) => s + r.cachedTokens, 0);
  const perWorker: Record<string, number> = {};
  for (const r of ok) perWorker[r.worker] = (perWorker[r.worker] ?? 0) + 1;
  const counts = Object.values(perWorker);
  const mean = counts.length > 0 ? counts.reduce((a, b) => a + b, 0) / counts.length : 0;
  const hitRate = prompt > 0 ? cached / prompt : 0;
  return {
    requests: records.length,
    ok: ok.length,
    errors: records.length - ok.length,
    prompt_tokens: prompt,
    cached_tokens: cached,
    hit_rate: round(hitRate),
    bound: round(bound),
    hit_rate_vs_bound: bound > 0 ? round(hitRate / bound) : 0,
    ttft_p50_ms: round(
      percentile(
        ok.map((r) => r.ttftMs),
        50,
      ),
      1,
    ),
    ttft_p99_ms: round(
      percentile(
        ok.map((r) => r.ttftMs),
        99,
      ),
      1,
    ),
    e2e_p50_ms: round(
      percentile(
        ok.map((r) => r.e2eMs),
        50,
      ),
      1,
    ),
    e2e_p99_ms: round(
      percentile(
        ok.map((r) => r.e2eMs),
        99,
      ),
      1,
    ),
    throughput_rps: durationMs > 0 ? round((ok.length * 1000) / durationMs, 2) : 0,
    duration_s: round(durationMs / 1000, 2),
    scale,
    per_worker: perWorker,
    imbalance: mean > 0 ? round(Math.max(...counts) / mean, 3) : 0,
  };
}
