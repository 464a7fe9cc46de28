// What the request path sees of tracing: interfaces only, so that a gateway without an
// OTLP endpoint never loads an implementation. The path holds `ctx.trace` (undefined when
// off) and calls it with `?.`: off, a request pays one property read per step.

import type { SendOptions } from '../upstream/answer.ts';
import type { PickTrace } from './pick-trace.ts';

export type { AdmissionSpan, PickTrace, ReuseSpan, TracedDecision } from './pick-trace.ts';

export interface RequestTracer {
  /** The server span of one generation request, continuing the client's traceparent/tracestate. */
  start(route: string, headers: Readonly<Record<string, string | string[] | undefined>>): RequestTrace;
}

/** One request's spans: children of its server span, whichever step opens them. */
export interface RequestTrace extends PickTrace {
  startUpstream(u: TracedUpstream): UpstreamSpan;
  /**
   * The answer is over (or the client went away): ends the server span. `errorCode`: the
   * gateway's own code when it answered with an error (GW_OVERLOADED, ...), as `error.type`.
   */
  end(statusCode: number, errorCode?: string): void;
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
