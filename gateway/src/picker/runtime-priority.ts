// The priority the gateway stamps on a request for runtimes that order their own
// queue by it (a Deployment's spec.serving.priorityScheduling: SGLang 0.5.23 with
// --enable-priority-scheduling --disable-priority-preemption; ADR 0057).
//
// SGLang's sign, its default (no --schedule-low-priority-values-first): the larger
// value runs first. schedule_policy.SchedulePolicy._sort_by_priority_and_fcfs sorts
// the waiting queue by (priority x -1, entry time) before each prefill batch; a
// request without one (a probe's, a warm-up's, a Task's) takes the operator's
// --default-priority-value, UNSTAMPED_RUNTIME_PRIORITY (#api): this function's value
// for a default tenant's long prompt, not SGLang's last of all (ADR 0057). The
// field is top-level `priority` in /generate (io_struct.GenerateReqInput), in
// /v1/completions and in /v1/chat/completions (entrypoints/openai/protocol.py,
// CompletionRequest and ChatCompletionRequest; serving_chat / serving_completions
// hand it to the scheduler as is).
//
// The value: the tenant's priority (-100..100, higher first, as in the gateway's own
// admission queue) is the major key, the uncached part of the prompt on the chosen
// endpoint the minor: a turn of a conversation (under SHORT_UNCACHED_TOKENS to
// prefill) before a new document, each in arrival order within its bucket.
//   priority = 2 x tenantPriority + (uncached < SHORT_UNCACHED_TOKENS ? 1 : 0)
// Two buckets, not the count itself: the exact count lets a long prompt wait behind
// every shorter one (the held-out trace's e2e p99 went to 1.050x; docs/benchmarks.md,
// "Tried, not merged: the runtime orders its own queue by a stamped priority").
// Pure.

import type { CachedPrefix } from '../policies/index.ts';
import type { RouteEndpoint } from '../routing/table.ts';

/** What is served first: a prompt whose uncached part is a conversation's turn, not a document. */
export const SHORT_UNCACHED_TOKENS = 2048;

/** The request body's field SGLang reads (top level in every route the gateway serves). */
export const PRIORITY_FIELD = 'priority';

/** Higher runs first: the tenant's priority, then the short uncached bucket before the long. */
export function computeRuntimePriority(tenantPriority: number, uncachedTokens: number): number {
  return 2 * tenantPriority + (uncachedTokens < SHORT_UNCACHED_TOKENS ? 1 : 0);
}

/** The prompt's tokens the endpoint must prefill: those past what its KV index says it holds on device or host. */
export function computeUncachedTokens(promptTokens: number, cached: CachedPrefix | undefined): number {
  return Math.max(0, promptTokens - (cached ? cached.deviceTokens + cached.hostTokens : 0));
}

export interface StampInput {
  /** Every endpoint the body may be sent to as it is (the choice, Envoy's fallbacks, a pair's two). */
  readonly endpoints: readonly RouteEndpoint[];
  readonly tenantPriority: number;
  readonly uncachedTokens: number;
}

/** The minor key's bucket: `short` (under SHORT_UNCACHED_TOKENS to prefill) runs first. */
export type UncachedBucket = 'short' | 'long';

/** The priority stamped and its bucket, for the request's trace and the gateway's metrics. */
export interface RuntimeStamp {
  readonly priority: number;
  readonly bucket: UncachedBucket;
}

/**
 * The stamp the body is to carry, or undefined when it is not to be stamped: an endpoint whose
 * verified status does not say it orders by priority would serve a stamp as FCFS at best (and
 * abort it, with --abort-on-priority-when-disabled, which the API refuses in extraArgs); a
 * client's own `priority` (allowed by the policy's allowPrivilegedFields, else refused before
 * this) is kept as today.
 */
export function computeRuntimeStamp(body: Record<string, unknown>, s: StampInput): RuntimeStamp | undefined {
  const own = body[PRIORITY_FIELD];
  if (own !== undefined && own !== null) return undefined;
  if (s.endpoints.length === 0 || !s.endpoints.every((e) => e.priorityScheduling === true)) return undefined;
  return {
    priority: computeRuntimePriority(s.tenantPriority, s.uncachedTokens),
    bucket: s.uncachedTokens < SHORT_UNCACHED_TOKENS ? 'short' : 'long',
  };
}

export interface Stamped {
  readonly body: Record<string, unknown>;
  /** What was stamped; undefined when the body is the same as given. */
  readonly stamp: RuntimeStamp | undefined;
}

/** The body with `priority` stamped (computeRuntimeStamp) and the stamp, or the same body. */
export function stampRuntimePriorityWithStamp(body: Record<string, unknown>, s: StampInput): Stamped {
  const stamp = computeRuntimeStamp(body, s);
  return { body: stamp ? { ...body, [PRIORITY_FIELD]: stamp.priority } : body, stamp };
}

/** The body with `priority` stamped, or the same body when it is not to be. */
export function stampRuntimePriority(body: Record<string, unknown>, s: StampInput): Record<string, unknown> {
  return stampRuntimePriorityWithStamp(body, s).body;
}
