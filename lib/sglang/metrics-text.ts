// Samples from a runtime's /metrics (the Prometheus text format SGLang's
// prometheus_client writes): name and value, labels skipped. A label value may
// hold spaces and braces inside its quotes, so the end of the label set is
// found by scanning, not by the last space.

export interface MetricSample {
  readonly name: string;
  readonly value: number;
  /**
   * SGLang's per-priority breakdown of a queue gauge (a `priority` label other than ""): with
   * --enable-priority-scheduling the total is under priority="" and each priority's count beside
   * it (observability/metrics_collector.py _log_gauge_queue_count), so a sum over every sample
   * counts each request twice. Counters labelled per request's priority are no breakdown of a
   * total, and carry this too: the caller that sums a queue leaves these out.
   */
  readonly byPriority: boolean;
}

/**
 * The gauges SGLang 0.5.23 writes per priority beside their total with priority scheduling on
 * (metrics_collector.SchedulerMetricsCollector.log_stats: the _log_gauge_queue_count ones). A
 * query that sums one reads the totals only: `priority=""` (which also matches a server without
 * the label).
 */
export const PRIORITY_BROKEN_DOWN_GAUGES: readonly string[] = [
  'sglang:num_running_reqs',
  'sglang:num_queue_reqs',
  'sglang:num_prefill_bootstrap_queue_reqs',
  'sglang:num_prefill_inflight_queue_reqs',
  'sglang:num_decode_prealloc_queue_reqs',
  'sglang:num_decode_transfer_queue_reqs',
  'sglang:num_decode_host_receive_queue_reqs',
];

const PRIORITY_LABEL = /[{,]\s*priority="([^"]*)"/;

/** Index just past the label set that opens at `open` (a `{`), honouring quotes and escapes. */
function skipLabels(line: string, open: number): number {
  let quoted = false;
  for (let i = open + 1; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '\\') i++;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === '}') return i + 1;
  }
  return line.length;
}

/** The samples whose metric name `accept`s (comments and blank lines skipped; a sample that does not parse is dropped). */
export function readMetricSamples(text: string, accept: (name: string) => boolean): MetricSample[] {
  const out: MetricSample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd <= 0) continue;
    const name = line.slice(0, nameEnd);
    if (!accept(name)) continue;
    const rest = line[nameEnd] === '{' ? skipLabels(line, nameEnd) : nameEnd;
    const priority = rest > nameEnd ? PRIORITY_LABEL.exec(line.slice(nameEnd, rest))?.[1] : undefined;
    // The value, then an optional timestamp.
    const text = line.slice(rest).trim().split(' ')[0] ?? '';
    // Number('') is 0: a sample without a value (a cut line) is dropped, not read as zero.
    const value = text === '' ? Number.NaN : Number(text);
    if (Number.isFinite(value))
      out.push({ name, value, byPriority: priority !== undefined && priority !== '' });
  }
  return out;
}
