// What both ways of forwarding share: a failed attempt's bookkeeping (counted,
// a gone runtime taken out of picks, a 5xx answer drained, the client's error
// named).

import type { Clock } from '#kube/clock.ts';
import type { EndpointBook } from '../endpoints/book.ts';
import type { StandingEndpoints } from '../endpoints/standing.ts';
import { GatewayError } from '../errors/index.ts';
import type { KvIndexFleet } from '../kv-index/fleet.ts';
import type { GatewayMetrics } from '../metrics/index.ts';
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
