// build(opts): the gateway's fastify app, without listening (server.ts listens).

import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import { GATEWAY_CACHE_REPORT_PATH } from '#api';
import { buildCacheReport } from './cache-report/build.ts';
import { monotonicClock, type Clock } from '#kube/clock.ts';
import type { DiscoveryIssue } from './discovery/build-table.ts';
import { buildErrorBody, GatewayError } from './errors/index.ts';
import { Gateway, type GatewayOptions } from './gateway.ts';
import { KvIndexFleet } from './kv-index/fleet.ts';
import { registerKvIndexMetrics } from './kv-index/metrics.ts';
import { buildSoloPeers } from './fleet/peers.ts';
import { TierPosition } from './fleet/tier-position.ts';
import { Drain } from './lifecycle/drain.ts';
import { buildMetrics, type GatewayMetrics } from './metrics/index.ts';
import type { CacheReport } from './policies/index.ts';
import { answerClientError, answerConnect, answerFrameworkError } from './request/client-error.ts';
import { DEFAULT_CLIENT_TIMEOUTS, type ClientTimeouts } from './request/client-timeouts.ts';
import { registerEarlyNotFound } from './request/early-not-found.ts';
import { registerJsonBodyParser } from './request/json-body.ts';
import { newRequestId } from './request/request-id.ts';
import { registerReuseStoreMetrics } from './reuse/metrics.ts';
import { GENERATION_ROUTES } from './request/routes.ts';
import { RedisResultStore, type RedisStoreOptions } from './reuse/redis-store.ts';
import { listEndpointStates } from './routing/endpoint-state.ts';
import { RuntimeLoadEvents } from './endpoints/load-events.ts';
import { openTierLoad, type LoadExchangeSettings } from './fleet/tier-load.ts';
import { RuntimeLoadPoller } from './endpoints/runtime-load.ts';
import type { RuntimeLoad } from './endpoints/book.ts';
import { MemoryRateLimiter, type RateLimiter } from './tenancy/limiter.ts';
import { RefusalMemoLimiter } from './tenancy/refusal-memo.ts';
import { buildAuthenticateHook } from './tenancy/request-hooks.ts';
import { RedisRateLimiter } from './tenancy/redis-limiter.ts';
import { OPEN_DIRECTORY, type Tenant, type TenantDirectory } from './tenancy/tenant.ts';
import { buildNodeSink } from './upstream/sink.ts';
import { statusPlugin } from './status/index.ts';
import type { QualificationView } from './discovery/qualification-view.ts';
import type { RequestTracer } from './tracing/types.ts';

declare module 'fastify' {
  interface FastifyInstance {
    gateway: Gateway;
    /** This replica's drain: server.ts begins it on SIGTERM. */
    drain: Drain;
    /** Where status, metrics and probes are served (BuildOptions.separateAdmin); closes with the app. */
    admin: FastifyInstance;
  }
  interface FastifyRequest {
    /** The runtime's cache report in the answer passed on, for the status page (parsed once). */
    cacheReport: CacheReport | null;
    /** The API key's tenant (keys mode), once authenticated. */
    tenant: Tenant | null;
    /** The gateway's error code when it answered with an error itself (GW_...), for the server span. */
    errorCode: string | null;
    /**
     * The generation route that took the request, set by its handler: the hooks read it on every
     * answer, where `routeOptions` builds an object of a dozen fields at each read.
     */
    generationPath: string | null;
  }
}

