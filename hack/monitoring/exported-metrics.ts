// Every metric name cacheroute's processes export, read from the exposition text
// their own code renders, not from a list kept by hand: the operator's runtime
// registry, the gateway's registry (its metrics, the KV index's, Node.js process
// metrics), and the SGLang simulator's sglang:* families, which the conformance
// suite holds to the real server's names. Rules and dashboards may read these,
// plus the series Prometheus makes itself for every target (up, scrape_*) and
// for alerts (ALERTS).
//
// A family rendered only once something happens (SGLang's request series appear
// with the first request) must be drawn out here: the simulator is fed a request
// of every kind, so a family it renders only in a state this misses would be
// reported unexported, never the other way round.

import { Registry } from 'prom-client';
import { KvIndexFleet } from '../../gateway/src/kv-index/fleet.ts';
import { registerKvIndexMetrics } from '../../gateway/src/kv-index/metrics.ts';
import { buildMetrics } from '../../gateway/src/metrics/index.ts';
import { registerDeploymentMetrics } from '../../operator/src/controllers/deployment/metrics.ts';
import { registerTaskMetrics } from '../../operator/src/controllers/task/metrics.ts';
import { createRuntimeMetrics } from '../../operator/src/manager/metrics.ts';
import { createEngineCounters, type EngineSnapshot, type RequestResult } from '../../test/sim/engine.ts';
import { renderMetrics, SimMetrics } from '../../test/sim/metrics.ts';

export type MetricSource = 'operator' | 'gateway' | 'sglang' | 'prometheus';

/** Series Prometheus itself records: per scrape target, and for alerting rules. */
export const PROMETHEUS_SERIES: readonly string[] = [
  'up',
  'scrape_duration_seconds',
  'scrape_samples_scraped',
  'scrape_samples_post_metric_relabeling',
  'scrape_series_added',
  'ALERTS',
  'ALERTS_FOR_STATE',
];

/**
 * The series names a Prometheus text exposition yields: every sample's name, and
 * for each `# TYPE` family the names its type implies, so a labelled family with
 * no sample yet (prom-client renders only its HELP and TYPE) still counts.
 */
export function parseExpositionNames(text: string): string[] {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type) {
      const [, family = '', kind] = type;
      for (const suffix of familySuffixes(kind)) names.add(family + suffix);
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const sample = /^[^\s{]+/.exec(line);
    if (sample) names.add(sample[0]);
  }
  return [...names].sort();
}

function familySuffixes(kind: string | undefined): readonly string[] {
  if (kind === 'histogram') return ['_bucket', '_sum', '_count'];
  if (kind === 'summary') return ['', '_sum', '_count'];
  return [''];
}

/** Name → the process exporting it. */
export async function collectExportedMetrics(): Promise<Map<string, MetricSource>> {
  const out = new Map<string, MetricSource>();
  const add = (source: MetricSource, names: Iterable<string>): void => {
    for (const n of names) if (!out.has(n)) out.set(n, source);
  };
  add('operator', parseExpositionNames(await renderOperatorMetrics()));
  add('gateway', parseExpositionNames(await renderGatewayMetrics()));
  add('sglang', parseExpositionNames(renderSglangMetrics()));
  add('prometheus', PROMETHEUS_SERIES);
  return out;
}

/** The runtime's metrics and the Task controller's, one Task in a namespace so every series renders. */
async function renderOperatorMetrics(): Promise<string> {
  const { registry } = createRuntimeMetrics(new Registry());
  registerTaskMetrics(registry, {
    list: () => [{ metadata: { namespace: 'ns' }, status: { phase: 'Succeeded', cost: '0.01' } }],
  });
  registerDeploymentMetrics(registry, {
    list: () => [
      { metadata: { namespace: 'ns', name: 'd' }, status: { endpoints: [{ role: 'standalone' }] } },
    ],
  });
  return registry.metrics();
}

/** As server.ts builds it: default (process) metrics on, the KV index's gauges added by app.ts. */
async function renderGatewayMetrics(): Promise<string> {
  const metrics = buildMetrics({ defaultMetrics: true });
  registerKvIndexMetrics(metrics.registry, new KvIndexFleet());
  try {
    return await metrics.registry.metrics();
  } finally {
    metrics.registry.clear();
  }
}

/** A prefill server with HiCache that has served, streamed, aborted, evicted and loaded back. */
function renderSglangMetrics(): string {
  const m = new SimMetrics();
  const served = (rid: string, finish: RequestResult['finish']): RequestResult => ({
    rid,
    finish,
    promptTokens: 64,
    completionTokens: 8,
    cachedTokens: 48,
    cachedDevice: 32,
    cachedHost: 16,
    arrivedAt: 0,
    queueMs: 5,
    ttftMs: 50,
    e2eMs: 200,
  });
  m.record(served('a', 'length'), false);
  m.record(served('b', 'length'), true);
  m.record(served('c', 'abort'));
  m.pd.bootstrapFailed = 1;
  const counters = { ...createEngineCounters(), evictedDeviceTokens: 16, loadedBackTokens: 16 };
  const snapshot: EngineSnapshot = {
    numRunningReqs: 1,
    numWaitingReqs: 1,
    numUsedTokens: 64,
    maxTotalNumTokens: 4096,
    tokenUsage: 64 / 4096,
    genThroughput: 10,
    cacheHitRate: 0.5,
    deviceCachedTokens: 32,
    hostCachedTokens: 16,
    byPriority: null,
    counters,
  };
  return renderMetrics({
    modelName: 'm',
    snapshot,
    metrics: m,
    pdMode: 'prefill',
    pageSize: 16,
    contextLength: 4096,
    dpSize: 2,
    evictableTokens: 16,
    hicache: { totalTokens: 8192, backedUpTokens: 16, droppedTokens: 16 },
    pid: 1,
  });
}
