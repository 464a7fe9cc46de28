// Prometheus text exposition of SGLang 0.5.23's `sglang:` metrics, as its
// collectors emit them (python/sglang/srt/observability/metrics_collector.py,
// held to a real server by test/conformance/differential.test.ts). Pure: the
// server passes engine snapshots and timings in.
//
// Three label sets, as the real collectors use them:
// - scheduler: model_name, engine_type, tp_rank, pp_rank, moe_ep_rank (+ dp_rank
//   with DP ranks); engine_type is unified, prefill or decode (the PD mode);
// - tokenizer (per finished request): model_name, engine_type, plus
//   is_streaming on the token and latency series, cache_source on cached tokens;
// - radix cache: cache_type, tp_rank, pp_rank, dp_rank (+ pool, reason).
// SGLang runs prometheus_client in multiprocess mode: a labelled series exists
// only once something set it, so request series appear with the first
// request of their kind, aborts with the first abort, evictions with the first
// eviction. Families SGLang has and the simulator does not model (CUDA graphs,
// speculative decoding, SWA/Mamba pools, ...) are listed in
// test/conformance/differential-compare.ts.

import type { EngineSnapshot, RequestResult } from './engine.ts';
import { PriorityTally } from './priority-tally.ts';

// The collectors' default buckets (bucket_* flags unset).
const TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400];
const E2E_BUCKETS = [...TTFT_BUCKETS, 600, 1200, 1800, 2400];
const ITL_BUCKETS = [
  0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6,
  0.8, 1, 2, 4, 6, 8,
];
const QUEUE_BUCKETS = [
  0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200,
  300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000,
];
const TOKEN_BUCKETS = [
  100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 12500, 15000, 17500,
  20000, 22500, 25000, 27500, 30000, 35000, 40000, 60000, 80000, 100000, 200000, 300000, 400000, 600000,
  800000, 1e6, 1.1e6,
];
/** The radix cache class a Llama model gets in 0.5.23 (its metrics' cache_type). */
const CACHE_TYPE = 'UnifiedRadixCache';
/**
 * SGLANG_FORCE_STREAM_INTERVAL: a request that does not stream reaches the tokenizer every this
 * many tokens and when it finishes (output_streamer.accept), so only one longer than this has an
 * inter-token latency observed (tokenizer_manager.collect_metrics observes it from the second
 * output on).
 */
const FORCE_STREAM_INTERVAL = 50;
/** SGLang's health checks carry this rid prefix and log no metrics (log_metrics=False). */
const HEALTH_CHECK_PREFIX = 'HEALTH_CHECK';

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
  /** A PD prefill's requests from arrival to the end of their prefill. */
  readonly prefillInflight: PriorityTally;
  /** A PD decode's requests waiting for their prefill's KV. */
  readonly decodeTransfer: PriorityTally;
  bootstrapFailed: number;
}

/** Per is_streaming ("true"/"false") series of the tokenizer collector. */
class StreamSplit {
  promptTokens = 0;
  generationTokens = 0;
  requests = 0;
  readonly ttft = new Histogram(TTFT_BUCKETS);
  readonly e2e = new Histogram(E2E_BUCKETS);
}

/** The tokenizer collector's per-request series under one label set. */
class RequestSeries {
  readonly byStreaming = new Map<'true' | 'false', StreamSplit>();
  readonly itl = new Histogram(ITL_BUCKETS);
  readonly promptTokens = new Histogram(TOKEN_BUCKETS);
  readonly uncachedPromptTokens = new Histogram(TOKEN_BUCKETS);
  readonly generationTokens = new Histogram(TOKEN_BUCKETS);
  readonly cachedBySource = { device: 0, host: 0, storage: 0 };
  aborted = 0;
}