export interface BuildOptions extends Omit<GatewayOptions, 'metrics'> {
  readonly logger?: FastifyServerOptions['logger'];
  readonly bodyLimitBytes?: number;
  readonly defaultMetrics?: boolean;
  /** Scrape each endpoint's /metrics this often for its queue (0 = off, the default). */
  readonly scrapeIntervalMs?: number;
  /** Share reuse results across replicas through Redis (ignored when `store` is given). */
  readonly redis?: RedisStoreOptions;
  /** More that must hold before /readyz says ready (e.g. the peer list has synced). */
  readonly ready?: () => boolean;
  /**
   * Serve /status, /status.json, /metrics, /healthz and /readyz on `app.admin`, an app of their
   * own for a second listener (server.ts --admin-port), so the API listener serves only the API.
   * Default: all on one app (`app.admin` is the app itself).
   */
  readonly separateAdmin?: boolean;
  /**
   * Who may call: a directory of tenants' keys (`keys` mode: 401 without a valid key), or
   * OPEN_DIRECTORY, the default, which checks nothing and says so on /status, in a metric
   * and in the log at start.
   */
  readonly tenants?: TenantDirectory;
  /** Spans for each generation request (tracing/request-trace.ts); none when absent (tracing off). */
  readonly tracer?: RequestTracer | undefined;
  /** Blocks every KV index of this gateway holds together (kv-index/block-budget.ts); a default when absent. */
  readonly kvIndexMaxBlocks?: number;
  /** How long a client may take to send a request, and a connection may idle (request/client-timeouts.ts). */
  readonly clientTimeouts?: ClientTimeouts;
  /** What discovery left out of the table and why, shown on /status (discovery/source.ts). */
  readonly discoveryIssues?: () => readonly DiscoveryIssue[];
  /** The Qualifications /status plots (discovery/qualification-watcher.ts); none when absent. */
  readonly qualifications?: () => readonly QualificationView[];
  /**
   * Serve the generation API (default true). False in `--mode picker`: Envoy carries the
   * requests and asks the endpoint picker (epp/); this app then serves the admin routes only.
   */
  readonly generationApi?: boolean;
  /** Share the runtimes' load with the other replicas (fleet/load-exchange.ts); each on its own share when absent. */
  readonly loadExchange?: LoadExchangeSettings;
}

