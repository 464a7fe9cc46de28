// The request path, as named steps: pick (picker/pick.ts: parse → route →
// the policy's request rules →
// salt → tokens → tenant's limits → wake → reuse? → admit → endpoint) →
// forward (standalone or a prefill/decode pair, retried before the first
// byte) → deliver. Each step is a module of its own; this class holds the
// state they share: one policy per deployment, in-flight counts per endpoint,
// admission controllers, the KV indexes, the reuse store and the upstream
// connection pool.

import { AdmissionRegistry, type ReleaseInfo } from './admission/index.ts';
import { monotonicClock, systemClock, type Clock, type Timer } from '#kube/clock.ts';
import type { RuntimeKeyDirectory } from './discovery/runtime-keys.ts';
import { EndpointBook, type RuntimeLoad, type TierLoad } from './endpoints/book.ts';
import { RuntimeReadyPoller } from './endpoints/runtime-ready.ts';
import { StandingEndpoints } from './endpoints/standing.ts';
import { buildSoloPeers, type PeerSet } from './fleet/peers.ts';
import { TierPosition } from './fleet/tier-position.ts';
import { EXCHANGE_UNHEARD_MS } from './fleet/tier-load.ts';
import { markIfGone, type ForwardDeps } from './forward/attempts.ts';
import { deliverBuffered, deliverStream } from './forward/deliver.ts';
import { forwardPair } from './forward/pair.ts';
import { serveReusable } from './forward/reusable.ts';
import { fromReused, toServed, type Buffered, type Served } from './forward/served.ts';
import { forwardStandalone } from './forward/standalone.ts';
import type { Answer, Deliver, Forwarding, RequestContext } from './forward/types.ts';
import { KvPublisherFollower } from './kv-index/follow.ts';
import { KvIndexFleet } from './kv-index/fleet.ts';
import { KvIndexReadiness } from './kv-index/readiness.ts';
import type { GatewayMetrics } from './metrics/index.ts';
import { Picker } from './picker/pick.ts';
import { toGatewayError } from './picker/verdict.ts';
import { WakeHolds } from './picker/wake-hold.ts';
import type { EndpointView, Policy } from './policies/index.ts';
import { PolicyRegistry } from './routing/policy-registry.ts';
import { MemoryResultStore, ResultReuser, type ResultStore } from './reuse/index.ts';
import type { RouteEndpoint, RoutingTable } from './routing/table.ts';
import { MemoryRateLimiter, type RateLimiter } from './tenancy/limiter.ts';
import type { Tokenizer } from './tokenize/tokenizer.ts';
import { BUFFERED_EXCHANGE, STREAMING_EXCHANGE, type Exchange } from './upstream/exchange.ts';
import { sendBuffered } from './upstream/answer.ts';
import { openUpstream, type Upstream, type UpstreamOptions } from './upstream/open.ts';
import { requestUsageEvent } from './upstream/strip-usage.ts';

export interface GatewayOptions {
  readonly table: RoutingTable;
  readonly metrics: GatewayMetrics;
  readonly clock?: Clock;
  /** Shared result store (Redis); in memory when absent. */
  readonly store?: ResultStore;
  readonly runtimeLoad?: (endpointId: string) => RuntimeLoad | undefined;
  readonly upstream?: UpstreamOptions;
  readonly maintenanceIntervalMs?: number;
  /** The gateway tier: admission bounds are divided among its members (fleet/share.ts). */
  readonly peers?: PeerSet;
  /** How long an endpoint whose connection failed stays out of picks (default 10 s). */
  readonly downHoldMs?: number;
  /** Ask each routed runtime's /ready this often: a 503 (draining) takes it out of picks (absent or 0: never). */
  readonly readyPollIntervalMs?: number;
  /** The runtimes' KV indexes (their own events); the gateway opens one when absent. */
  readonly kvIndex?: KvIndexFleet;
  /** How long /readyz waits at most for the KV index's first catch-up (kv-index/readiness.ts). */
  readonly kvReadyGraceMs?: number;
  /** Each served model's own tokenizer (--tokenizers): text prompts matched exactly against the KV index. */
  readonly tokenizers?: ReadonlyMap<string, Tokenizer>;
  /** Tenants' rate counts (Redis for the tier); in memory, this replica's share, when absent. */
  readonly limiter?: RateLimiter;
  /** The runtimes' API keys (--api-key), sent to each runtime it holds a key for; none sent when absent. */
  readonly runtimeKeys?: RuntimeKeyDirectory;
  /** The other replicas' shares of each runtime's load, and where this one publishes its own. */
  readonly tierLoad?: TierLoad;
}