export class SimMetrics {
  /**
   * The tokenizer's series by their `priority` label: null without priority scheduling (no
   * label), else the request's priority as the tokenizer saw it, "" when it had none.
   */
  readonly byPriority = new Map<string | null, RequestSeries>();
  readonly queue = new Histogram(QUEUE_BUCKETS);
  readonly pd: PdGauges = {
    prefillInflight: new PriorityTally(),
    decodeTransfer: new PriorityTally(),
    bootstrapFailed: 0,
  };

  /** `priorityLabel`: see {@link tokenizerPriorityLabel}. */
  record(r: RequestResult, isStreaming = false, priorityLabel: string | null = null): void {
    if (r.rid.startsWith(HEALTH_CHECK_PREFIX)) return;
    const series = this.byPriority.get(priorityLabel) ?? new RequestSeries();
    this.byPriority.set(priorityLabel, series);
    if (r.finish === 'abort') {
      series.aborted++;
      return;
    }
    const key = isStreaming ? 'true' : 'false';
    const split = series.byStreaming.get(key) ?? new StreamSplit();
    series.byStreaming.set(key, split);
    split.promptTokens += r.promptTokens;
    split.generationTokens += r.completionTokens;
    split.requests++;
    split.ttft.observe(r.ttftMs / 1000);
    split.e2e.observe(r.e2eMs / 1000);
    this.queue.observe(r.queueMs / 1000);
    if (r.completionTokens > (isStreaming ? 1 : FORCE_STREAM_INTERVAL))
      series.itl.observe((r.e2eMs - r.ttftMs) / 1000 / (r.completionTokens - 1));
    series.promptTokens.observe(r.promptTokens);
    series.uncachedPromptTokens.observe(r.promptTokens - r.cachedTokens);
    series.generationTokens.observe(r.completionTokens);
    series.cachedBySource.device += r.cachedDevice;
    series.cachedBySource.host += r.cachedHost;
    series.cachedBySource.storage += r.cachedStorage ?? 0;
  }
}

/**
 * A priority as Python's str() writes it. The simulator holds SGLang's last-of-all
 * priorities (-sys.maxsize - 1, sys.maxsize) as +-2^63 (engine.ts), which a double
 * cannot print exactly.
 */
export function formatPriority(p: number): string {
  if (p === -(2 ** 63)) return '-9223372036854775808';
  if (p === 2 ** 63) return '9223372036854775807';
  return String(p);
}

/**
 * The `priority` label of a request's tokenizer series (tokenizer_manager.collect_metrics):
 * null with priority scheduling off (no label); else the request's own priority or
 * `--default-priority-value` (tokenizer_manager._set_default_priority), "" without either
 * (tokenizer_metric_labels' default: the scheduler's last-of-all value never reaches it).
 */
export function tokenizerPriorityLabel(
  own: number | null | undefined,
  scheduling: { readonly defaultPriority: number | null } | null | undefined,
): string | null {
  if (!scheduling) return null;
  const p = own ?? scheduling.defaultPriority;
  return p === null ? '' : formatPriority(p);
}

type Labels = Readonly<Record<string, string>>;

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(
    ([k, v]) => `${k}="${v.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`,
  );
  return `{${parts.join(',')}}`;
}

export interface MetricsInput {
  readonly modelName: string;
  readonly snapshot: EngineSnapshot;
  readonly metrics: SimMetrics;
  readonly pdMode: 'null' | 'prefill' | 'decode';
  readonly pageSize: number;
  readonly contextLength: number;
  readonly dpSize: number;
  /** Device tokens held by the cache that no request holds (evictable). */
  readonly evictableTokens: number;
  /** HiCache host tier: capacity and counters; null without HiCache. */
  readonly hicache: {
    readonly totalTokens: number;
    readonly backedUpTokens: number;
    readonly droppedTokens: number;
  } | null;
  /** The scheduler's pid (the `pid` label of num_retracted_reqs). */
  readonly pid: number;
}

/** DisaggregationMode.to_engine_type. */
export function engineTypeOf(pdMode: MetricsInput['pdMode']): string {
  return pdMode === 'null' ? 'unified' : pdMode;
}

