// What both ways of forwarding share: the endpoint views a policy chooses
// from (with the KV index's exact match where it can answer), and a failed
// attempt's bookkeeping (counted, a gone runtime taken out of picks, a 5xx
// answer drained, the client's error named).

import type { Clock } from '#kube/clock.ts';
import type { EndpointBook } from '../endpoints/book.ts';
import type { StandingEndpoints } from '../endpoints/standing.ts';
import { GatewayError } from '../errors.ts';
import type { KvIndexFleet, KvMatch } from '../kv-index/fleet.ts';
import type { GatewayMetrics } from '../metrics.ts';
import type { EndpointView } from '../policies/index.ts';
import type { RouteEndpoint } from '../routing/table.ts';
import { RequestEncodingError, type SendOptions } from '../upstream/answer.ts';
import type { Exchange } from '../upstream/exchange.ts';
import { classifyUpstreamFailure, mapUpstreamFailure } from '../upstream/relay.ts';
import type { Answer, Forwarding } from './types.ts';

export interface ForwardDeps {
  readonly book: EndpointBook;
  readonly standing: StandingEndpoints;
  readonly kvIndex: KvIndexFleet;
  readonly metrics: GatewayMetrics;
  readonly clock: Clock;
  readonly send: SendOptions;
  readonly headersTimeoutMs: number;
  /** Endpoints tried per standalone request (1 = no retry). */
  readonly maxAttempts: number;
}

const NO_MATCHES: ReadonlyMap<string, KvMatch> = new Map();

/** The request's prefix each endpoint's KV index holds, where the index can answer. */
export function matchIndexed(
  deps: ForwardDeps,
  fwd: Forwarding,
  endpoints: readonly RouteEndpoint[],
): ReadonlyMap<string, KvMatch> {
  if (!fwd.exact) return NO_MATCHES;
  return deps.kvIndex.match(endpoints, fwd.exact, fwd.input.salt);
}

export function viewOf(
  deps: ForwardDeps,
  e: RouteEndpoint,
  cached: ReadonlyMap<string, KvMatch>,
): EndpointView {
  return deps.book.view(e, cached.get(e.id));
}

/** No connection (refused, reset, unreachable) before any answer: the runtime is gone or going. */
export function markIfGone(deps: ForwardDeps, endpoint: RouteEndpoint, failure: unknown): void {
  if (failure instanceof RequestEncodingError || classifyUpstreamFailure(failure) !== 'connect') return;
  const code = (failure as { code?: unknown } | undefined)?.code;
  deps.standing.markDown(endpoint, typeof code === 'string' ? code : 'connection failed');
}

/**
 * A failed attempt (no answer, or a 5xx): the client's own abort wins (GW_CLIENT_CLOSED), a
 * request that could not be sent is the client's 4xx (no endpoint is blamed); otherwise it
 * is counted, a 5xx answer is drained, and the error the client would get is returned.
 */
export async function failAttempt<R extends Answer>(
  deps: ForwardDeps,
  fwd: Forwarding,
  endpoint: RouteEndpoint,
  exchange: Exchange<R>,
  res: R | { error: unknown },
): Promise<GatewayError> {
  if (fwd.ctx.signal.aborted) return new GatewayError('GW_CLIENT_CLOSED');
  const failure = 'error' in res ? res.error : res;
  if (failure instanceof RequestEncodingError) return failure.refusal;
  deps.book.countFailure(endpoint, failure);
  markIfGone(deps, endpoint, failure);
  if (!('error' in res)) await exchange.discard(res);
  return mapUpstreamFailure(failure, deps.headersTimeoutMs);
}