export class Gateway {
  readonly #table: RoutingTable;
  readonly #metrics: GatewayMetrics;
  readonly #clock: Clock;
  readonly #upstream: Upstream;
  readonly #policies = new PolicyRegistry();
  readonly #book: EndpointBook;
  /** What forward/standalone.ts and forward/pair.ts use of this gateway. */
  readonly #deps: ForwardDeps;
  /** Endpoints whose connection just failed, or that say they drain, leave every pick before the table catches up. */
  readonly standing: StandingEndpoints;
  readonly #readyPoller: RuntimeReadyPoller | undefined;
  readonly admission: AdmissionRegistry;
  /** Requests held for Deployments waking from zero. */
  readonly wakeHolds: WakeHolds;
  readonly kvIndex: KvIndexFleet;
  /** Whether the KV index has read the runtimes' replay: part of /readyz. */
  readonly kvReadiness: KvIndexReadiness;
  readonly #ownsKvIndex: boolean;
  readonly #follower: KvPublisherFollower;
  readonly #reuser: ResultReuser;
  readonly #maintenanceMs: number;
  readonly #limiter: RateLimiter;
  /** The routing decision: this proxy's, and the ext_proc endpoint picker's (epp/) in picker or both mode. */
  readonly picker: Picker;
  #timer: Timer | undefined;