/** prometheus_client's floatToGoString, which SGLang's bucket labels go through ("1.0", "1e+06"). */
export function formatBucket(v: number): string {
  if (v === Infinity) return '+Inf';
  const s = Number.isInteger(v) ? `${v}.0` : String(v);
  const dot = s.indexOf('.');
  if (v > 0 && dot > 6) {
    const mantissa = `${s[0]}.${s.slice(1, dot)}${s.slice(dot + 1)}`.replace(/[0.]+$/, '');
    return `${mantissa}e+0${dot - 1}`;
  }
  return s;
}

class Exposition {
  readonly #lines: string[] = [];

  family(name: string, type: string, help: string): void {
    this.#lines.push(`# HELP sglang:${name} ${help}`, `# TYPE sglang:${name} ${type}`);
  }

  sample(name: string, labels: Labels, v: number): void {
    this.#lines.push(`sglang:${name}${labelText(labels)} ${v}`);
  }

  histogram(name: string, labels: Labels, h: Histogram): void {
    h.buckets.forEach((b, i) =>
      this.sample(`${name}_bucket`, { ...labels, le: formatBucket(b) }, h.counts[i] ?? 0),
    );
    this.sample(`${name}_bucket`, { ...labels, le: '+Inf' }, h.count);
    this.sample(`${name}_sum`, labels, h.sum);
    this.sample(`${name}_count`, labels, h.count);
  }

  text(): string {
    return this.#lines.join('\n') + '\n';
  }
}

