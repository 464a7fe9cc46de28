// build(opts): the gateway's fastify app, without listening (server.ts listens).

import { randomUUID } from 'node:crypto';
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import { systemClock } from './clock.ts';
import { buildErrorBody, GatewayError } from './errors.ts';
import { Gateway, type GatewayOptions } from './gateway.ts';
import { registerKvIndexMetrics } from './kv-index/metrics.ts';
import { Drain } from './lifecycle/drain.ts';
import { buildMetrics } from './metrics.ts';
import type { CacheReport } from './policies/index.ts';
import type { RouteKind } from './request/shape.ts';
import { RedisResultStore, type RedisStoreOptions } from './reuse/redis-store.ts';
import { RuntimeLoadEvents } from './endpoints/load-events.ts';
import { RuntimeLoadPoller } from './endpoints/runtime-load.ts';
import { buildNodeSink } from './upstream/sink.ts';
import { statusPlugin } from './status/index.ts';

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
}

const GENERATION_ROUTES: readonly [string, RouteKind][] = [
  ['/v1/chat/completions', 'chat'],
  ['/v1/completions', 'completion'],
  ['/generate', 'generate'],
];

export function build(opts: BuildOptions): FastifyInstance {
  const bodyLimit = opts.bodyLimitBytes ?? 64 * 1024 * 1024;
  const app = Fastify({ logger: opts.logger ?? false, bodyLimit, genReqId: () => randomUUID() });
  const metrics = buildMetrics({ defaultMetrics: opts.defaultMetrics ?? false, table: opts.table });
  const clock = opts.clock ?? systemClock;
  const poller =
    opts.runtimeLoad || !opts.scrapeIntervalMs
      ? undefined
      : new RuntimeLoadPoller({ table: opts.table, clock, intervalMs: opts.scrapeIntervalMs });
  // Pushed load (the runtimes' load publishers) where it is fresh, else the last scrape.
  const loadEvents = opts.runtimeLoad ? undefined : new RuntimeLoadEvents({ clock });
  const runtimeLoad = opts.runtimeLoad ?? ((id: string) => loadEvents?.get(id) ?? poller?.get(id));
  const followLoad = loadEvents && setInterval(() => loadEvents.sync(opts.table.list()), 1000).unref();
  loadEvents?.sync(opts.table.list());
  const redisStore =
    opts.redis && !opts.store ? new RedisResultStore({ logger: app.log, clock, ...opts.redis }) : undefined;
  const store = opts.store ?? redisStore;
  const gateway = new Gateway({
    ...opts,
    clock,
    metrics,
    runtimeLoad,
    ...(store ? { store } : {}),
  });
  registerKvIndexMetrics(metrics.registry, gateway.kvIndex);
  const drain = new Drain();
  app.decorate('gateway', gateway);
  app.decorate('drain', drain);
  app.decorateRequest('cacheReport', null);
  gateway.start();
  poller?.start();
  app.addHook('onClose', async () => {
    poller?.stop();
    if (followLoad) clearInterval(followLoad);
    loadEvents?.close();
    await gateway.close();
    await redisStore?.close();
  });

  app.setErrorHandler((err: unknown, req, reply) => {
    const gwErr = toGatewayError(err, bodyLimit);
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
    ? Fastify({ logger: opts.logger ?? false, disableRequestLogging: true })
    : app;
  app.decorate('admin', admin);
  if (admin !== app) app.addHook('onClose', async () => admin.close());
  void app.register(statusPlugin, {
    table: opts.table,
    gateway,
    metrics,
    runtimeLoad,
    generationPaths: GENERATION_ROUTES.map(([path]) => path),
    routesOn: admin,
  });
  admin.get('/healthz', () => ({ status: 'ok' }));
  admin.get('/readyz', (_req, reply) => {
    if (drain.draining) return reply.code(503).send({ status: 'draining' });
    const ready = opts.table.ready && (opts.ready?.() ?? true);
    return ready ? { status: 'ready' } : reply.code(503).send({ status: 'not ready' });
  });
  admin.get('/metrics', async (_req, reply) =>
    reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );
  app.get('/v1/models', () => ({
    object: 'list',
    data: opts.table
      .list()
      .map((r) => ({ id: r.model, object: 'model', created: 0, owned_by: 'cacheroute' })),
  }));

  for (const [path, kind] of GENERATION_ROUTES) {
    app.post(path, async (req: FastifyRequest, reply: FastifyReply) => {
      if (drain.draining)
        throw new GatewayError(
          'GW_DRAINING',
          { subject: 'This gateway replica', retryAfterSeconds: 1 },
          { retryAfterSeconds: 1 },
        );
      // Counted until the response closes (a stream's last byte, or the client going away).
      reply.raw.once('close', drain.enter());
      const abort = new AbortController();
      // The client went away before the response ended: abort the upstream request.
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) abort.abort();
      });
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
    const body = req.body as { model?: unknown } | undefined;
    metrics.requests.inc({
      model: typeof body?.model === 'string' ? body.model : '',
      route: req.routeOptions.url ?? 'unknown',
      code: String(reply.statusCode),
    });
    done();
  });
  return app;
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
