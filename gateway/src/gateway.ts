// The request path, as named steps: parse → route → salt → reuse? → admit →
// choose an endpoint → forward (retry before the first byte) → observe.
// State kept here: one policy per deployment, in-flight counts per endpoint,
// admission controllers, the reuse store, the upstream connection pool.

import { Agent } from 'undici';
import { AdmissionRegistry, type Permit, type ReleaseInfo } from './admission/index.ts';
import { toGatewayError } from './admission/rejection.ts';
import { systemClock, type Clock, type Timer } from './clock.ts';
import { EndpointBook, type RuntimeLoad } from './endpoints/book.ts';
import { StandingEndpoints } from './endpoints/standing.ts';
import { GatewayError } from './errors.ts';
import { buildSoloPeers, type PeerSet } from './fleet/peers.ts';
import { computeFleetPosition, computeShareOf, type FleetPosition } from './fleet/share.ts';
import type { ForwardDeps } from './forward/attempts.ts';
import { forwardPair } from './forward/pair.ts';
import {
  buildReusedServed,
  ENDPOINT_HEADER,
  isStorable,
  toServed,
  toStored,
  type Buffered,
  type Served,
} from './forward/served.ts';
import { forwardStandalone } from './forward/standalone.ts';
import type { Answer, Deliver, DeliveryOutcome, Forwarding, RequestContext } from './forward/types.ts';
import { KvIndexFleet } from './kv-index/fleet.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { EndpointView, Policy, RouteInput } from './policies/index.ts';
import { PolicyRegistry } from './policies/registry.ts';
import { WakeHolds } from './forward/wake-hold.ts';
import {
  computeEffectiveSalt,
  computeExactTokens,
  computeRouteTokens,
  computeTokenizerInput,
  parseBody,
  type ParsedBody,
} from './request/shape.ts';
import {
  computeDeterminism,
  computeReuseKey,
  MemoryResultStore,
  ResultReuser,
  type ResultStore,
  type StoredResult,
} from './reuse/index.ts';
import { SGLANG_KEEP_ALIVE_TIMEOUT_MS } from '../../operator/src/sglang/http-server.ts';
import { computeTenantSalt } from '../../operator/src/sglang/salt.ts';
import { isDisaggregated } from './routing/pd.ts';
import { chooseWeighted } from './routing/split.ts';
import type { ModelRoute, RouteEndpoint, RoutingTable } from './routing/table.ts';
import { MemoryRateLimiter, type RateLimiter } from './tenancy/limiter.ts';
import { applyLimitHeaders, toRateLimitError } from './tenancy/limit-response.ts';
import type { Tenant } from './tenancy/tenant.ts';
import { encodeRequest } from './tokenize/request.ts';
import type { Tokenizer } from './tokenize/tokenizer.ts';
import { BUFFERED_EXCHANGE, STREAMING_EXCHANGE, type Exchange } from './upstream/exchange.ts';
import type { BufferedResponse, SendOptions, StreamedResponse } from './upstream/answer.ts';
import { RuntimeAuthorization } from './upstream/runtime-auth.ts';
import type { RuntimeKeyDirectory } from './discovery/runtime-keys.ts';
import { headerString, pipeStream } from './upstream/relay.ts';
import { extractAnswerUsage } from './upstream/report.ts';
import { requestUsageEvent, UsageEventFilter } from './upstream/strip-usage.ts';

