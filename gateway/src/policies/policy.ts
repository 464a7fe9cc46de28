// The routing policy interface. `select` is a pure decision over a snapshot;
// everything stateful (the prefix tree, cursors, learned rates) changes only
// in `observe`, which the shell calls after it acted on the decision.

export interface EndpointView {
  /** Stable id of the endpoint (e.g. pod name or URL). */
  readonly id: string;
  /** Requests this gateway has in flight to the endpoint. */
  readonly inFlight: number;
  /** The runtime's own queue (`sglang:num_queue_reqs`), 0 when unknown. */
  readonly queued: number;
  /**
   * Identity of what the endpoint's cache can hold: pod uid, restart count,
   * identity fingerprint. When it changes the runtime's cache is gone.
   */
  readonly generation: string;
  /** KV usage 0..1 (`sglang:token_usage`), when known. */
  readonly tokenUsage?: number;
  /** Prompt tokens this gateway sent that have not yet produced a first byte. */
  readonly pendingPrefillTokens?: number;
  /** Learned prefill rate of the endpoint, tokens per second. */
  readonly prefillTokensPerSecond?: number;
  /**
   * The request's prefix the runtime holds, in tokens by tier, read from its own KV events
   * (kv-index/): exact where the tree is a guess. Absent when the index cannot answer.
   */
  readonly cached?: CachedPrefix;
  /**
   * What the other gateway replicas have on this endpoint (fleet/load-exchange.ts), as last heard:
   * their requests in flight, their predicted prefill backlog and their predicted decode tokens.
   * Absent with one replica or no exchange.
   */
  readonly peers?: PeerShare;
  /**
   * The runtime's own counts from its load publisher (SGLang's LoadStat), when fresh: requests
   * decoding now and uncached prompt tokens waiting for prefill, every replica's traffic included.
   */
  readonly running?: number;
  readonly waitingUncachedTokens?: number;
}

/** One replica's part of an endpoint's load; the peers' parts summed in EndpointView.peers. */
export interface PeerShare {
  readonly inFlight: number;
  /** Predicted uncached prompt tokens sent and not yet past prefill. */
  readonly prefillTokens: number;
  /** Predicted output tokens still to generate by the requests in flight. */
  readonly decodeTokens: number;
}

export interface CachedPrefix {
  readonly deviceTokens: number;
  readonly hostTokens: number;
  readonly storageTokens: number;
  /**
   * The index started after the runtime did (its replay had rolled over): it may lack prefixes
   * nothing has been stored under since, so it is a floor, not the whole answer.
   */
  readonly partial?: boolean;
}

export interface RouteInput {
  /** Request id: links `select`, `routed` and `completed` of one request. */
  readonly id: string;
  /** Cache salt the gateway stamps; prefixes never match across salts. */
  readonly salt: string;
  /** Token ids, or pseudo-tokens from text (radix/blocks.ts). */
  readonly tokens: ArrayLike<number>;
  readonly now: number;
  /** The request's output bound (max_tokens / max_completion_tokens / max_new_tokens), when it set one. */
  readonly maxTokens?: number;
  /**
   * Where this replica stands in the gateway tier when it shares load with its peers
   * (fleet/tier-position.ts, fleet/load-exchange.ts): its rank among `size` replicas, and how
   * long a pick takes to reach the peers (`unheardMs`). Absent with one replica or no exchange.
   */
  readonly tier?: TierStanding;
}

/** A replica's place in a tier that shares load, and how long its peers take to hear of a pick. */
export interface TierStanding {
  readonly rank: number;
  readonly size: number;
  readonly unheardMs: number;
  /** The tier's requests arrive together, more than a steady stream explains (fleet/tier-bursts.ts). */
  readonly bursty: boolean;
  /**
   * The peers' picks expected on their way to this replica now, not yet in EndpointView.peers: their
   * pick rate x the exchange's mean lag (fleet/unheard-picks.ts). Absent: none counted.
   */
  readonly unheardPicks?: number;
  /**
   * The wall-clock millisecond of this decision: peers deciding at one instant read the same one,
   * so the ADR 0046 draw can spread their choices by rank instead of drawing each alone (ADR
   * 0058). Absent: each draws alone.
   */
  readonly instant?: number;
}

