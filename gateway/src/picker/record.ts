// The per-request routing decision record: a log line, metrics and a span.

import type { GatewayMetrics } from '../metrics/index.ts';
import { CacheAwarePolicy, type CachedPrefix, type Policy, type RouteInput } from '../policies/index.ts';
import type { ModelRoute, RouteEndpoint } from '../routing/table.ts';
import type { PickTrace } from '../tracing/pick-trace.ts';
import type { RuntimeStamp } from './runtime-priority.ts';
import type { DecisionLog } from './types.ts';

export interface RoutingRecord {
  readonly route: ModelRoute;
  readonly policy: Policy;
  readonly endpoint: RouteEndpoint;
  readonly decode?: RouteEndpoint;
  readonly input: RouteInput;
  /** The endpoint's match in its KV index, where routing read it from there. */
  readonly indexed: CachedPrefix | undefined;
  readonly queueMs: number;
  readonly attempt: number;
  /** The request's spans, when traced: the decision becomes a `route` span. */
  readonly trace: PickTrace | undefined;
  /** The runtime priority stamped on the body sent to `endpoint` (ADR 0057); undefined: none. */
  readonly stamp: RuntimeStamp | undefined;
}

/** Levels at which a decision is logged: below them the record is not even built (it is per request). */
const INFO_LEVELS: ReadonlySet<string> = new Set(['info', 'debug', 'trace']);

export function recordDecision(metrics: GatewayMetrics, log: DecisionLog, d: RoutingRecord): void {
  const { route, policy, endpoint, input } = d;
  const matchedTokens = predictMatchedTokens(d);
  const hit = matchedTokens !== undefined && matchedTokens > 0;
  metrics.decisions.inc({ model: route.model, policy: policy.name, endpoint: endpoint.id, hit: String(hit) });
  metrics.promptTokens.inc({ model: route.model }, input.tokens.length);
  if (matchedTokens) metrics.matchedTokens.inc({ model: route.model }, matchedTokens);
  if (matchedTokens !== undefined)
    metrics.predictions.record(route.deployment, input.tokens.length, matchedTokens);
  if (d.stamp) metrics.runtimePriorityStamps.inc({ model: route.model, bucket: d.stamp.bucket });
  if (INFO_LEVELS.has(log.level))
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
          ...(d.stamp ? { runtimePriority: d.stamp.priority } : {}),
        },
      },
      'routed',
    );
  d.trace?.decided({
    policy: policy.name,
    model: route.model,
    deployment: route.deployment,
    endpoint: endpoint.id,
    decode: d.decode?.id,
    promptTokens: input.tokens.length,
    matchedTokens,
    matchSource: d.indexed ? 'kv-index' : matchedTokens === undefined ? 'none' : 'tree',
    attempt: d.attempt,
    stamp: d.stamp,
  });
}

/**
 * Prompt tokens the policy expected the endpoint to hold: the KV index's match where it routed by
 * the index (the larger of it and the tree's when the index is partial, as the policy takes it),
 * else the tree's. Computed before the policy's `routed` insert, so it is the prediction.
 */
function predictMatchedTokens({ policy, endpoint, input, indexed }: RoutingRecord): number | undefined {
  if (!(policy instanceof CacheAwarePolicy)) return undefined;
  const fromIndex = indexed ? indexed.deviceTokens + indexed.hostTokens + indexed.storageTokens : undefined;
  if (fromIndex !== undefined && !indexed?.partial) return fromIndex;
  return Math.max(fromIndex ?? 0, policy.matchedTokens(endpoint.id, input));
}