export function renderMetrics(input: MetricsInput): string {
  const engineType = engineTypeOf(input.pdMode);
  const byPriority = input.snapshot.byPriority;
  const scheduler: Labels = {
    model_name: input.modelName,
    engine_type: engineType,
    tp_rank: '0',
    pp_rank: '0',
    moe_ep_rank: '0',
    // SchedulerMetricsCollector.init_new: every scheduler series carries it, the totals under "".
    ...(byPriority ? { priority: '' } : {}),
    ...(input.dpSize > 1 ? { dp_rank: '0' } : {}),
  };
  const tokenizer: Labels = { model_name: input.modelName, engine_type: engineType };
  const radix: Labels = { cache_type: CACHE_TYPE, tp_rank: '0', pp_rank: '0', dp_rank: '0' };
  const out = new Exposition();
  const gauge = (name: string, help: string, v: number, labels: Labels = scheduler): void => {
    out.family(name, 'gauge', help);
    out.sample(name, labels, v);
  };
  const s = input.snapshot;
  const m = input.metrics;
  // The snapshot's used tokens are SGLang's: the evictable cache is not among them (engine.ts).
  const kvUsed = s.numUsedTokens;

  // _log_gauge_queue_count: the total, then with priority scheduling each known priority's count.
  const queueGauge = (
    name: string,
    help: string,
    total: number,
    counts?: ReadonlyMap<number, number>,
  ): void => {
    gauge(name, help, total);
    for (const p of byPriority?.known ?? [])
      out.sample(name, { ...scheduler, priority: formatPriority(p) }, counts?.get(p) ?? 0);
  };
  queueGauge('num_running_reqs', 'The number of running requests.', s.numRunningReqs, byPriority?.running);
  queueGauge(
    'num_queue_reqs',
    'The number of requests in the waiting queue.',
    s.numWaitingReqs,
    byPriority?.waiting,
  );
  gauge('num_grammar_queue_reqs', 'The number of requests in the grammar waiting queue.', 0);
  gauge('gen_throughput', 'The generation throughput (token/s).', s.genThroughput);
  gauge('cache_hit_rate', 'The prefix cache hit rate.', s.cacheHitRate);
  gauge('token_usage', 'The token usage.', s.tokenUsage);
  gauge('full_token_usage', 'The token usage of the full-attention pool.', s.tokenUsage);
  gauge('num_used_tokens', 'The number of used tokens.', kvUsed);
  gauge(
    'kv_available_tokens',
    'KV tokens free in the pool.',
    s.maxTotalNumTokens - s.numUsedTokens - input.evictableTokens,
  );
  gauge('kv_evictable_tokens', 'KV tokens held by the cache and evictable.', input.evictableTokens);
  gauge('kv_used_tokens', 'KV tokens held by running requests.', kvUsed);
  gauge('num_retracted_reqs', 'The number of retracted requests.', 0, {
    ...scheduler,
    pid: String(input.pid),
  });
  // A report fills the QueueCounts of its own mode's PD queues, by priority with priority
  // scheduling on (metrics_reporter report_prefill_stats, _update_decode_queue_stats); the other
  // mode's, and all of them on a unified server, stay QueueCount() (by_priority None): totals only.
  const pdQueueGauge = (
    name: string,
    help: string,
    mode: MetricsInput['pdMode'],
    q?: PriorityTally,
  ): void => {
    if (mode === input.pdMode) queueGauge(name, help, q?.total ?? 0, q?.counts);
    else gauge(name, help, q?.total ?? 0);
  };
  pdQueueGauge(
    'num_prefill_bootstrap_queue_reqs',
    'The number of requests in the prefill bootstrap queue.',
    'prefill',
  );
  pdQueueGauge(
    'num_prefill_inflight_queue_reqs',
    'The number of requests in the prefill inflight queue.',
    'prefill',
    m.pd.prefillInflight,
  );
  pdQueueGauge(
    'num_decode_prealloc_queue_reqs',
    'The number of requests in the decode prealloc queue.',
    'decode',
  );
  pdQueueGauge(
    'num_decode_transfer_queue_reqs',
    'The number of requests in the decode transfer queue.',
    'decode',
    m.pd.decodeTransfer,
  );
  gauge('utilization', 'The utilization.', s.tokenUsage);
  gauge('max_total_num_tokens', 'Maximum total number of tokens in the KV cache pool.', s.maxTotalNumTokens);
  gauge('page_size', 'The page size of the KV cache.', input.pageSize);
  gauge(
    'num_pages',
    'The number of pages of the KV cache.',
    Math.floor(s.maxTotalNumTokens / input.pageSize),
  );
  gauge('context_len', 'The context length of the model.', input.contextLength);
  if (input.hicache) {
    gauge('hicache_host_used_tokens', 'KV tokens held in the host tier.', s.hostCachedTokens);
    gauge('hicache_host_total_tokens', 'The capacity of the host tier in tokens.', input.hicache.totalTokens);
  }
  if (m.queue.count > 0) {
    out.family('queue_time_seconds', 'histogram', 'Histogram of queueing time in seconds.');
    out.histogram('queue_time_seconds', scheduler, m.queue);
  }
  if (input.pdMode !== 'null' && m.pd.bootstrapFailed > 0) {
    out.family('num_bootstrap_failed_reqs_total', 'counter', 'The number of bootstrap failed requests.');
    out.sample('num_bootstrap_failed_reqs_total', scheduler, m.pd.bootstrapFailed);
  }
  renderRequestSeries(out, tokenizer, m);
  renderRadixSeries(out, radix, s, input.hicache);
  return out.text();
}