  constructor(opts: GatewayOptions) {
    this.#table = opts.table;
    this.#metrics = opts.metrics;
    this.#clock = opts.clock ?? monotonicClock;
    this.#book = new EndpointBook({
      metrics: this.#metrics,
      clock: this.#clock,
      runtimeLoad: opts.runtimeLoad ?? (() => undefined),
      ...(opts.tierLoad ? { tier: opts.tierLoad } : {}),
    });
    this.#upstream = openUpstream(opts.upstream, opts.table, opts.runtimeKeys);
    this.admission = new AdmissionRegistry(this.#clock);
    this.wakeHolds = new WakeHolds(this.#clock);
    this.standing = new StandingEndpoints(this.#clock, opts.downHoldMs);
    this.#readyPoller = opts.readyPollIntervalMs
      ? new RuntimeReadyPoller({
          table: this.#table,
          standing: this.standing,
          clock: this.#clock,
          intervalMs: opts.readyPollIntervalMs,
        })
      : undefined;
    this.#ownsKvIndex = opts.kvIndex === undefined;
    this.kvIndex = opts.kvIndex ?? new KvIndexFleet({ clock: this.#clock });
    this.#follower = new KvPublisherFollower(this.#table, this.kvIndex, this.#clock);
    this.kvReadiness = new KvIndexReadiness(this.#table, this.kvIndex, this.#clock, opts.kvReadyGraceMs);
    this.#deps = {
      book: this.#book,
      standing: this.standing,
      kvIndex: this.kvIndex,
      metrics: this.#metrics,
      clock: this.#clock,
      send: this.#upstream.send,
      headersTimeoutMs: this.#upstream.settings.headersTimeoutMs,
      maxAttempts: this.#upstream.settings.maxAttempts,
    };
    this.#reuser = new ResultReuser(opts.store ?? new MemoryResultStore({ maxEntries: 10_000 }, this.#clock));
    this.#maintenanceMs = opts.maintenanceIntervalMs ?? 60_000;
    const tier = new TierPosition(opts.peers ?? buildSoloPeers());
    const tierLoad = opts.tierLoad;
    this.#limiter = opts.limiter ?? new MemoryRateLimiter(this.#clock, (total) => tier.shareOf(total));
    this.picker = new Picker({
      table: this.#table,
      metrics: this.#metrics,
      clock: this.#clock,
      policies: this.#policies,
      view: (e, cached) => this.#book.view(e, cached),
      standing: (endpoints) => this.standing.filter(endpoints),
      kvIndex: this.kvIndex,
      followRoute: (route) => this.#follower.followRoute(route),
      tokenizers: opts.tokenizers ?? new Map<string, Tokenizer>(),
      limiter: this.#limiter,
      wakeHolds: this.wakeHolds,
      admission: this.admission,
      tier,
      ...(tierLoad
        ? {
            tierStanding: () =>
              tier.standing(
                tierLoad.unheardMs?.() ?? EXCHANGE_UNHEARD_MS,
                tierLoad.bursty?.() ?? false,
                tierLoad.unheardPicks?.() ?? 0,
                // Wall time, not the gateway's monotonic clock: the peers' clocks read alike.
                systemClock.now(),
              ),
          }
        : {}),
      reuser: this.#reuser,
    });
  }

  start(): void {
    const tick = (): void => {
      this.#policies.maintain(this.#clock.now());
      this.#timer = this.#clock.setTimer(this.#maintenanceMs, tick);
    };
    this.#timer = this.#clock.setTimer(this.#maintenanceMs, tick);
    // Subscribe to new runtimes' events before their first request, not at it.
    this.#follower.start();
    this.#readyPoller?.start();
  }

  async close(): Promise<void> {
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#follower.stop();
    this.#readyPoller?.stop();
    if (this.#ownsKvIndex) await this.kvIndex.close();
    await this.#limiter.close();
    await this.#upstream.close();
  }

  /** Requests waiting for an identical one in flight (reuse de-duplication). */
  get reuseWaiting(): number {
    return this.#reuser.waitingCount;
  }

  /** The routing policy a deployment's requests use, once it has served one (for status and tests). */
  policyOf(deployment: string): Policy | undefined {
    return this.#policies.policyOf(deployment);
  }

  /** The gateway's clock: a front end of its own (the endpoint picker) times requests on it too. */
  get clock(): Clock {
    return this.#clock;
  }

  /** In flight, outcomes and load per endpoint: what an endpoint picker reports its requests to, as the proxy does. */
  get book(): EndpointBook {
    return this.#book;
  }

  inFlightOf(endpointId: string): number {
    return this.#book.inFlightOf(endpointId);
  }

  /** What this replica knows of an endpoint's load: its own in flight and predicted prefill, the runtime's queue. */
  viewOf(endpoint: RouteEndpoint): EndpointView {
    return this.#book.view(endpoint);
  }

  /**
   * A prefill/decode pair behind an endpoint picker: Envoy carries the request to the decode,
   * and the prefill gets its copy (same body, same bootstrap room) from here, as the proxy's
   * own pairs do (forward/pair.ts); its answer only ends its in-flight count.
   */
  sendPrefill(prefill: RouteEndpoint, path: string, body: Record<string, unknown>): void {
    const guard = this.#book.track(prefill.id);
    this.kvIndex.expectEvents(prefill.id);
    void sendBuffered(this.#upstream.send, prefill.url, path, body, new AbortController().signal)
      .then(
        (res) => {
          if (res.statusCode >= 300) this.#book.countFailure(prefill, res);
        },
        (err: unknown) => {
          this.#book.countFailure(prefill, err);
          markIfGone(this.#deps, prefill, err);
        },
      )
      .finally(() => guard.release());
  }

  /**
   * The Authorization header a request to `endpoint` carries (its runtime's API key), or
   * undefined when none is known: what the proxy sends, for a front end whose data plane sends.
   */
  authorizationFor(endpoint: RouteEndpoint): string | undefined {
    return this.#upstream.send.authorizationFor?.(endpoint.url);
  }

  async serve(ctx: RequestContext): Promise<Served> {
    const { id, kind, path, body, headers, tenant, signal, log, trace } = ctx;
    const picked = await this.picker.pick({ id, kind, path, body, headers, tenant }, { signal, log, trace });
    for (const [name, value] of Object.entries(picked.headers)) ctx.setHeader?.(name, value);
    if (picked.kind === 'refused') throw toGatewayError(picked.verdict);
    if (picked.kind === 'reused') return fromReused(picked.answer);
    const { decision, lease } = picked;
    const fwd: Forwarding = { ctx, decision, lease };
    if (decision.stream) {
      // The runtime's usage event carries its cache report; a client that did not ask for it does not see it.
      const strip = kind !== 'generate' && requestUsageEvent(decision.body);
      return this.#forward(
        fwd,
        STREAMING_EXCHANGE,
        deliverStream(this.#limiter, ctx, strip, decision.sequences),
      );
    }
    const buffered = (): Promise<Buffered> =>
      this.#forward(fwd, BUFFERED_EXCHANGE, deliverBuffered(this.#limiter, tenant));
    if (lease.reuse) return serveReusable(lease.reuse, decision.route, buffered);
    return toServed(await buffered());
  }

  /** Sent to the picked endpoint or prefill/decode pair; admission learns how it went. */
  async #forward<T, R extends Answer>(
    fwd: Forwarding,
    exchange: Exchange<R>,
    deliver: Deliver<T, R>,
  ): Promise<T> {
    const { ctx, decision, lease } = fwd;
    let release: ReleaseInfo | undefined;
    try {
      const via = { exchange, deliver };
      const { target } = decision;
      const out =
        target.kind === 'pair'
          ? await forwardPair(this.#deps, fwd, target, via)
          : await forwardStandalone(this.#deps, fwd, target.endpoint, via);
      release = out.release;
      if ('error' in out) throw out.error;
      return out.result;
    } finally {
      lease.release(ctx.signal.aborted ? undefined : release);
    }
  }
}

export type { Served } from './forward/served.ts';
export type { RequestContext } from './forward/types.ts';
export type { UpstreamOptions } from './upstream/open.ts';
