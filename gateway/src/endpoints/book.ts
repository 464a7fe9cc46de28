// What the gateway knows about each endpoint besides the routing table: its
// requests in flight from here, the prefill it predicts is still queued there
// (prefill-tracker.ts), its failed attempts, and the runtime's own load from
// the /metrics scrape or its load publisher. With a load exchange (TierLoad)
// it publishes this replica's share of each endpoint (in flight, and the
// prefill and decode tokens the policy predicts there) at every change, and
// adds the other replicas' shares to the view. Policies see it as one
// EndpointView per decision.

import type { Clock } from '#kube/clock.ts';
import type { GatewayMetrics } from '../metrics/index.ts';
import type {
  CachedPrefix,
  EndpointView,
  PeerShare,
  Policy,
  RouteInput,
  RouteOutcome,
} from '../policies/index.ts';
import { generationOf } from './generation.ts';
import { PrefillTracker } from './prefill-tracker.ts';
import type { RouteEndpoint } from '../routing/table.ts';
import { classifyUpstreamFailure } from '../upstream/relay.ts';

export interface RuntimeLoad {
  /** `sglang:num_queue_reqs` */
  readonly queued: number;
  /** `sglang:token_usage` */
  readonly tokenUsage?: number;
  /** Requests decoding now (LoadStat num_running_reqs), from the load publisher only. */
  readonly running?: number;
  /** Uncached prompt tokens waiting for prefill (LoadStat, SGLang 0.5.23), from the load publisher only. */
  readonly waitingUncachedTokens?: number;
}

/** The gateway tier's shares of each endpoint's load (fleet/load-exchange.ts). */
export interface TierLoad {
  /** This replica's share of an endpoint changed. */
  update(endpointId: string, share: PeerShare): void;
  /** The other replicas' shares, summed; undefined when none is known. */
  peersOf(endpointId: string): PeerShare | undefined;
  /** How long a pick takes to reach the other replicas (ms), as measured; absent: a fixed guess. */
  unheardMs?(): number;
  /** A request this replica routed, arrived at `arrivedAt` (gateway clock ms): the peers hear when. */
  notePick?(arrivedAt: number): void;
  /** Whether the tier's requests (this replica's and the peers') arrive in bursts. */
  bursty?(): boolean;
  /** The peers' picks expected on their way to this replica now (fleet/unheard-picks.ts). */
  unheardPicks?(): number;
}

export interface LoadGuard {
  release(): void;
}

export class EndpointBook {
  readonly #metrics: GatewayMetrics;
  readonly #clock: Clock;
  readonly #runtimeLoad: (id: string) => RuntimeLoad | undefined;
  readonly #inFlight = new Map<string, number>();
  readonly #prefill = new PrefillTracker();
  readonly #tier: TierLoad | undefined;
  /** The policy's last predicted prefill and decode per endpoint, published with each in-flight change. */
  readonly #predicted = new Map<string, { prefillTokens: number; decodeTokens: number }>();
  /** Requests already noted as the tier's arrivals (their first 'routed'), by their input. */
  readonly #arrived = new WeakSet<RouteInput>();

  constructor(deps: {
    metrics: GatewayMetrics;
    clock: Clock;
    runtimeLoad: (id: string) => RuntimeLoad | undefined;
    tier?: TierLoad;
  }) {
    this.#tier = deps.tier;
    this.#metrics = deps.metrics;
    this.#clock = deps.clock;
    this.#runtimeLoad = deps.runtimeLoad;
  }

  inFlightOf(endpointId: string): number {
    return this.#inFlight.get(endpointId) ?? 0;
  }

  /** The endpoint as a policy sees it; `cached`: the request's prefix its KV index holds, where known. */
  view(e: RouteEndpoint, cached?: CachedPrefix): EndpointView {
    const load = this.#runtimeLoad(e.id);
    const rate = this.#prefill.tokensPerSecond(e.id);
    return {
      id: e.id,
      inFlight: this.inFlightOf(e.id),
      queued: load?.queued ?? 0,
      generation: generationOf(e),
      pendingPrefillTokens: this.#prefill.pendingTokens(e.id),
      ...(rate !== undefined ? { prefillTokensPerSecond: rate } : {}),
      ...(load?.tokenUsage !== undefined ? { tokenUsage: load.tokenUsage } : {}),
      ...(cached ? { cached } : {}),
      ...this.#tierFields(e.id, load),
    };
  }

  /** Tells the policy, and keeps the predicted prefill every policy's views read. */
  observe(policy: Policy, outcome: RouteOutcome): void {
    const { endpoint, input } = outcome;
    switch (outcome.kind) {
      case 'routed':
        this.#prefill.sent(input.id, endpoint, input.tokens.length, this.#clock.now());
        // When it arrived, not when it was picked: a hold must not read as the tier's arrivals spreading.
        // Once per client request: a retry on another endpoint (forward/standalone.ts) routes the
        // same input again, and the burst test must not read it as a second arrival.
        if (!this.#arrived.has(input)) {
          this.#arrived.add(input);
          this.#tier?.notePick?.(input.now);
        }
        break;
      case 'first-token':
        this.#prefill.firstByte(input.id, this.#clock.now());
        break;
      case 'completed':
        this.#prefill.finished(input.id, outcome.report);
        break;
      case 'failed':
        this.#prefill.finished(input.id, undefined);
        break;
    }
    policy.observe?.(outcome);
    if (this.#tier && policy.shareOf) {
      const share = policy.shareOf(endpoint);
      if (share.prefillTokens > 0 || share.decodeTokens > 0) this.#predicted.set(endpoint, share);
      else this.#predicted.delete(endpoint);
      this.#publish(endpoint);
    }
  }

  #tierFields(id: string, load: RuntimeLoad | undefined): Partial<EndpointView> {
    const peers = this.#tier?.peersOf(id);
    return {
      ...(peers ? { peers } : {}),
      ...(load?.running !== undefined ? { running: load.running } : {}),
      ...(load?.waitingUncachedTokens !== undefined
        ? { waitingUncachedTokens: load.waitingUncachedTokens }
        : {}),
    };
  }

  #publish(id: string): void {
    const p = this.#predicted.get(id);
    this.#tier?.update(id, {
      inFlight: this.inFlightOf(id),
      prefillTokens: p?.prefillTokens ?? 0,
      decodeTokens: p?.decodeTokens ?? 0,
    });
  }

  countFailure(endpoint: RouteEndpoint, failure: unknown): void {
    this.#metrics.upstreamFailures.inc({ endpoint: endpoint.id, reason: classifyUpstreamFailure(failure) });
  }

  /** In-flight +1 now, -1 exactly once on release (end, abort, error or close). */
  track(id: string): LoadGuard {
    this.#setInFlight(id, this.inFlightOf(id) + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.#setInFlight(id, this.inFlightOf(id) - 1);
      },
    };
  }

  #setInFlight(id: string, n: number): void {
    if (n <= 0) this.#inFlight.delete(id);
    else this.#inFlight.set(id, n);
    this.#metrics.inFlight.set({ endpoint: id }, Math.max(0, n));
    this.#publish(id);
  }
}
