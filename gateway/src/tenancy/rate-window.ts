// A tenant's rate limits over a sliding minute, estimated from two fixed
// windows (the current minute and the one before), as Cloudflare and most
// gateways do: rate = previous × (share of the sliding minute still in the
// previous window) + current. Two counters per limit, no per-request log,
// and no burst of 2× the limit at a window boundary as fixed windows allow.
//
// A request counts what the runtime serves for it: each prompt of a batch
// times `n` is a request, and its prompt tokens are the batch's sum. It is let
// in when the request estimate + its requests stays within requestsPerMinute
// (one larger than this replica's share of the limit fits only a window with
// nothing in it: the gateway refuses one larger than the whole limit before
// this) and the token estimate is still below tokensPerMinute (its own tokens
// are not known in full before it runs: prompt tokens are charged at
// admission, completion tokens when the answer reports them; a request may
// overshoot the token limit by its own size, never more, and its size is
// bounded by its CachePolicy's spec.requests caps).
// Pure: the memory limiter runs it, the Redis script is the same rule in Lua
// (redis-limiter.ts; a test holds them to the same answers).

import type { TenantLimits } from '#api';

export const WINDOW_MS = 60_000;

/** Counts of one limit in the current window and the one before. */
export interface WindowCounts {
  readonly current: number;
  readonly previous: number;
}

export interface LimitCounts {
  readonly requests: WindowCounts;
  readonly tokens: WindowCounts;
}

export type LimitName = 'requests' | 'tokens';

/** What one request costs: the requests the runtime serves for it (prompts x n) and its prompt tokens. */
export interface RateCost {
  readonly requests: number;
  readonly tokens: number;
}

export interface LimitState {
  readonly limit: number;
  /** What the limit still allows now (after this request, when it was let in). */
  readonly remaining: number;
}

export type LimitDecision =
  | {
      readonly allowed: true;
      readonly requests?: LimitState;
      readonly tokens?: LimitState;
    }
  | {
      readonly allowed: false;
      /** The limit that refused (requests first when both do). */
      readonly limited: LimitName;
      readonly retryAfterSeconds: number;
      readonly requests?: LimitState;
      readonly tokens?: LimitState;
    };

export function windowIndexAt(now: number): number {
  return Math.floor(now / WINDOW_MS);
}

/** How far into its window `now` is (0 ≤ f < 1). */
export function windowFractionAt(now: number): number {
  return (now - windowIndexAt(now) * WINDOW_MS) / WINDOW_MS;
}

export function estimateRate(c: WindowCounts, fraction: number): number {
  return c.previous * (1 - fraction) + c.current;
}

/** The rule itself, shared with the Lua script: does a request fit (before it is counted)? */
export function fitsLimits(
  counts: LimitCounts,
  limits: TenantLimits,
  fraction: number,
  requests: number,
): LimitName | undefined {
  const rpm = limits.requestsPerMinute;
  if (rpm !== undefined) {
    const rate = estimateRate(counts.requests, fraction);
    if (rate > 0 && rate + requests > rpm) return 'requests';
  }
  const tpm = limits.tokensPerMinute;
  if (tpm !== undefined && estimateRate(counts.tokens, fraction) >= tpm) return 'tokens';
  return undefined;
}

/**
 * Milliseconds until the estimate falls to `target` or below with no new traffic: first
 * within this window as the previous one's weight fades, else into the next one, where
 * this window's count becomes the previous.
 */
export function computeWaitMs(c: WindowCounts, fraction: number, target: number): number {
  if (estimateRate(c, fraction) <= target) return 0;
  if (c.current <= target && c.previous > 0) {
    // previous × (1 − f′) + current = target
    const f = 1 - (target - c.current) / c.previous;
    return Math.max(0, (f - fraction) * WINDOW_MS);
  }
  const g = c.current > 0 ? Math.max(0, 1 - target / c.current) : 0;
  return (1 - fraction + g) * WINDOW_MS;
}

/**
 * The decision and the headers' figures from the counts before this request (`counts`)
 * and the limit that refused it, if one did (the store applied fitsLimits atomically).
 */
export function describeDecision(
  counts: LimitCounts,
  limits: TenantLimits,
  fraction: number,
  cost: RateCost,
  refused: LimitName | undefined,
): LimitDecision {
  const admitted = refused === undefined;
  const state = (name: LimitName, limit: number | undefined): LimitState | undefined => {
    if (limit === undefined) return undefined;
    const used = estimateRate(counts[name], fraction) + (admitted ? cost[name] : 0);
    return { limit, remaining: Math.max(0, Math.floor(limit - used)) };
  };
  const requests = state('requests', limits.requestsPerMinute);
  const tokens = state('tokens', limits.tokensPerMinute);
  const figures = { ...(requests ? { requests } : {}), ...(tokens ? { tokens } : {}) };
  if (admitted) return { allowed: true, ...figures };
  // Room for this request's requests (or an empty window), or one token under the limit.
  const target =
    refused === 'requests'
      ? Math.max(0, (limits.requestsPerMinute ?? 0) - cost.requests)
      : (limits.tokensPerMinute ?? 0) - 1;
  const waitMs = computeWaitMs(counts[refused], fraction, target);
  return {
    allowed: false,
    limited: refused,
    retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
    ...figures,
  };
}
