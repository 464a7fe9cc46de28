// Prometheus text exposition of SGLang's `sglang:` metrics (reference §2,
// python/sglang/srt/metrics/collector.py). Labels: model_name, engine_type,
// tp_rank, pp_rank. Pure: the server passes engine snapshots and timings in.

import type { EngineSnapshot, RequestResult } from './engine.ts';

const LATENCY_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 15, 20, 25, 30, 40,
  50, 60, 90, 120, 180, 300,
];
const ITL_BUCKETS = [
  0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1,
];

class Histogram {
  readonly buckets: readonly number[];
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(buckets: readonly number[]) {
    this.buckets = buckets;
    this.counts = buckets.map(() => 0);
  }

  observe(v: number): void {
    this.sum += v;
    this.count++;
    for (let i = 0; i < this.buckets.length; i++)
      if (v <= (this.buckets[i] ?? Infinity)) this.counts[i] = (this.counts[i] ?? 0) + 1;
  }
}

export interface PdGauges {
  prefillInflight: number;
  decodeTransfer: number;
  bootstrapFailed: number;
}

export class SimMetrics {
  readonly ttft = new Histogram(LATENCY_BUCKETS);
  readonly e2e = new Histogram(LATENCY_BUCKETS);
  readonly queue = new Histogram(LATENCY_BUCKETS);
  readonly itl = new Histogram(ITL_BUCKETS);
  readonly pd: PdGauges = { prefillInflight: 0, decodeTransfer: 0, bootstrapFailed: 0 };

  record(r: RequestResult): void {
    if (r.finish === 'abort') return;
    this.ttft.observe(r.ttftMs / 1000);
    this.e2e.observe(r.e2eMs / 1000);
    this.queue.observe(r.queueMs / 1000);
    if (r.completionTokens > 1) this.itl.observe((r.e2eMs - r.ttftMs) / 1000 / (r.completionTokens - 1));
  }
}

function labelText(labels: Readonly<Record<string, string>>): string {
  const parts = Object.entries(labels).map(
    ([k, v]) => `${k}="${v.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`,
  );
  return `{${parts.join(',')}}`;
}

export interface MetricsInput {
  readonly modelName: string;
  readonly snapshot: EngineSnapshot;
  readonly metrics: SimMetrics;
  readonly hicache: boolean;
  readonly pdMode: 'null' | 'prefill' | 'decode';
  readonly pageSize: number;
}

