// The per-request routing decision record: a log line and metrics.

import type { FastifyBaseLogger } from 'fastify';
import type { GatewayMetrics } from '../metrics.ts';
import { CacheAwarePolicy, type Policy, type RouteInput } from '../policies/index.ts';
import type { ModelRoute, RouteEndpoint } from '../routing/table.ts';

export interface Decision {
  readonly route: ModelRoute;
  readonly policy: Policy;
  readonly endpoint: RouteEndpoint;
  readonly decode?: RouteEndpoint;
  readonly input: RouteInput;
  readonly queueMs: number;
  readonly attempt: number;
}

export function recordDecision(metrics: GatewayMetrics, log: FastifyBaseLogger, d: Decision): void {
  const { route, policy, endpoint, input } = d;
  // Computed before the policy's `routed` insert, so it is the prediction.
  const matchedTokens =
    policy instanceof CacheAwarePolicy ? policy.matchedTokens(endpoint.id, input) : undefined;
  const hit = matchedTokens !== undefined && matchedTokens > 0;
  metrics.decisions.inc({ model: route.model, policy: policy.name, endpoint: endpoint.id, hit: String(hit) });
  metrics.promptTokens.inc({ model: route.model }, input.tokens.length);
  if (matchedTokens) metrics.matchedTokens.inc({ model: route.model }, matchedTokens);
  log.info(
    {
      decision: {
        model: route.model,
        deployment: route.deployment,
        policy: policy.name,
        endpoint: endpoint.id,
        ...(d.decode ? { decode: d.decode.id } : {}),
        matchedTokens,
        promptTokens: input.tokens.length,
        queueMs: d.queueMs,
        attempt: d.attempt,
      },
    },
    'routed',
  );
}