export function build(opts: BuildOptions): FastifyInstance {
  const bodyLimit = opts.bodyLimitBytes ?? 64 * 1024 * 1024;
  const timeouts = opts.clientTimeouts ?? DEFAULT_CLIENT_TIMEOUTS;
  const app = Fastify({
    logger: opts.logger ?? false,
    bodyLimit,
    genReqId: newRequestId,
    clientErrorHandler: answerClientError,
    frameworkErrors: answerFrameworkError,
    requestTimeout: timeouts.requestTimeoutMs,
    connectionTimeout: timeouts.connectionTimeoutMs,
  });
  registerEarlyNotFound(app);
  registerJsonBodyParser(app);
  app.server.on('connect', answerConnect);
  const metrics = buildMetrics({
    defaultMetrics: opts.defaultMetrics ?? false,
    endpointStates: () => listEndpointStates(opts.table),
  });
  const clock = opts.clock ?? monotonicClock;
  const load = opts.runtimeLoad
    ? { get: opts.runtimeLoad, start: () => undefined, close: () => undefined }
    : followRuntimeLoad(opts.table, clock, opts.scrapeIntervalMs);
  const runtimeLoad = load.get;
  const redisStore =
    opts.redis && !opts.store ? new RedisResultStore({ logger: app.log, clock, ...opts.redis }) : undefined;
  const store = opts.store ?? redisStore;
  const tenants = opts.tenants ?? OPEN_DIRECTORY;
  const limiter = openLimiter(opts, tenants, clock, app.log);
  const kvIndex = openKvIndex(opts, clock);
  const tierLoad = openTierLoad(opts.loadExchange, opts.peers, metrics, app.log);
  const gateway = new Gateway({
    ...opts,
    ...tierLoad.gatewayOptions,
    kvIndex: kvIndex.fleet,
    // What the gateway sends a runtime is held to what it takes from a client.
    upstream: { maxBodyBytes: bodyLimit, ...opts.upstream },
    clock,
    metrics,
    runtimeLoad,
    ...(store ? { store } : {}),
    limiter,
  });
  reportAuthMode(tenants, metrics, app.log);
  registerKvIndexMetrics(metrics.registry, gateway.kvIndex);
  if (store instanceof RedisResultStore) registerReuseStoreMetrics(metrics.registry, store);
  const drain = new Drain();
  app.decorate('gateway', gateway);
  app.decorate('drain', drain);
  app.decorateRequest('cacheReport', null);
  app.decorateRequest('tenant', null);
  app.decorateRequest('errorCode', null);
  app.decorateRequest('generationPath', null);
  gateway.start();
  load.start();
  tierLoad.start();
  app.addHook('onClose', async () => {
    load.close();
    tierLoad.close();
    await gateway.close();
    if (kvIndex.owned) await kvIndex.fleet.close();
    await redisStore?.close();
  });

  app.setErrorHandler((err: unknown, req, reply) => {
    const gwErr = toGatewayError(err, bodyLimit);
    req.errorCode = gwErr.code;
    if (gwErr.code === 'GW_INTERNAL') req.log.error({ err }, 'unhandled error');
    if (gwErr.retryAfterSeconds !== undefined)
      void reply.header('retry-after', String(gwErr.retryAfterSeconds));
    return reply.code(gwErr.statusCode).send(buildErrorBody(gwErr));
  });
  app.setNotFoundHandler((req, reply) => {
    const err = new GatewayError('GW_NOT_FOUND', { method: req.method, url: req.url });
    return reply.code(err.statusCode).send(buildErrorBody(err));
  });

  // Probes and scrapes come every few seconds: the admin app does not log each one.
  const admin = opts.separateAdmin
    ? Fastify({
        logger: opts.logger ?? false,
        disableRequestLogging: true,
        clientErrorHandler: answerClientError,
        frameworkErrors: answerFrameworkError,
        requestTimeout: timeouts.requestTimeoutMs,
        connectionTimeout: timeouts.connectionTimeoutMs,
      })
    : app;
  app.decorate('admin', admin);
  if (admin !== app) {
    registerEarlyNotFound(admin);
    admin.server.on('connect', answerConnect);
    app.addHook('onClose', async () => admin.close());
  }
  void app.register(statusPlugin, {
    table: opts.table,
    gateway,
    metrics,
    runtimeLoad,
    generationPaths: GENERATION_ROUTES.map(([path]) => path),
    tenants,
    routesOn: admin,
    discoveryIssues: opts.discoveryIssues,
    qualifications: opts.qualifications,
  });
  admin.get('/healthz', () => ({ status: 'ok' }));
  admin.get('/readyz', (_req, reply) => {
    if (drain.draining) return reply.code(503).send({ status: 'draining' });
    // The KV index's first catch-up too: a replica that routes before it guesses (kv-index/readiness.ts).
    const ready = opts.table.ready && (opts.ready?.() ?? true) && gateway.kvReadiness.ready();
    return ready ? { status: 'ready' } : reply.code(503).send({ status: 'not ready' });
  });
  admin.get('/metrics', async (_req, reply) =>
    reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );
  // For the operator's CacheHealthy condition (controllers/deployment/cache-health).
  admin.get(GATEWAY_CACHE_REPORT_PATH, (_req, reply) =>
    reply.header('cache-control', 'no-store').send(
      buildCacheReport({
        routes: opts.table.list(),
        predictions: metrics.predictions,
        kvIndex: gateway.kvIndex.status(),
        admissionOf: (deployment) => gateway.admission.loadOf(deployment),
        wakingOf: (deployment) => gateway.wakeHolds.heldOf(deployment),
        viewOf: (endpoint) => gateway.viewOf(endpoint),
        runtimeLoad,
      }),
    ),
  );
  // Every API route needs a tenant's key in keys mode; the admin routes are on their own port.
  const apiRoute = tenants.mode === 'keys' ? { onRequest: buildAuthenticateHook(tenants) } : {};
  const generationRoute =
    tenants.mode === 'keys' ? { onRequest: buildAuthenticateHook(tenants, { memo: limiter, metrics }) } : {};
  app.get('/v1/models', apiRoute, (req) => ({
    object: 'list',
    // A name served by a weighted split is one model.
    data: [
      ...new Set(
        opts.table
          .list()
          .filter((r) => !req.tenant || req.tenant.deployments.has(r.deployment))
          .map((r) => r.model),
      ),
    ].map((id) => ({ id, object: 'model', created: 0, owned_by: 'cacheroute' })),
  }));

  for (const [path, kind] of opts.generationApi === false ? [] : GENERATION_ROUTES) {
    app.post(path, generationRoute, async (req: FastifyRequest, reply: FastifyReply) => {
      req.generationPath = path;
      const trace = opts.tracer?.start(path, req.headers);
      const abort = new AbortController();
      // Counted until the response closes (a stream's last byte, or the client going away).
      const leave = drain.draining ? undefined : drain.enter();
      // One listener a request: each costs an allocation and a removal on every answer.
      reply.raw.once('close', () => {
        leave?.();
        // The client went away before the response ended: abort the upstream request.
        if (!reply.raw.writableFinished) abort.abort();
        trace?.end(reply.raw.statusCode, req.errorCode ?? undefined);
      });
      if (!leave)
        throw new GatewayError(
          'GW_DRAINING',
          { subject: 'This gateway replica', retryAfterSeconds: 1 },
          { retryAfterSeconds: 1 },
        );
      const served = await gateway.serve({
        kind,
        path,
        id: req.id,
        body: req.body,
        headers: req.headers,
        signal: abort.signal,
        openSink: () => {
          reply.hijack();
          return buildNodeSink(reply.raw);
        },
        log: req.log,
        ...(req.tenant ? { tenant: req.tenant } : {}),
        setHeader: (name, value) => reply.raw.setHeader(name, value),
        trace,
      });
      if (served.kind === 'streamed') return reply;
      req.cacheReport = served.report ?? null;
      return reply.code(served.status).headers(served.headers).type(served.contentType).send(served.body);
    });
  }

  // A draining replica tells keep-alive clients to reconnect (to a replica that takes traffic).
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (drain.draining) void reply.header('connection', 'close');
    done(null, payload);
  });

  app.addHook('onResponse', (req, reply, done) => {
    metrics.requests.inc({
      model: labelServedModel(opts.table, req.body),
      route: req.generationPath ?? req.routeOptions.url ?? 'unknown',
      code: String(reply.statusCode),
    });
    if (tenants.mode === 'keys')
      metrics.tenantRequests.inc({ tenant: req.tenant?.id ?? '', code: String(reply.statusCode) });
    done();
  });
  return app;
}

