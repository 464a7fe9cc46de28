// The gateway's Prometheus metrics, on a registry per app (tests build many).

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface GatewayMetrics {
  readonly registry: Registry;
  readonly requests: Counter<'model' | 'route' | 'code'>;
  readonly decisions: Counter<'model' | 'policy' | 'endpoint' | 'hit'>;
  readonly matchedTokens: Counter<'model'>;
  readonly promptTokens: Counter<'model'>;
  readonly admissionRejections: Counter<'deployment' | 'reason'>;
  readonly reuse: Counter<'model' | 'source'>;
  readonly retries: Counter<'model'>;
  readonly queueSeconds: Histogram<'deployment'>;
  readonly inFlight: Gauge<'endpoint'>;
}

export function buildMetrics(opts: { defaultMetrics?: boolean } = {}): GatewayMetrics {
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
  };
}