export interface UpstreamOptions {
  /** Time to response headers (non-streaming: the whole generation). */
  readonly headersTimeoutMs?: number;
  /** Longest silence between body chunks. */
  readonly bodyTimeoutMs?: number;
  readonly connectionsPerEndpoint?: number;
  readonly keepAliveTimeoutMs?: number;
  /** Endpoints tried per request (1 = no retry). */
  readonly maxAttempts?: number;
  /** Largest body sent to a runtime: re-encoding can grow one (invalid UTF-8 threefold, `1e20` fivefold). */
  readonly maxBodyBytes?: number;
}

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
  readonly #agent: Agent;
  readonly #send: SendOptions;
  readonly #upstream: Required<UpstreamOptions>;
  readonly #policies = new PolicyRegistry();
  /** The route object each deployment's KV subscriptions were last synced with. */
  readonly #synced = new Map<string, ModelRoute>();
  readonly #book: EndpointBook;
  /** What forward/standalone.ts and forward/pair.ts use of this gateway. */
  readonly #deps: ForwardDeps;
  /** Endpoints whose connection just failed leave every pick before the table catches up. */
  readonly standing: StandingEndpoints;
  readonly admission: AdmissionRegistry;
  /** Requests held for Deployments waking from zero. */
  readonly wakeHolds: WakeHolds;
  readonly kvIndex: KvIndexFleet;
  readonly #ownsKvIndex: boolean;
  readonly #tokenizers: ReadonlyMap<string, Tokenizer>;
  readonly #reuser: ResultReuser;
  readonly #maintenanceMs: number;
  readonly #peers: PeerSet;
  readonly #limiter: RateLimiter;
  // The tier seen last and where this replica stands in it: recomputed only when the members change.
  #fleet: { members: readonly string[]; position: FleetPosition } | undefined;
  #timer: Timer | undefined;
  #kvTimer: Timer | undefined;
  #kvFollowed: readonly ModelRoute[] | undefined;

  constructor(opts: GatewayOptions) {
    this.#table = opts.table;
    this.#metrics = opts.metrics;
    this.#clock = opts.clock ?? systemClock;
    this.#book = new EndpointBook({
      metrics: this.#metrics,
      clock: this.#clock,
      runtimeLoad: opts.runtimeLoad ?? (() => undefined),
    });
    this.#upstream = {
      headersTimeoutMs: 600_000,
      bodyTimeoutMs: 300_000,
      connectionsPerEndpoint: 256,
      // Idle upstream connections close before the runtime closes them: no request races SGLang's close.
      keepAliveTimeoutMs: SGLANG_KEEP_ALIVE_TIMEOUT_MS - 1_000,
      maxAttempts: 2,
      maxBodyBytes: 64 * 1024 * 1024,
      ...opts.upstream,
    };
    this.#agent = new Agent({
      connections: this.#upstream.connectionsPerEndpoint,
      keepAliveTimeout: this.#upstream.keepAliveTimeoutMs,
    });
    this.#send = {
      agent: this.#agent,
      headersTimeoutMs: this.#upstream.headersTimeoutMs,
      bodyTimeoutMs: this.#upstream.bodyTimeoutMs,
      maxBodyBytes: this.#upstream.maxBodyBytes,
      ...(opts.runtimeKeys ? { authorizationFor: buildAuthorizationFor(opts.table, opts.runtimeKeys) } : {}),
    };
    this.admission = new AdmissionRegistry(this.#clock);
    this.wakeHolds = new WakeHolds(this.#clock);
    this.standing = new StandingEndpoints(this.#clock, opts.downHoldMs);
    this.#ownsKvIndex = opts.kvIndex === undefined;
    this.kvIndex = opts.kvIndex ?? new KvIndexFleet({ clock: this.#clock });
    this.#tokenizers = opts.tokenizers ?? new Map();
    this.#deps = {
      book: this.#book,
      standing: this.standing,
      kvIndex: this.kvIndex,
      metrics: this.#metrics,
      clock: this.#clock,
      send: this.#send,
      headersTimeoutMs: this.#upstream.headersTimeoutMs,
      maxAttempts: this.#upstream.maxAttempts,
    };
    this.#reuser = new ResultReuser(opts.store ?? new MemoryResultStore({ maxEntries: 10_000 }, this.#clock));
    this.#maintenanceMs = opts.maintenanceIntervalMs ?? 60_000;
    this.#peers = opts.peers ?? buildSoloPeers();
    this.#limiter =
      opts.limiter ??
      new MemoryRateLimiter(this.#clock, (total) => computeShareOf(total, this.#fleetPosition()));
  }

  start(): void {
    const tick = () => {
      const now = this.#clock.now();
      this.#policies.maintain(now);
      this.#timer = this.#clock.setTimer(this.#maintenanceMs, tick);
    };
    this.#timer = this.#clock.setTimer(this.#maintenanceMs, tick);
    // Subscribe to new runtimes' events before their first request, not at it.
    const follow = () => {
      this.#followKvPublishers();
      this.#kvTimer = this.#clock.setTimer(KV_FOLLOW_MS, follow);
    };
    follow();
  }

  #followKvPublishers(): void {
    const routes = this.#table.list();
    // Routes are replaced whole on change: the same objects mean the same endpoints.
    const prev = this.#kvFollowed;
    if (prev?.length === routes.length && routes.every((r, i) => r === prev[i])) return;
    this.#kvFollowed = routes;
    const all = new Set(routes.flatMap((r) => r.endpoints.map((e) => e.id)));
    for (const r of routes) this.kvIndex.sync(r.endpoints, all);
  }

  async close(): Promise<void> {
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#kvTimer?.cancel();
    this.#kvTimer = undefined;
    if (this.#ownsKvIndex) await this.kvIndex.close();
    await this.#limiter.close();
    await this.#agent.close();
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
    const chosen = this.#lookup(parsed.value, ctx.headers, tenant);
    const routeSalt =
      tenant && !chosen.sharePrefixesAcrossTenants ? computeTenantSalt(chosen.salt, tenant.id) : chosen.salt;
    const salt = computeEffectiveSalt(routeSalt, parsed.value.body.cache_salt);
    const body: Record<string, unknown> = { ...parsed.value.body, cache_salt: salt };
    if (ctx.kind === 'generate') delete body['model'];
    const exact = computeExactTokens(parsed.value) ?? (await this.#tokenizeForIndex(chosen, parsed.value));
    const input: RouteInput = {
      id: ctx.id,
      salt,
      tokens: exact ?? computeRouteTokens(parsed.value),
      now: this.#clock.now(),
    };
    ctx.trace?.routed(chosen.model, chosen.deployment, input.tokens.length, exact !== undefined);
    if (tenant) await this.#limit(ctx, tenant, input.tokens.length);
    // A Deployment waking from zero: held until the table shows it an endpoint (wake-hold.ts), after
    // the tenant's limits, so a request they refuse never wakes it.
    const route = await this.wakeHolds.untilRoutable(
      chosen,
      () => this.#table.candidates(chosen.model).find((r) => r.deployment === chosen.deployment),
      ctx.signal,
    );
    const fwd: Forwarding = { ctx, route, input, body, ...(exact ? { exact } : {}) };
    if (body['stream'] === true) {
      // The runtime's usage event carries its cache report; a client that did not ask for it does not see it.
      const strip = ctx.kind !== 'generate' && requestUsageEvent(body);
      return this.#forward(fwd, STREAMING_EXCHANGE, (e, res, done) =>
        this.#deliverStream(fwd, e, res, done, strip),
      );
    }
    const mode = route.reuse.enabled ? computeDeterminism(body, route.reuse.reusableWhen) : undefined;
    if (mode) return this.#serveReusable(fwd);
    return toServed(
      await this.#forward(fwd, BUFFERED_EXCHANGE, (e, res, done) =>
        this.#deliverBuffered(fwd.ctx.tenant, e, res, done),
      ),
    );
  }

  /** The served name's Deployment: among those the tenant may use, by weight when the name is split. */
  #lookup(parsed: ParsedBody, headers: RequestContext['headers'], tenant: Tenant | undefined): ModelRoute {
    const header = headers['x-cacheroute-model'];
    const routes = this.#table.list();
    const model =
      parsed.body.model ??
      (typeof header === 'string' ? header : undefined) ??
      (routes.length > 0 && routes.every((r) => r.model === routes[0]?.model) ? routes[0]?.model : undefined);
    if (model === undefined)
      throw new GatewayError('GW_BAD_REQUEST', {
        detail: 'model: name the model (body field `model` or header x-cacheroute-model)',
      });
    const all = this.#table.candidates(model);
    const first = all[0];
    if (!first) throw new GatewayError('GW_MODEL_NOT_FOUND', { model });
    const allowed = tenant ? all.filter((r) => tenant.deployments.has(r.deployment)) : all;
    const route = chooseWeighted(allowed, readSessionKey(parsed, headers));
    if (route) return route;
    throw new GatewayError('GW_MODEL_FORBIDDEN', {
      tenant: tenant?.id ?? '',
      model,
      deployment: all.map((r) => r.deployment).join(', '),
    });
  }

  async #serveReusable(fwd: Forwarding): Promise<Served> {
    const { ctx, route, body } = fwd;
    const key = computeReuseKey({
      fingerprint: route.fingerprint,
      salt: fwd.input.salt,
      route: ctx.path,
      body,
    });
    const span = ctx.trace?.startReuse();
    const out = await this.#reuser.run(key, route.reuse.ttlSeconds * 1000, async () => {
      const r = await this.#forward(fwd, BUFFERED_EXCHANGE, (e, res, done) =>
        this.#deliverBuffered(fwd.ctx.tenant, e, res, done),
      );
      return { value: r, stored: isStorable(r, route) ? toStored(r) : undefined };
    });
    span?.end(out.source);
    this.#metrics.reuse.inc({ model: route.model, source: out.source });
    if (out.produced) return toServed(out.produced);
    return buildReusedServed(out.stored as StoredResult, out.source);
  }

  async #forward<T, R extends Answer>(
    fwd: Forwarding,
    exchange: Exchange<R>,
    deliver: Deliver<T, R>,
  ): Promise<T> {
    const permit = await this.#admit(fwd.route, fwd.ctx, fwd.ctx.tenant?.priority ?? 0);
    let release: ReleaseInfo | undefined;
    try {
      const policy = this.#policyFor(fwd.route);
      const via = { exchange, deliver };
      const out = isDisaggregated(fwd.route)
        ? await forwardPair(this.#deps, fwd, policy, permit, via)
        : await forwardStandalone(this.#deps, fwd, policy, permit, via);
      release = out.release;
      if ('error' in out) throw out.error;
      return out.result;
    } finally {
      permit.release(fwd.ctx.signal.aborted ? undefined : release);
    }
  }

  /**
   * The prompt's ids from the model's own tokenizer, only where a KV index can use them
   * (an endpoint publishes events): elsewhere approximate tokens serve the tree at no cost.
   */
  async #tokenizeForIndex(route: ModelRoute, parsed: ParsedBody): Promise<readonly number[] | undefined> {
    const tok = this.#tokenizers.get(route.model);
    if (!tok || !route.endpoints.some((e) => e.events)) return undefined;
    const input = computeTokenizerInput(parsed);
    return input ? encodeRequest(tok, input) : undefined;
  }

  /** This replica's position in the gateway tier, for its share of each admission bound. */
  #fleetPosition(): FleetPosition {
    const members = this.#peers.members();
    if (this.#fleet?.members !== members) {
      this.#fleet = { members, position: computeFleetPosition(members, this.#peers.self) };
    }
    return this.#fleet.position;
  }

  /** A tenant over its rate limits gets 429 before it is queued; its figures go on every answer. */
  async #limit(ctx: RequestContext, tenant: Tenant, promptTokens: number): Promise<void> {
    const decision = await this.#limiter.admit(tenant, promptTokens);
    if (ctx.setHeader) applyLimitHeaders(decision, ctx.setHeader);
    if (decision.allowed) return;
    this.#metrics.tenantRejections.inc({ tenant: tenant.id, limit: decision.limited });
    throw toRateLimitError(tenant, decision);
  }

  async #admit(route: ModelRoute, ctx: RequestContext, priority: number): Promise<Permit> {
    const fleet = this.#fleetPosition();
    const ctl = this.admission.get(route.deployment, {
      maxConcurrency: computeShareOf(route.admission.maxConcurrency, fleet),
      maxQueue: computeShareOf(route.admission.maxQueue, fleet),
      queueTimeoutMs: route.admission.queueTimeoutSeconds * 1000,
      adaptive: route.admission.adaptive,
    });
    const span = ctx.trace?.startAdmission(route.deployment, priority);
    const r = await ctl.acquire(ctx.signal, { priority });
    if (r.ok) {
      this.admission.countAdmission(route.deployment);
      span?.admitted(r.value.queuedMs);
      this.#metrics.queueSeconds.observe({ deployment: route.deployment }, r.value.queuedMs / 1000);
      return r.value;
    }
    span?.rejected(r.error.code);
    this.#metrics.admissionRejections.inc({ deployment: route.deployment, reason: r.error.code });
    if (r.error.code === 'overloaded' || r.error.code === 'queue-timeout')
      this.admission.countRefusal(route.deployment);
    throw toGatewayError(r.error, route.deployment, route.admission.queueTimeoutSeconds * 1000);
  }

  #deliverBuffered(
    tenant: Tenant | undefined,
    endpoint: RouteEndpoint,
    res: BufferedResponse,
    done: (outcome: DeliveryOutcome) => void,
  ): Promise<Buffered> {
    const text = res.text;
    const usage = res.statusCode < 300 ? extractAnswerUsage(text) : undefined;
    const report = usage?.report;
    if (tenant && usage?.completionTokens) this.#limiter.charge(tenant, usage.completionTokens);
    done({ kind: 'completed', report });
    const contentType = headerString(res.headers['content-type']) ?? 'application/json';
    return Promise.resolve({ status: res.statusCode, contentType, body: text, endpoint, report });
  }

  async #deliverStream(
    fwd: Forwarding,
    endpoint: RouteEndpoint,
    res: StreamedResponse,
    done: (outcome: DeliveryOutcome) => void,
    stripUsage: boolean,
  ): Promise<Served> {
    const piped = await pipeStream(
      fwd.ctx.openSink,
      res,
      { [ENDPOINT_HEADER]: endpoint.id },
      fwd.ctx.signal,
      () => done({ kind: 'first-byte' }),
      stripUsage ? new UsageEventFilter() : undefined,
    );
    const tenant = fwd.ctx.tenant;
    if (tenant && piped.completionTokens) this.#limiter.charge(tenant, piped.completionTokens);
    // Even an interrupted stream was prefilled: the endpoint holds the prompt.
    done({ kind: 'completed', report: piped.report });
    return { kind: 'streamed' };
  }

  #policyFor(route: ModelRoute): Policy {
    if (this.#synced.get(route.deployment) !== route) {
      // A new or changed route: follow its runtimes' event publishers at once.
      this.#synced.set(route.deployment, route);
      const all = new Set(this.#table.list().flatMap((r) => r.endpoints.map((e) => e.id)));
      this.kvIndex.sync(route.endpoints, all);
    }
    return this.#policies.policyFor(route, (e) => this.#book.view(e));
  }
}

const KV_FOLLOW_MS = 1000;

/** What keeps a client on one identity of a split: OpenAI's `user`, or x-cacheroute-session. */
function readSessionKey(parsed: ParsedBody, headers: RequestContext['headers']): string | undefined {
  const user = (parsed.body as { user?: unknown }).user;
  if (typeof user === 'string' && user !== '') return user;
  const header = headers['x-cacheroute-session'];
  return typeof header === 'string' && header !== '' ? header : undefined;
}

function buildAuthorizationFor(
  table: RoutingTable,
  keys: RuntimeKeyDirectory,
): (baseUrl: string) => string | undefined {
  const auth = new RuntimeAuthorization(table, keys);
  return (baseUrl) => auth.headerFor(baseUrl);
}

export type { Served } from './forward/served.ts';
export type { RequestContext } from './forward/types.ts';
