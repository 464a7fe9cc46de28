// What the request path sees of tracing: interfaces only, so that a gateway without an
// OTLP endpoint never loads an implementation. The path holds `ctx.trace` (undefined when
// off) and calls it with `?.`: off, a request pays one property read per step.

import type { SendOptions } from '../upstream/answer.ts';

export interface RequestTracer {
  /** The server span of one generation request, continuing the client's traceparent/tracestate. */
  start(route: string, headers: Readonly<Record<string, string | string[] | undefined>>): RequestTrace;
}

/** One request's spans: children of its server span, whichever step opens them. */
export interface RequestTrace {
  /** The request as routed: on the server span. */
  routed(model: string, deployment: string, promptTokens: number, exactTokens: boolean): void;
  startAdmission(deployment: string, priority: number): AdmissionSpan;
  decided(d: TracedDecision): void;
  startUpstream(u: TracedUpstream): UpstreamSpan;
  startReuse(): ReuseSpan;
  /**
   * The answer is over (or the client went away): ends the server span. `errorCode`: the
   * gateway's own code when it answered with an error (GW_OVERLOADED, ...), as `error.type`.
   */
  end(statusCode: number, errorCode?: string): void;
}

export interface AdmissionSpan {
  admitted(queuedMs: number): void;
  /** Refused (overloaded, queue-timeout, draining, aborted): the span's length is the wait. */
  rejected(reason: string): void;
}

export interface TracedDecision {
  readonly policy: string;
  readonly model: string;
  readonly deployment: string;
  readonly endpoint: string;
  readonly decode: string | undefined;
  readonly promptTokens: number;
  /** Prompt tokens the policy expected the endpoint to hold (cache-aware only). */
  readonly matchedTokens: number | undefined;
  /** Where the match came from: the runtime's KV index, or the gateway's own tree. */
  readonly matchSource: 'kv-index' | 'tree' | 'none';
  readonly attempt: number;
}

export interface TracedUpstream {
  readonly endpoint: string;
  readonly url: string;
  readonly path: string;
  /** 0 for the first try; a retry's number otherwise. */
  readonly attempt: number;
  readonly role: 'standalone' | 'prefill' | 'decode';
}

export interface UpstreamSpan {
  /** The send options with this span's traceparent (and the client's tracestate) added. */
  inject(send: SendOptions): SendOptions;
  /** What the attempt got: an answer's status (5xx marks the span failed), or the error. */
  settle(res: { readonly statusCode: number } | { readonly error: unknown }): void;
  /** The answer is over (delivered, or given up), with what broke it if it broke: ends the span once. */
  end(failure?: unknown): void;
}

export interface ReuseSpan {
  /** `fresh`: this request produced the answer (a miss); `store`/`inflight`: a hit. */
  end(source: 'store' | 'inflight' | 'fresh'): void;
}
