// The gateway's Prometheus metrics, on a registry per app (tests build many). Imports nothing
// of the gateway: every folder records here, so what a metric reads is passed in.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { PredictionCounters } from './prediction-counters.ts';

/** Why an upstream attempt failed (a label value). */
export type UpstreamFailureReason = 'connect' | 'timeout' | 'status' | 'interrupted';

export interface GatewayMetrics {
  readonly registry: Registry;
  readonly requests: Counter<'model' | 'route' | 'code'>;
  readonly decisions: Counter<'model' | 'policy' | 'endpoint' | 'hit'>;
  readonly runtimePriorityStamps: Counter<'model' | 'bucket'>;
  readonly matchedTokens: Counter<'model'>;
  readonly promptTokens: Counter<'model'>;
  readonly admissionRejections: Counter<'deployment' | 'reason'>;
  readonly reuse: Counter<'model' | 'source'>;
  readonly retries: Counter<'model'>;
  readonly queueSeconds: Histogram<'deployment'>;
  readonly inFlight: Gauge<'endpoint'>;
  readonly peerLoadLagSeconds: Histogram;
  readonly upstreamFailures: Counter<'endpoint' | 'reason'>;
  readonly endpoints: Gauge<'model' | 'role' | 'state'>;
  readonly tenantRequests: Counter<'tenant' | 'code'>;
  readonly tenantRejections: Counter<'tenant' | 'limit'>;
  readonly authOpen: Gauge;
  /** Per Deployment, what routing expected cached since the start (the cache report). */
  readonly predictions: PredictionCounters;
}

/** One endpoint as cacheroute_gateway_endpoints labels it (routing/endpoint-state.ts lists them). */
export interface EndpointStateLabels {
  readonly model: string;
  readonly role: string;
  readonly state: string;
}

export interface MetricsOptions {
  /** Node.js process metrics too (the server; tests leave them out). */
  readonly defaultMetrics?: boolean;
  /** The endpoints cacheroute_gateway_endpoints counts, read at each scrape; none without it. */
  readonly endpointStates?: () => Iterable<EndpointStateLabels>;
}

export function buildMetrics(opts: MetricsOptions = {}): GatewayMetrics {
  const endpointStates = opts.endpointStates;
  const registry = new Registry();
  if (opts.defaultMetrics) collectDefaultMetrics({ register: registry, prefix: 'cacheroute_gateway_' });
  const registers = [registry];
  return {
    registry,
    requests: new Counter({
      name: 'cacheroute_gateway_requests_total',
      help: 'Requests by model, route and result code (an HTTP status or a GW_ code).',
      labelNames: ['model', 'route', 'code'],
      registers,
    }),
    decisions: new Counter({
      name: 'cacheroute_gateway_routing_decisions_total',
      help: 'Routing decisions by policy and endpoint; hit = a predicted prefix match was used.',
      labelNames: ['model', 'policy', 'endpoint', 'hit'],
      registers,
    }),
    runtimePriorityStamps: new Counter({
      name: 'cacheroute_gateway_runtime_priority_stamps_total',
      help: 'Decisions whose body carries a runtime priority stamp (ADR 0057), by uncached bucket: short runs first.',
      labelNames: ['model', 'bucket'],
      registers,
    }),
    matchedTokens: new Counter({
      name: 'cacheroute_gateway_predicted_matched_tokens_total',
      help: 'Prompt tokens the policy predicted cached on the chosen endpoint (routing units).',
      labelNames: ['model'],
      registers,
    }),
    promptTokens: new Counter({
      name: 'cacheroute_gateway_routed_prompt_tokens_total',
      help: 'Prompt tokens routed (routing units).',
      labelNames: ['model'],
      registers,
    }),
    admissionRejections: new Counter({
      name: 'cacheroute_gateway_admission_rejections_total',
      help: 'Requests refused by admission control, by reason.',
      labelNames: ['deployment', 'reason'],
      registers,
    }),
    reuse: new Counter({
      name: 'cacheroute_gateway_reuse_total',
      help: 'Reusable requests by source: store (hit), inflight (de-duplicated), fresh (generated).',
      labelNames: ['model', 'source'],
      registers,
    }),
    retries: new Counter({
      name: 'cacheroute_gateway_upstream_retries_total',
      help: 'Requests retried on another endpoint before the first byte.',
      labelNames: ['model'],
      registers,
    }),
    queueSeconds: new Histogram({
      name: 'cacheroute_gateway_queue_seconds',
      help: 'Time spent waiting for admission.',
      labelNames: ['deployment'],
      buckets: [0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30],
      registers,
    }),
    inFlight: new Gauge({
      name: 'cacheroute_gateway_endpoint_in_flight',
      help: 'Requests this gateway has in flight per endpoint.',
      labelNames: ['endpoint'],
      registers,
    }),
    peerLoadLagSeconds: new Histogram({
      name: 'cacheroute_gateway_peer_load_lag_seconds',
      help:
        "How old this replica's view of another replica's load was when a change caught up " +
        '(sender wall clock to receipt; fleet/load-exchange.ts).',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    }),
    upstreamFailures: new Counter({
      name: 'cacheroute_gateway_upstream_failures_total',
      help:
        'Upstream attempts that failed, by endpoint and reason: connect (refused or reset before an ' +
        'answer), timeout, status (a 5xx answer), interrupted (the answer broke after its first byte).',
      labelNames: ['endpoint', 'reason'],
      registers,
    }),
    endpoints: new Gauge({
      name: 'cacheroute_gateway_endpoints',
      help:
        'Endpoints discovered from Deployment status, by model, role and state: routable (ready and ' +
        'verified), warming (held from user traffic until warmed), not_ready, unverified (identity not ' +
        'confirmed: never routed to).',
      labelNames: ['model', 'role', 'state'],
      registers,
      // Read from the routing table at scrape time: nothing to keep in step on the request path.
      collect() {
        if (!endpointStates) return;
        this.reset();
        for (const labels of endpointStates()) this.inc(labels);
      },
    }),
    tenantRequests: new Counter({
      name: 'cacheroute_gateway_tenant_requests_total',
      help:
        'API requests by tenant (namespace/name; "" when no valid key was presented) and HTTP status, ' +
        'when the gateway checks keys.',
      labelNames: ['tenant', 'code'],
      registers,
    }),
    tenantRejections: new Counter({
      name: 'cacheroute_gateway_rate_limited_total',
      help: 'Requests refused by a tenant rate limit, by tenant and limit (requests, tokens).',
      labelNames: ['tenant', 'limit'],
      registers,
    }),
    authOpen: new Gauge({
      name: 'cacheroute_gateway_auth_open',
      help: '1 when this gateway checks no API keys (--auth open): anyone who reaches it may call every model.',
      registers,
    }),
    predictions: new PredictionCounters(),
  };
}