/** The tokenizer collector's per-request series, one label set per request priority. */
function renderRequestSeries(out: Exposition, base: Labels, m: SimMetrics): void {
  const groups = [...m.byPriority.entries()]
    .sort(([a], [b]) => (a ?? '').localeCompare(b ?? ''))
    .map(([p, series]) => ({ labels: p === null ? base : { ...base, priority: p }, series }));
  const splits = groups.flatMap(({ labels, series }) =>
    [...series.byStreaming.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, s]) => ({ labels: { ...labels, is_streaming: k }, s })),
  );
  const perStream = (name: string, type: string, help: string, value: (s: StreamSplit) => number): void => {
    if (splits.length === 0) return;
    out.family(name, type, help);
    for (const { labels, s } of splits) out.sample(name, labels, value(s));
  };
  perStream('prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', (s) => s.promptTokens);
  perStream(
    'generation_tokens_total',
    'counter',
    'Number of generation tokens processed.',
    (s) => s.generationTokens,
  );
  perStream('num_requests_total', 'counter', 'Number of requests processed.', (s) => s.requests);
  const cached = groups.flatMap(({ labels, series }) =>
    (['device', 'host', 'storage'] as const)
      .filter((k) => series.cachedBySource[k] > 0)
      .map((k) => ({ labels: { ...labels, cache_source: k }, v: series.cachedBySource[k] })),
  );
  if (cached.length > 0) {
    out.family(
      'cached_tokens_total',
      'counter',
      'Number of cached prompt tokens by source (device/host/storage).',
    );
    for (const { labels, v } of cached) out.sample('cached_tokens_total', labels, v);
  }
  const aborted = groups.filter(({ series }) => series.aborted > 0);
  if (aborted.length > 0) {
    out.family('num_aborted_requests_total', 'counter', 'Number of requests aborted.');
    for (const { labels, series } of aborted)
      out.sample('num_aborted_requests_total', labels, series.aborted);
  }
  if (splits.length > 0) {
    out.family('time_to_first_token_seconds', 'histogram', 'Histogram of time to first token in seconds.');
    for (const { labels, s } of splits) out.histogram('time_to_first_token_seconds', labels, s.ttft);
    out.family(
      'e2e_request_latency_seconds',
      'histogram',
      'Histogram of End-to-end request latency in seconds',
    );
    for (const { labels, s } of splits) out.histogram('e2e_request_latency_seconds', labels, s.e2e);
  }
  const plain: [string, string, (s: RequestSeries) => Histogram][] = [
    ['inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', (s) => s.itl],
    ['prompt_tokens_histogram', 'Histogram of prompt token length.', (s) => s.promptTokens],
    [
      'uncached_prompt_tokens_histogram',
      'Histogram of uncached prompt token length.',
      (s) => s.uncachedPromptTokens,
    ],
    ['generation_tokens_histogram', 'Histogram of generation token length.', (s) => s.generationTokens],
  ];
  for (const [name, help, pick] of plain) {
    const observed = groups.filter(({ series }) => pick(series).count > 0);
    if (observed.length === 0) continue;
    out.family(name, 'histogram', help);
    for (const { labels, series } of observed) out.histogram(name, labels, pick(series));
  }
}

/** The radix cache collector: evictions, and HiCache's backups, load-backs and drops. */
function renderRadixSeries(
  out: Exposition,
  labels: Labels,
  s: EngineSnapshot,
  hicache: MetricsInput['hicache'],
): void {
  const counter = (name: string, help: string, extra: Labels, v: number): void => {
    out.family(name, 'counter', help);
    out.sample(name, { ...labels, ...extra }, v);
  };
  const c = s.counters;
  if (c.evictedDeviceTokens > 0) {
    counter(
      'evicted_tokens_total',
      'Number of tokens evicted from the device cache.',
      {},
      c.evictedDeviceTokens,
    );
  }
  if (!hicache) return;
  if (c.loadedBackTokens > 0) {
    counter(
      'load_back_tokens_total',
      'Number of tokens loaded back from host.',
      { pool: 'kv' },
      c.loadedBackTokens,
    );
  }
  if (hicache.backedUpTokens > 0) {
    counter(
      'hicache_backup_tokens_total',
      'Number of tokens backed up to host.',
      { pool: 'kv' },
      hicache.backedUpTokens,
    );
  }
  // Both reasons are registered when HiCache starts (0 until a drop).
  out.family('hicache_dropped_tokens_total', 'counter', 'Number of tokens dropped from the host tier.');
  out.sample(
    'hicache_dropped_tokens_total',
    { ...labels, reason: 'host_pressure', pool: 'kv' },
    hicache.droppedTokens,
  );
  out.sample(
    'hicache_dropped_tokens_total',
    { ...labels, reason: 'write_through_unbacked_eviction', pool: 'kv' },
    0,
  );
}
