// Prometheus metrics of the runtime, named as controller-runtime and client-go name
// theirs so existing dashboards apply: reconcile totals/errors/durations per controller,
// work-queue depth/adds/latency/duration/retries, API requests and writes, leadership.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { isWrite } from '#kube/client.ts';
import type { RequestObserver } from '#kube/client.ts';
import type { QueueMetrics } from './workqueue.ts';

const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export interface RuntimeMetrics {
  registry: Registry;
  reconcileTotal: Counter<'controller' | 'result'>;
  reconcileErrors: Counter<'controller'>;
  terminalReconcileErrors: Counter<'controller'>;
  reconcileTime: Histogram<'controller'>;
  activeWorkers: Gauge<'controller'>;
  maxConcurrentReconciles: Gauge<'controller'>;
  queueDepth: Gauge<'name'>;
  queueAdds: Counter<'name'>;
  queueLatency: Histogram<'name'>;
  queueWorkDuration: Histogram<'name'>;
  queueRetries: Counter<'name'>;
  // Queues report their in-flight keys (key → start ms) for the unfinished-work gauges.
  inFlightSources: Map<string, () => Iterable<number>>;
  apiRequests: Counter<'verb' | 'resource' | 'code'>;
  apiRequestDuration: Histogram<'verb' | 'resource'>;
  apiWrites: Counter<'verb' | 'resource'>;
  leaderStatus: Gauge<'name'>;
}

export function createRuntimeMetrics(
  registry: Registry = new Registry(),
  now: () => number = Date.now,
): RuntimeMetrics {
  const registers = [registry];
  const inFlightSources = new Map<string, () => Iterable<number>>();
  const ages = (name: string): number[] =>
    [...(inFlightSources.get(name)?.() ?? [])].map((t) => (now() - t) / 1000);
  new Gauge({
    name: 'workqueue_unfinished_work_seconds',
    help: 'Seconds of work in progress not yet observed by work_duration; large values indicate stuck workers.',
    labelNames: ['name'],
    registers,
    collect() {
      for (const name of inFlightSources.keys())
        this.set(
          { name },
          ages(name).reduce((a, b) => a + b, 0),
        );
    },
  });
  new Gauge({
    name: 'workqueue_longest_running_processor_seconds',
    help: 'Seconds the longest-running worker of the queue has been processing its key.',
    labelNames: ['name'],
    registers,
    collect() {
      for (const name of inFlightSources.keys()) this.set({ name }, Math.max(0, ...ages(name)));
    },
  });
  return {
    registry,
    inFlightSources,
    reconcileTotal: new Counter({
      name: 'controller_runtime_reconcile_total',
      help: 'Total number of reconciliations per controller and result (success, error, requeue_after).',
      labelNames: ['controller', 'result'],
      registers,
    }),
    reconcileErrors: new Counter({
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Total number of reconciliation errors per controller.',
      labelNames: ['controller'],
      registers,
    }),
    terminalReconcileErrors: new Counter({
      name: 'controller_runtime_terminal_reconcile_errors_total',
      help: 'Total number of terminal (not retried) reconciliation errors per controller.',
      labelNames: ['controller'],
      registers,
    }),
    reconcileTime: new Histogram({
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Length of time per reconciliation per controller.',
      labelNames: ['controller'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    activeWorkers: new Gauge({
      name: 'controller_runtime_active_workers',
      help: 'Number of workers currently reconciling, per controller.',
      labelNames: ['controller'],
      registers,
    }),
    maxConcurrentReconciles: new Gauge({
      name: 'controller_runtime_max_concurrent_reconciles',
      help: 'Maximum number of concurrent reconciles per controller.',
      labelNames: ['controller'],
      registers,
    }),
    queueDepth: new Gauge({
      name: 'workqueue_depth',
      help: 'Current depth of the work queue.',
      labelNames: ['name'],
      registers,
    }),
    queueAdds: new Counter({
      name: 'workqueue_adds_total',
      help: 'Total adds handled by the work queue.',
      labelNames: ['name'],
      registers,
    }),
    queueLatency: new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'How long a key stays in the work queue before being processed.',
      labelNames: ['name'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    queueWorkDuration: new Histogram({
      name: 'workqueue_work_duration_seconds',
      help: 'How long processing a key from the work queue takes.',
      labelNames: ['name'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    queueRetries: new Counter({
      name: 'workqueue_retries_total',
      help: 'Total rate-limited retries handled by the work queue.',
      labelNames: ['name'],
      registers,
    }),
    apiRequests: new Counter({
      name: 'cacheroute_api_requests_total',
      help: 'Kubernetes API requests by verb, resource and HTTP status code.',
      labelNames: ['verb', 'resource', 'code'],
      registers,
    }),
    apiRequestDuration: new Histogram({
      name: 'cacheroute_api_request_duration_seconds',
      help: 'Kubernetes API request latency by verb and resource (watches: stream lifetime).',
      labelNames: ['verb', 'resource'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    apiWrites: new Counter({
      name: 'cacheroute_api_writes_total',
      help: 'Kubernetes API writes (create, update, patch, apply, delete; not dry runs) by verb and resource.',
      labelNames: ['verb', 'resource'],
      registers,
    }),
    leaderStatus: new Gauge({
      name: 'leader_election_master_status',
      help: '1 while this instance holds the lease, else 0.',
      labelNames: ['name'],
      registers,
    }),
  };
}

export function buildQueueMetrics(m: RuntimeMetrics, name: string): QueueMetrics {
  const labels = { name };
  return {
    add: () => m.queueAdds.inc(labels),
    depth: (n) => m.queueDepth.set(labels, n),
    latency: (s) => m.queueLatency.observe(labels, s),
    workDuration: (s) => m.queueWorkDuration.observe(labels, s),
    retry: () => m.queueRetries.inc(labels),
  };
}

export function buildRequestMetricsObserver(m: RuntimeMetrics): RequestObserver {
  return (info) => {
    const resource = info.subresource ? `${info.resource}/${info.subresource}` : info.resource;
    const verb = info.dryRun ? `${info.verb}-dry-run` : info.verb;
    m.apiRequests.inc({ verb, resource, code: String(info.code) });
    if (info.verb !== 'watch') m.apiRequestDuration.observe({ verb, resource }, info.durationMs / 1000);
    if (isWrite(info)) m.apiWrites.inc({ verb: info.verb, resource });
  };
}
