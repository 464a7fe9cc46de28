// The external metrics cacheroute serves (external.metrics.k8s.io/v1beta1), for
// an HPA or KEDA to scale a Deployment's parts on. Every series is one
// Deployment's part, named by the labels below; an HPA sums the series its
// selector matches, so a selector names one Deployment and one part.
import type { EndpointRole } from '#api';

export const METRICS_API_GROUP = 'external.metrics.k8s.io';
export const METRICS_API_VERSION = 'v1beta1';

export const LABEL_DEPLOYMENT = 'cacheroute.dev/deployment';
export const LABEL_PART = 'cacheroute.dev/part';

export type Part = EndpointRole;
export const PARTS: readonly Part[] = ['standalone', 'prefill', 'decode'];

export const ExternalMetric = {
  /** Requests waiting in the gateway tier's admission queues (the whole Deployment's). */
  queuedRequests: 'cacheroute_queued_requests',
  /** Requests the gateway tier has in flight to the part's runtimes. */
  inFlightRequests: 'cacheroute_in_flight_requests',
  /** Seconds of prefill the gateway tier predicts queued at the part's runtimes, their mean. */
  prefillBacklogSeconds: 'cacheroute_prefill_backlog_seconds',
  /** Requests refused for load (overloaded, queue timeout) per second, the whole Deployment's. */
  rejectionsPerSecond: 'cacheroute_admission_rejections_per_second',
  /** The part's runtimes' own queues (sglang:num_queue_reqs), summed. */
  runtimeQueuedRequests: 'cacheroute_runtime_queued_requests',
  /** The part's runtimes' KV usage (sglang:token_usage, 0..1), their mean. */
  runtimeKvUsage: 'cacheroute_runtime_kv_usage',
} as const;
export type ExternalMetric = (typeof ExternalMetric)[keyof typeof ExternalMetric];
export const EXTERNAL_METRICS: readonly ExternalMetric[] = Object.values(ExternalMetric);

export const isExternalMetric = (name: string): name is ExternalMetric =>
  (EXTERNAL_METRICS as readonly string[]).includes(name);
