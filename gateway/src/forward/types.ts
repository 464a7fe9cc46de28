// The shapes one forwarded request travels in: what the route hands the
// gateway, the request as the picker routed it, how answers are fetched and delivered, and what a
// forward returns (its result, and what admission learns from it).

import type { FastifyBaseLogger } from 'fastify';
import type { ReleaseInfo } from '../admission/index.ts';
import type { GatewayError } from '../errors/index.ts';
import type { Decision, PickLease } from '../picker/types.ts';
import type { CacheReport } from '../policies/index.ts';
import type { RouteKind } from '../request/shape.ts';
import type { RouteEndpoint } from '../routing/table.ts';
import type { Exchange } from '../upstream/exchange.ts';
import type { Tenant } from '../tenancy/tenant.ts';
import type { RequestTrace } from '../tracing/types.ts';
import type { ResponseSink } from '../upstream/sink.ts';

export interface RequestContext {
  readonly kind: RouteKind;
  readonly path: string;
  readonly id: string;
  readonly body: unknown;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly signal: AbortSignal;
  /** Takes the client's response for a stream (called once, when the answer starts). */
  readonly openSink: () => ResponseSink;
  readonly log: FastifyBaseLogger;
  /** Who is calling (the API key's tenant); absent on an open gateway. */
  readonly tenant?: Tenant;
  /** Adds a header to the response, whichever way it is sent (the rate-limit figures). */
  readonly setHeader?: (name: string, value: string) => void;
  /** This request's spans; undefined when tracing is off (every step then skips it). */
  readonly trace?: RequestTrace | undefined;
}

/** A request the picker routed: its decision, and the lease the forward settles. */
export interface Forwarding {
  readonly ctx: RequestContext;
  readonly decision: Decision;
  readonly lease: PickLease;
}

/**
 * What a delivery reports: the first body byte (prefill is over), a stream's progress every few
 * events (at least `tokens` output tokens so far), then once the end.
 */
export type DeliveryOutcome =
  | { readonly kind: 'first-byte' }
  | { readonly kind: 'decoding'; readonly tokens: number }
  | { readonly kind: 'completed'; readonly report: CacheReport | undefined }
  | { readonly kind: 'failed' };

/** Hands a started response to the client; reports its progress, and `completed`/`failed` once the endpoint is finished with. */
export type Deliver<T, R> = (
  endpoint: RouteEndpoint,
  res: R,
  done: (outcome: DeliveryOutcome) => void,
) => Promise<T>;

export type Answer = { readonly statusCode: number };

/** How one request's answers travel: the exchange that fetches them, the delivery that passes them on. */
export interface Via<T, R extends Answer> {
  readonly exchange: Exchange<R>;
  readonly deliver: Deliver<T, R>;
}

/**
 * A forward's outcome as a value: the delivered result or the error the client gets, and
 * what admission learns (latency of a success, pressure of a failure; nothing when the
 * client went away).
 */
export type Forwarded<T> =
  | { readonly result: T; readonly release: ReleaseInfo }
  | { readonly error: GatewayError; readonly release: ReleaseInfo | undefined };

export function withReport(report: CacheReport | undefined): { report?: CacheReport } {
  return report ? { report } : {};
}