export interface CacheReport {
  /** Prompt tokens as the runtime counted them. */
  readonly promptTokens: number;
  readonly cachedTokens: number;
  /** `cached_tokens_details` split, when the runtime reports it. */
  readonly deviceTokens?: number;
  readonly hostTokens?: number;
  /** Output tokens the runtime generated, when known: the policy learns the usual output length. */
  readonly completionTokens?: number;
}

export type RouteOutcome =
  | { readonly kind: 'routed'; readonly endpoint: string; readonly input: RouteInput }
  | {
      readonly kind: 'completed';
      readonly endpoint: string;
      readonly input: RouteInput;
      readonly report?: CacheReport;
    }
  /**
   * The endpoint produced the request's first output byte (first SSE chunk,
   * or the whole body when not streaming): its prefill is over.
   */
  | { readonly kind: 'first-token'; readonly endpoint: string; readonly input: RouteInput }
  /**
   * The endpoint has streamed at least `tokens` output tokens of the request so far (its SSE
   * events counted: a lower bound, as an event carries one token or more); sent every few.
   */
  | {
      readonly kind: 'decoding';
      readonly endpoint: string;
      readonly input: RouteInput;
      readonly tokens: number;
    }
  | { readonly kind: 'failed'; readonly endpoint: string; readonly input: RouteInput };

export interface Policy {
  readonly name: string;
  /** Index into `endpoints`, or undefined when none is eligible. */
  select(endpoints: readonly EndpointView[], req: RouteInput): number | undefined;
  observe?(outcome: RouteOutcome): void;
  /**
   * How long (ms) the shell waits before `select`, so that picks the peers made at the same
   * instant reach this replica first (RouteInput.tier); 0 or absent: select at once.
   */
  holdMs?(endpoints: readonly EndpointView[], req: RouteInput): number;
  /**
   * The output tokens this policy counts in the endpoint's decode load for `input` (absent:
   * the policy weighs no decode load): what a front end that cannot count a stream's events
   * estimates its progress against (epp/decode-estimate.ts).
   */
  expectedOutput?(input: RouteInput): number;
  /** The endpoint set or an endpoint's generation changed. */
  syncEndpoints?(endpoints: readonly EndpointView[]): void;
  /** Periodic housekeeping (tree eviction), driven by a timer the shell owns. */
  maintain?(now: number): void;
  /**
   * This replica's predicted prefill backlog and decode tokens on an endpoint, for the other
   * replicas (fleet/load-exchange.ts); policies that predict neither leave it out.
   */
  shareOf?(endpointId: string): { readonly prefillTokens: number; readonly decodeTokens: number };
  /**
   * Which rule made the last `select`'s choice, and the costs it weighed (one per endpoint) where
   * it weighed any: for a bench's per-request dump (test/bench/request-dump.ts), not for routing.
   */
  explainLastPick?(): PickExplanation;
}

/**
 * The rule behind a pick: cost routing's cheapest, idle spill or in-transit draw; threshold
 * routing's deepest match or its least-loaded fallback; least load when imbalanced or no prefix.
 */
export type PickReason =
  'imbalanced' | 'no-prefix' | 'spill' | 'in-transit' | 'cheapest' | 'deepest-match' | 'below-threshold';

export interface PickExplanation {
  readonly reason: PickReason;
  readonly cost?: readonly number[];
}

/** Requests on the endpoint: this replica's and its peers' in flight, and the runtime's queue. */
export function loadOf(e: EndpointView): number {
  return e.inFlight + (e.peers?.inFlight ?? 0) + e.queued;
}

/** Index of the least-loaded endpoint by `score`; ties go to the first at or after `start`. */
export function indexOfMin(
  endpoints: readonly EndpointView[],
  score: (e: EndpointView, i: number) => number,
  start = 0,
): number | undefined {
  const n = endpoints.length;
  let best: number | undefined;
  let bestScore = Infinity;
  for (let k = 0; k < n; k++) {
    const i = (start + k) % n;
    const s = score(endpoints[i] as EndpointView, i);
    if (best === undefined || s < bestScore) {
      best = i;
      bestScore = s;
    }
  }
  return best;
}
