// The request path, as named steps: parse → route → salt → tokens → tenant's
// limits → wake → reuse? → admit → forward (standalone or a prefill/decode
// pair, retried before the first byte) → deliver. Each step is a module of its
// own; this class holds the state they share: one policy per deployment,
// in-flight counts per endpoint, admission controllers, the KV indexes, the
// reuse store and the upstream connection pool.

import { AdmissionRegistry, type Permit, type ReleaseInfo } from './admission/index.ts';
import { admitRequest } from './admission/admit.ts';
import { monotonicClock, type Clock, type Timer } from '#kube/clock.ts';
import type { RuntimeKeyDirectory } from './discovery/runtime-keys.ts';
import { EndpointBook, type RuntimeLoad } from './endpoints/book.ts';
import { RuntimeReadyPoller } from './endpoints/runtime-ready.ts';
import { StandingEndpoints } from './endpoints/standing.ts';
import { GatewayError } from './errors.ts';
import { buildSoloPeers, type PeerSet } from './fleet/peers.ts';
import { TierPosition } from './fleet/tier-position.ts';
import type { ForwardDeps } from './forward/attempts.ts';
import { deliverBuffered, deliverStream } from './forward/deliver.ts';
import { forwardPair } from './forward/pair.ts';
import { serveReusable } from './forward/reusable.ts';
import { toServed, type Buffered, type Served } from './forward/served.ts';
import { forwardStandalone } from './forward/standalone.ts';
import type { Answer, Deliver, Forwarding, RequestContext } from './forward/types.ts';
import { WakeHolds } from './forward/wake-hold.ts';
import { KvPublisherFollower } from './kv-index/follow.ts';
import { KvIndexFleet } from './kv-index/fleet.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { EndpointView, Policy, RouteInput } from './policies/index.ts';
import { PolicyRegistry } from './routing/policy-registry.ts';
import {
  computeEffectiveSalt,
  computeExactTokens,
  computeRouteTokens,
  computeTokenizerInput,
  parseBody,
  type ParsedBody,
} from './request/shape.ts';
import { computeDeterminism, MemoryResultStore, ResultReuser, type ResultStore } from './reuse/index.ts';
import { computeTenantSalt } from '#sglang/salt.ts';
import { chooseRoute } from './routing/lookup.ts';
import { isDisaggregated } from './routing/pd.ts';
import type { ModelRoute, RouteEndpoint, RoutingTable } from './routing/table.ts';
import { enforceTenantLimits } from './tenancy/enforce.ts';
import { MemoryRateLimiter, type RateLimiter } from './tenancy/limiter.ts';
import { encodeRequest } from './tokenize/request.ts';
import type { Tokenizer } from './tokenize/tokenizer.ts';
import { BUFFERED_EXCHANGE, STREAMING_EXCHANGE, type Exchange } from './upstream/exchange.ts';
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
  /** Each served model's own tokenizer (--tokenizers): text prompts matched exactly against the KV index. */
  readonly tokenizers?: ReadonlyMap<string, Tokenizer>;
  /** Tenants' rate counts (Redis for the tier); in memory, this replica's share, when absent. */
  readonly limiter?: RateLimiter;
  /** The runtimes' API keys (--api-key), sent to each runtime it holds a key for; none sent when absent. */
  readonly runtimeKeys?: RuntimeKeyDirectory;
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
  readonly #ownsKvIndex: boolean;
  readonly #follower: KvPublisherFollower;
  readonly #tokenizers: ReadonlyMap<string, Tokenizer>;
  readonly #reuser: ResultReuser;
  readonly #maintenanceMs: number;
  readonly #tier: TierPosition;
  readonly #limiter: RateLimiter;
  #timer: Timer | undefined;

  constructor(opts: GatewayOptions) {
    this.#table = opts.table;
    this.#metrics = opts.metrics;
    this.#clock = opts.clock ?? monotonicClock;
    this.#book = new EndpointBook({
      metrics: this.#metrics,
      clock: this.#clock,
      runtimeLoad: opts.runtimeLoad ?? (() => undefined),
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
    this.#tokenizers = opts.tokenizers ?? new Map();
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
    this.#tier = new TierPosition(opts.peers ?? buildSoloPeers());
    this.#limiter = opts.limiter ?? new MemoryRateLimiter(this.#clock, (total) => this.#tier.shareOf(total));
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

  inFlightOf(endpointId: string): number {
    return this.#book.inFlightOf(endpointId);
  }

  /** What this replica knows of an endpoint's load: its own in flight and predicted prefill, the runtime's queue. */
  viewOf(endpoint: RouteEndpoint): EndpointView {
    return this.#book.view(endpoint);
  }

  async serve(ctx: RequestContext): Promise<Served> {
    const parsed = parseBody(ctx.kind, ctx.body);
    if (!parsed.ok) throw new GatewayError('GW_BAD_REQUEST', { detail: parsed.error });
    const tenant = ctx.tenant;
    const chosen = chooseRoute(this.#table, parsed.value, ctx.headers, tenant);
    const routeSalt =
      tenant && !chosen.sharePrefixesAcrossTenants ? computeTenantSalt(chosen.salt, tenant.id) : chosen.salt;
    const salt = computeEffectiveSalt(routeSalt, parsed.value.body.cache_salt);
    // The parse's own copy of the client's body (zod builds a new object): stamped in place.
    const body: Record<string, unknown> = parsed.value.body;
    body['cache_salt'] = salt;
    if (ctx.kind === 'generate') delete body['model'];
    const exact =
      computeExactTokens(parsed.value) ??
      (this.#indexesTokens(chosen) ? await this.#tokenizeForIndex(chosen, parsed.value) : undefined);
    const input: RouteInput = {
      id: ctx.id,
      salt,
      tokens: exact ?? computeRouteTokens(parsed.value),
      now: this.#clock.now(),
    };
    ctx.trace?.routed(chosen.model, chosen.deployment, input.tokens.length, exact !== undefined);
    if (tenant)
      await enforceTenantLimits(this.#limiter, this.#metrics, tenant, input.tokens.length, ctx.setHeader);
    // A Deployment waking from zero: held until the table shows it an endpoint (wake-hold.ts), after
    // the tenant's limits, so a request they refuse never wakes it.
    const route = this.wakeHolds.holds(chosen)
      ? await this.wakeHolds.untilRoutable(
          chosen,
          () => this.#table.candidates(chosen.model).find((r) => r.deployment === chosen.deployment),
          ctx.signal,
        )
      : chosen;
    const fwd: Forwarding = { ctx, route, input, body, ...(exact ? { exact } : {}) };
    if (body['stream'] === true) {
      // The runtime's usage event carries its cache report; a client that did not ask for it does not see it.
      const strip = ctx.kind !== 'generate' && requestUsageEvent(body);
      return this.#forward(fwd, STREAMING_EXCHANGE, deliverStream(this.#limiter, ctx, strip));
    }
    const buffered = (): Promise<Buffered> =>
      this.#forward(fwd, BUFFERED_EXCHANGE, deliverBuffered(this.#limiter, tenant));
    if (route.reuse.enabled && computeDeterminism(body, route.reuse.reusableWhen))
      return serveReusable(this.#reuser, this.#metrics, fwd, buffered);
    return toServed(await buffered());
  }

  /** Admitted, then sent to one endpoint or a prefill/decode pair; admission learns how it went. */
  async #forward<T, R extends Answer>(
    fwd: Forwarding,
    exchange: Exchange<R>,
    deliver: Deliver<T, R>,
  ): Promise<T> {
    const { ctx, route } = fwd;
    const priority = ctx.tenant?.priority ?? 0;
    const permit: Permit = await admitRequest(this.admission, this.#tier, this.#metrics, route, {
      signal: ctx.signal,
      priority,
      trace: ctx.trace,
    });
    let release: ReleaseInfo | undefined;
    try {
      const policy = this.#policyFor(route);
      const via = { exchange, deliver };
      const out = isDisaggregated(route)
        ? await forwardPair(this.#deps, fwd, policy, permit, via)
        : await forwardStandalone(this.#deps, fwd, policy, permit, via);
      release = out.release;
      if ('error' in out) throw out.error;
      return out.result;
    } finally {
      permit.release(ctx.signal.aborted ? undefined : release);
    }
  }

  /** The prompt's ids from the model's own tokenizer (for the KV index). */
  async #tokenizeForIndex(route: ModelRoute, parsed: ParsedBody): Promise<readonly number[] | undefined> {
    const tok = this.#tokenizers.get(route.model);
    const input = tok && computeTokenizerInput(parsed);
    return input ? encodeRequest(tok, input) : undefined;
  }

  /**
   * Tokenize only where a KV index can use the ids (an endpoint publishes events): elsewhere
   * approximate tokens serve the tree at no cost.
   */
  #indexesTokens(route: ModelRoute): boolean {
    return this.#tokenizers.has(route.model) && route.endpoints.some((e) => e.events);
  }

  #policyFor(route: ModelRoute): Policy {
    this.#follower.followRoute(route);
    return this.#policies.policyFor(route, (e) => this.#book.view(e));
  }
}

export type { Served } from './forward/served.ts';
export type { RequestContext } from './forward/types.ts';
export type { UpstreamOptions } from './upstream/open.ts';
