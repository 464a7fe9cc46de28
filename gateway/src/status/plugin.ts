// GET /status (HTML for a person), GET /status?part=main (the refreshed
// fragment), GET /status.json (the same view, zod-typed), and the hooks that
// record what each endpoint answered. The hooks go on the app that serves the
// API; the routes on `routesOn` (the admin listener) where it is separate.
//
// The hooks must see the generation routes, which live in the root context:
// the plugin skips fastify's encapsulation (what fastify-plugin does).
// Answers are recorded in onResponse, once per request, from the reply's
// endpoint header (streamed answers set it before their head is sent, see
// upstream/sink.ts) and the runtime's cache report the gateway parsed
// (request.cacheReport); onSend keeps an error answer's body for its message.
// No per-request state beyond that: the hooks run on every request.

import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { RuntimeLoad } from '../endpoints/book.ts';
import type { GatewayMetrics } from '../metrics/index.ts';
import type { RoutingTable } from '../routing/table.ts';
import type { TenantDirectory } from '../tenancy/tenant.ts';
import type { DiscoveryIssue } from '../discovery/build-table.ts';
import { ENDPOINT_HEADER } from '../forward/served.ts';
import { REUSED_HEADER } from '../picker/reused.ts';
import { ActivityRecorder, type ErrorRecord } from './activity.ts';
import { renderStatusMain, renderStatusPage, STATUS_CSP } from './html.ts';
import { collectStatusSnapshot, type StatusGateway } from './snapshot.ts';
import { buildStatusView, type StatusView } from './view.ts';
import type { QualificationView } from '../discovery/qualification-view.ts';

export interface StatusPluginOptions {
  readonly table: RoutingTable;
  readonly gateway: StatusGateway;
  readonly metrics: GatewayMetrics;
  readonly runtimeLoad?: ((endpointId: string) => RuntimeLoad | undefined) | undefined;
  /** Route paths whose answers are recorded. */
  readonly generationPaths: readonly string[];
  /** Wall-clock ms (shown to people); Date.now by default. */
  readonly wallClock?: () => number;
  /**
   * Where GET /status and /status.json are served: the admin listener (app.ts), so the API
   * listener does not show endpoints and pod addresses. Default: the app the hooks go on.
   */
  readonly routesOn?: FastifyInstance;
  /** Who may call (shown: open mode loudly, tenants and their issues). */
  readonly tenants: TenantDirectory;
  /** What discovery left out of the table, and why. */
  readonly discoveryIssues?: (() => readonly DiscoveryIssue[]) | undefined;
  /** The Qualifications to plot, from discovery's watcher (ADR 0040). */
  readonly qualifications?: (() => readonly QualificationView[]) | undefined;
}

const MESSAGE_LIMIT = 300;

const plugin: FastifyPluginAsync<StatusPluginOptions> = (app: FastifyInstance, opts) => {
  const activity = new ActivityRecorder();
  const wallClock = opts.wallClock ?? Date.now;
  const paths = new Set(opts.generationPaths);
  // Only error answers' bodies: their message goes on the status page.
  const errorBodies = new WeakMap<FastifyRequest, string>();

  app.addHook('onSend', (req, reply, payload, done) => {
    if (reply.statusCode >= 400 && typeof payload === 'string') errorBodies.set(req, payload);
    done(null, payload);
  });
  app.addHook('onResponse', (req, reply, done) => {
    // A generation route's handler names it; one refused before its handler ran (a body that
    // did not parse) is read the dear way.
    const path = req.generationPath ?? req.routeOptions.url ?? '';
    if (paths.has(path) && reply.getHeader(REUSED_HEADER) === undefined)
      record(req, reply.statusCode, {
        endpoint: headerValue(reply.getHeader(ENDPOINT_HEADER)),
        payload: errorBodies.get(req),
      });
    done();
  });

  function record(
    req: FastifyRequest,
    status: number,
    s: { endpoint: string | undefined; payload: string | undefined },
  ): void {
    const at = wallClock();
    if (s.endpoint !== undefined) {
      // The gateway parsed the answer's cache report already (buffered answers only).
      const report = status < 300 ? (req.cacheReport ?? undefined) : undefined;
      activity.recordAnswer({
        endpoint: s.endpoint,
        status,
        ...(report ? { report } : {}),
        ...(status >= 400 ? { error: buildErrorRecord(at, status, s.payload) } : {}),
      });
      return;
    }
    // The gateway answered itself. Only what says something about the deployment: 429 and 5xx.
    if (status !== 429 && status < 500) return;
    const deployment = deploymentOf(opts.table, req.body, req.headers);
    if (deployment) activity.recordGatewayError(deployment, buildErrorRecord(at, status, s.payload));
  }

  const view = async (): Promise<StatusView> =>
    buildStatusView(
      await collectStatusSnapshot(
        {
          table: opts.table,
          gateway: opts.gateway,
          metrics: opts.metrics,
          activity,
          runtimeLoad: opts.runtimeLoad,
          tenants: opts.tenants,
          discoveryIssues: opts.discoveryIssues,
          qualifications: opts.qualifications,
        },
        wallClock(),
      ),
    );

  const routes = opts.routesOn ?? app;
  routes.get('/status.json', async (_req, reply) =>
    reply.header('cache-control', 'no-store').send(await view()),
  );
  routes.get(
    '/status',
    async (req: FastifyRequest<{ Querystring: { part?: string } }>, reply: FastifyReply) => {
      const v = await view();
      const html = req.query.part === 'main' ? renderStatusMain(v) : renderStatusPage(v);
      return reply
        .header('cache-control', 'no-store')
        .header('content-security-policy', STATUS_CSP)
        .header('x-content-type-options', 'nosniff')
        .type('text/html; charset=utf-8')
        .send(html);
    },
  );
  return Promise.resolve();
};

// Hooks registered here apply to the whole app (see the header).
(plugin as unknown as Record<symbol, boolean>)[Symbol.for('skip-override')] = true;
export const statusPlugin = plugin;

function buildErrorRecord(at: number, status: number, payload: string | undefined): ErrorRecord {
  let code = `HTTP_${status}`;
  let message = '';
  try {
    const body = JSON.parse(payload ?? '') as { error?: unknown; message?: unknown; code?: unknown };
    const err = (typeof body.error === 'object' && body.error !== null ? body.error : body) as {
      code?: unknown;
      message?: unknown;
    };
    if (typeof err.code === 'string') code = err.code;
    if (typeof err.message === 'string') message = err.message;
    else if (typeof body.error === 'string') message = body.error;
  } catch {
    message = payload ?? '';
  }
  return { at, status, code, message: message.slice(0, MESSAGE_LIMIT) };
}

function deploymentOf(table: RoutingTable, body: unknown, headers: IncomingHttpHeaders): string | undefined {
  const fromBody = (body as { model?: unknown } | undefined)?.model;
  const header = headers['x-cacheroute-model'];
  const routes = table.list();
  const model =
    typeof fromBody === 'string'
      ? fromBody
      : typeof header === 'string'
        ? header
        : routes.length === 1
          ? routes[0]?.model
          : undefined;
  return model === undefined ? undefined : table.lookup(model)?.deployment;
}

function headerValue(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && typeof v[0] === 'string') return v[0];
  return undefined;
}