export function renderMetrics(input: MetricsInput): string {
  const labels = { model_name: input.modelName, engine_type: 'unified', tp_rank: '0', pp_rank: '0' };
  const l = labelText(labels);
  const out: string[] = [];
  const gauge = (name: string, help: string, v: number): void => {
    out.push(`# HELP sglang:${name} ${help}`, `# TYPE sglang:${name} gauge`, `sglang:${name}${l} ${v}`);
  };
  const counter = (name: string, help: string, v: number): void => {
    out.push(`# HELP sglang:${name} ${help}`, `# TYPE sglang:${name} counter`, `sglang:${name}${l} ${v}`);
  };
  const histogram = (name: string, help: string, h: Histogram): void => {
    out.push(`# HELP sglang:${name} ${help}`, `# TYPE sglang:${name} histogram`);
    h.buckets.forEach((b, i) =>
      out.push(`sglang:${name}_bucket${labelText({ ...labels, le: String(b) })} ${h.counts[i] ?? 0}`),
    );
    out.push(`sglang:${name}_bucket${labelText({ ...labels, le: '+Inf' })} ${h.count}`);
    out.push(`sglang:${name}_sum${l} ${h.sum}`, `sglang:${name}_count${l} ${h.count}`);
  };
  const s = input.snapshot;
  const c = s.counters;
  gauge('num_running_reqs', 'The number of running requests.', s.numRunningReqs);
  gauge('num_used_tokens', 'The number of used tokens.', s.numUsedTokens);
  gauge('token_usage', 'The token usage.', s.tokenUsage);
  gauge('gen_throughput', 'The generation throughput (token/s).', s.genThroughput);
  gauge('num_queue_reqs', 'The number of requests in the waiting queue.', s.numWaitingReqs);
  gauge('num_grammar_queue_reqs', 'The number of requests in the grammar waiting queue.', 0);
  gauge('cache_hit_rate', 'The prefix cache hit rate.', s.cacheHitRate);
  gauge('max_total_num_tokens', 'Maximum total number of tokens in the KV cache pool.', s.maxTotalNumTokens);
  gauge('num_retracted_reqs', 'The number of retracted requests.', 0);
  gauge('utilization', 'The utilization.', s.tokenUsage);
  if (input.pdMode !== 'null') {
    gauge('num_prefill_prealloc_queue_reqs', 'The number of requests in the prefill prealloc queue.', 0);
    gauge(
      'num_prefill_inflight_queue_reqs',
      'The number of requests in the prefill inflight queue.',
      input.metrics.pd.prefillInflight,
    );
    gauge('num_decode_prealloc_queue_reqs', 'The number of requests in the decode prealloc queue.', 0);
    gauge(
      'num_decode_transfer_queue_reqs',
      'The number of requests in the decode transfer queue.',
      input.metrics.pd.decodeTransfer,
    );
    gauge('kv_transfer_speed_gb_s', 'The KV transfer speed in GB/s.', 0);
    gauge('kv_transfer_latency_ms', 'The KV transfer latency in ms.', 0);
    counter(
      'num_bootstrap_failed_reqs_total',
      'The number of bootstrap failed requests.',
      input.metrics.pd.bootstrapFailed,
    );
    counter('num_transfer_failed_reqs_total', 'The number of transfer failed requests.', 0);
  }
  counter('prompt_tokens_total', 'Number of prefill tokens processed.', c.promptTokens);
  counter('generation_tokens_total', 'Number of generation tokens processed.', c.generationTokens);
  counter('cached_tokens_total', 'Number of cached prompt tokens.', c.cachedTokens);
  counter('num_requests_total', 'Number of requests processed.', c.requests);
  counter('num_aborted_requests_total', 'Number of requests aborted.', c.aborted);
  histogram(
    'time_to_first_token_seconds',
    'Histogram of time to first token in seconds.',
    input.metrics.ttft,
  );
  histogram('inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', input.metrics.itl);
  histogram(
    'e2e_request_latency_seconds',
    'Histogram of End-to-end request latency in seconds',
    input.metrics.e2e,
  );
  histogram('queue_time_seconds', 'Histogram of queueing time in seconds.', input.metrics.queue);
  if (input.hicache) {
    counter('prefetched_tokens_total', 'Number of prefetched prompt tokens.', c.loadedBackTokens);
    counter('backuped_tokens_total', 'Number of backuped tokens.', s.hostCachedTokens);
    gauge('prefetch_pgs', 'Prefetch pages.', Math.floor(c.loadedBackTokens / input.pageSize));
    gauge('backup_pgs', 'Backup pages.', Math.floor(s.hostCachedTokens / input.pageSize));
    gauge('prefetch_bandwidth', 'Prefetch bandwidth in GB/s.', 0);
    gauge('backup_bandwidth', 'Backup bandwidth in GB/s.', 0);
  }
  return out.join('\n') + '\n';
}

/** The `/v1/loads` entry for DP rank 0 (entrypoints/v1_loads.py). */
export function buildLoad(s: EngineSnapshot, maxRunningRequests: number): Record<string, number> {
  return {
    dp_rank: 0,
    num_running_reqs: s.numRunningReqs,
    num_waiting_reqs: s.numWaitingReqs,
    num_used_tokens: s.numUsedTokens,
    max_total_num_tokens: s.maxTotalNumTokens,
    token_usage: s.tokenUsage,
    gen_throughput: s.genThroughput,
    cache_hit_rate: s.cacheHitRate,
    utilization: s.tokenUsage,
    max_running_requests: maxRunningRequests,
  };
}

export function renderLoadsPrometheus(load: Record<string, number>, modelName: string): string {
  const l = labelText({ model_name: modelName, dp_rank: String(load['dp_rank'] ?? 0) });
  return (
    Object.entries(load)
      .filter(([k]) => k !== 'dp_rank')
      .map(([k, v]) => `# TYPE sglang:${k} gauge\nsglang:${k}${l} ${v}`)
      .join('\n') + '\n'
  );
}
