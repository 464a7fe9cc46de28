// The spans the picker opens (picker/): interfaces with no imports, so the
// routing decision reaches no transport through them. The proxy's own spans
// (upstream attempts, the server span's end) extend this in types.ts.

export interface PickTrace {
  /** The request as routed: on the server span. */
  routed(model: string, deployment: string, promptTokens: number, exactTokens: boolean): void;
  startAdmission(deployment: string, priority: number): AdmissionSpan;
  decided(d: TracedDecision): void;
  startReuse(): ReuseSpan;
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
  /** The runtime priority stamped on the body this attempt sends (ADR 0057); undefined: none. */
  readonly stamp: { readonly priority: number; readonly bucket: string } | undefined;
}

export interface ReuseSpan {
  /** `fresh`: this request produced the answer (a miss); `store`/`inflight`: a hit. */
  end(source: 'store' | 'inflight' | 'fresh'): void;
}
