// What a front end hands the picker and what it gets back. Plain data both
// ways (strings, numbers, arrays, records, the routing table's own entries),
// so the fastify proxy and an Envoy ext_proc server build and read them
// alike; the one exception is a routed result's `lease`, the request's hold
// on shared state (admission slot, reuse claim, the policy's outcomes), which
// every front end settles once the answer is over.

import type { BootstrapFields } from '#sglang/bootstrap.ts';
import type { ReleaseInfo } from '../admission/index.ts';
import type { ErrorBody, ErrorParams, GatewayErrorCode } from '../errors/index.ts';
import type { Policy, RouteInput } from '../policies/index.ts';
import type { RouteKind } from '../request/shape.ts';
import type { ModelRoute, RouteEndpoint } from '../routing/table.ts';
import type { ReuseSource, StoredResult } from '../reuse/index.ts';
import type { Tenant } from '../tenancy/tenant.ts';
import type { PickTrace } from '../tracing/pick-trace.ts';

export type PickHeaders = Readonly<Record<string, string | string[] | undefined>>;

export interface PickRequest {
  /** Links the policy's select and the outcomes the front end reports. */
  readonly id: string;
  readonly kind: RouteKind;
  /** The API path, e.g. /v1/chat/completions (part of the reuse key). */
  readonly path: string;
  /** The body as JSON.parse gave it; the picker validates it. */
  readonly body: unknown;
  /** Read: x-cacheroute-model, x-cacheroute-session. */
  readonly headers: PickHeaders;
  /** The API key's tenant, already authenticated; absent on an open gateway. */
  readonly tenant?: Tenant | undefined;
  /**
   * Fallback endpoints wanted after the first, best first (an ext_proc picker hands them to
   * Envoy). The proxy asks for none: it picks again at retry time, with the load then.
   */
  readonly fallbacks?: number;
  /**
   * Only endpoints this admits may be picked (an ext_proc data plane's subset hint); none
   * admitted: refused GW_NO_ENDPOINT, as when none stands.
   */
  readonly within?: (endpoint: RouteEndpoint) => boolean;
}

/** Where the picker logs a decision; a pino (fastify) logger is one. */
export interface DecisionLog {
  readonly level: string;
  info(obj: object, msg: string): void;
}

/** What a pick may wait on and report to: not data, the caller's request scope. */
export interface PickScope {
  /** The client went away: waits (wake, admission queue, an identical request) end. */
  readonly signal: AbortSignal;
  readonly log: DecisionLog;
  readonly trace?: PickTrace | undefined;
}

export type Target =
  | {
      readonly kind: 'standalone';
      readonly endpoint: RouteEndpoint;
      /** Next best endpoints, in order, as many as asked for (PickRequest.fallbacks). */
      readonly fallbacks: readonly RouteEndpoint[];
    }
  | {
      /** Prefill/decode: both get `Decision.body` (bootstrap fields in it); the client gets the decode's answer. */
      readonly kind: 'pair';
      readonly prefill: RouteEndpoint;
      readonly decode: RouteEndpoint;
      readonly bootstrap: BootstrapFields;
    };

export interface Decision {
  readonly route: ModelRoute;
  /** The cache salt stamped in `body.cache_salt`. */
  readonly salt: string;
  /** The body to send upstream: salt stamped (and a pair's bootstrap fields). */
  readonly body: Record<string, unknown>;
  /** What the policy chose on: id, salt, tokens, time. */
  readonly input: RouteInput;
  /** The prompt's token ids as the runtime sees them, when known (the KV index matched on them). */
  readonly exact?: readonly number[];
  readonly stream: boolean;
  /** Sequences the runtime serves for the request: prompts x n (admission's weight, the usage to count). */
  readonly sequences: number;
  readonly target: Target;
}

/** An admission verdict that is not `admit`: the client's answer, status, Retry-After and JSON error. */
export interface Refusal {
  /** `shed`: the load or a limit said no for now (Retry-After); `refuse`: this request will not be served as is. */
  readonly kind: 'shed' | 'refuse';
  readonly status: number;
  readonly retryAfterSeconds?: number;
  readonly code: GatewayErrorCode;
  readonly params: ErrorParams;
  readonly body: ErrorBody;
}

export type Verdict = { readonly kind: 'admit'; readonly queuedMs: number } | Refusal;

/** A stored answer to return as is (marked reused). */
export interface ReusedAnswer {
  readonly source: Exclude<ReuseSource, 'fresh'>;
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
}

/** The request's hold on what the picker shares with other requests. */
export interface PickLease {
  /** The deployment's policy, told each outcome (routed, first-token, completed, failed). */
  readonly policy: Policy;
  /** The admission slot; only the first call counts. `undefined`: nothing learned (client gone, request at fault). */
  release(info: ReleaseInfo | undefined): void;
  /** A standalone retry: the best endpoint not yet tried, by the load now; recorded as attempt `attempt`. */
  repick(tried: readonly string[], attempt: number): Retry | undefined;
  /** Present when the answer may be stored for identical requests: settled once. */
  readonly reuse?: ReuseTicket;
}

/** Where a retry goes and what it sends: `Decision.body` with the runtime priority stamped for that endpoint. */
export interface Retry {
  readonly endpoint: RouteEndpoint;
  readonly body: Record<string, unknown>;
}

export interface ReuseTicket {
  /** The answer was produced: stored when `stored` is given; waiting identical requests get it. */
  settle(stored: StoredResult | undefined): Promise<void>;
  /** No answer: waiting identical requests produce their own. */
  fail(): Promise<void>;
}

export type PickResult = {
  /** To put on the client's answer whatever it is (a tenant's x-ratelimit-* figures). */
  readonly headers: Readonly<Record<string, string>>;
} & (
  | {
      readonly kind: 'routed';
      readonly verdict: { readonly kind: 'admit'; readonly queuedMs: number };
      readonly decision: Decision;
      readonly lease: PickLease;
    }
  | { readonly kind: 'reused'; readonly answer: ReusedAnswer }
  | { readonly kind: 'refused'; readonly verdict: Refusal }
);