/**
 * The request's model as a metric label when the table serves it, else '': a label from what
 * a client sent, unchecked, would grow a series for every name anyone makes up.
 */
function labelServedModel(table: BuildOptions['table'], body: unknown): string {
  const model = (body as { model?: unknown } | null | undefined)?.model;
  return typeof model === 'string' && table.candidates(model).length > 0 ? model : '';
}

/**
 * Each runtime's load: pushed by its load publisher where that is fresh, else the last
 * scrape of its /metrics (every `scrapeIntervalMs`; none when absent).
 */
function followRuntimeLoad(
  table: BuildOptions['table'],
  clock: Clock,
  scrapeIntervalMs: number | undefined,
): { get: (id: string) => RuntimeLoad | undefined; start(): void; close(): void } {
  const poller = scrapeIntervalMs
    ? new RuntimeLoadPoller({ table, clock, intervalMs: scrapeIntervalMs })
    : undefined;
  const events = new RuntimeLoadEvents({ clock });
  events.sync(table.list());
  let follow: NodeJS.Timeout | undefined;
  return {
    get: (id) => events.get(id) ?? poller?.get(id),
    start() {
      follow = setInterval(() => events.sync(table.list()), 1000).unref();
      poller?.start();
    },
    close() {
      poller?.stop();
      clearInterval(follow);
      events.close();
    },
  };
}

/** The KV indexes given, or made here with this app's block budget (then closed after the gateway). */
function openKvIndex(opts: BuildOptions, clock: Clock): { fleet: KvIndexFleet; owned: boolean } {
  if (opts.kvIndex) return { fleet: opts.kvIndex, owned: false };
  const budget = opts.kvIndexMaxBlocks ? { maxBlocks: opts.kvIndexMaxBlocks } : {};
  return { fleet: new KvIndexFleet({ clock, ...budget }), owned: true };
}

/**
 * The limiter that counts tenants' requests: the one given; with Redis, every replica counts
 * into the same windows; else this replica counts its share in memory. Behind the memo that
 * refuses a refused tenant again before its next body is parsed.
 */
function openLimiter(
  opts: BuildOptions,
  tenants: TenantDirectory,
  clock: Clock,
  log: FastifyBaseLogger,
): RefusalMemoLimiter {
  const tier = new TierPosition(opts.peers ?? buildSoloPeers());
  const counting: RateLimiter =
    opts.limiter ??
    (opts.redis && tenants.mode === 'keys'
      ? new RedisRateLimiter({ url: opts.redis.url, clock, logger: log })
      : new MemoryRateLimiter(clock, (total) => tier.shareOf(total)));
  return new RefusalMemoLimiter(counting, clock);
}

/** Open mode is loud: a metric, and a warning at start. */
function reportAuthMode(tenants: TenantDirectory, metrics: GatewayMetrics, log: FastifyBaseLogger): void {
  metrics.authOpen.set(tenants.mode === 'open' ? 1 : 0);
  if (tenants.mode === 'open')
    log.warn(
      'API keys are not checked (--auth open): anyone who reaches the API port may call every model; ' +
        'declare Tenants and run with --auth keys',
    );
}

function toGatewayError(err: unknown, bodyLimit: number): GatewayError {
  if (err instanceof GatewayError) return err;
  const e = err as { statusCode?: unknown; code?: unknown; message?: unknown };
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return new GatewayError('GW_PAYLOAD_TOO_LARGE', { limitBytes: bodyLimit });
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500)
    return new GatewayError('GW_BAD_REQUEST', {
      detail: `body: ${typeof e.message === 'string' ? e.message : 'unreadable request'}`,
    });
  return new GatewayError('GW_INTERNAL', {}, { cause: err });
}
