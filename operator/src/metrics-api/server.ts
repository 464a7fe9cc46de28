// The external metrics API (external.metrics.k8s.io/v1beta1) over HTTPS, for the
// API server's aggregator to proxy an HPA's (or KEDA's, or kubectl's) reads to:
//   GET /apis/external.metrics.k8s.io/v1beta1                       discovery
//   GET /apis/external.metrics.k8s.io/v1beta1/namespaces/NS/METRIC?labelSelector=...
// Only the aggregator gets in (front-proxy.ts); what its user may read is the
// API server's call (authorize.ts). Each matching Deployment part is one item.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Logger } from '#kube/logger.ts';
import type { Authorizer } from './authorize.ts';
import {
  EXTERNAL_METRICS,
  LABEL_DEPLOYMENT,
  LABEL_PART,
  METRICS_API_GROUP,
  METRICS_API_VERSION,
  isExternalMetric,
} from './catalogue.ts';
import { readProxiedUser, type FrontProxyConfig } from './front-proxy.ts';
import { matchesSelector, parseLabelSelector } from './label-selector.ts';
import type { Series } from './series.ts';

export interface MetricsApiServerOptions {
  readonly host?: string;
  readonly port: number;
  readonly cert: string;
  readonly key: string;
  readonly frontProxy: FrontProxyConfig;
  readonly authorize: Authorizer;
  /** The series now, or why there are none (the gateway tier unreadable). */
  readonly series: () => Promise<{ ok: true; value: readonly Series[] } | { ok: false; error: string }>;
  readonly logger: Logger;
  readonly now?: () => Date;
}

export interface MetricsApiServer {
  address(): AddressInfo;
  /** New serving certificate, key and front-proxy settings, for the connections made from now on. */
  reload(creds: { cert: string; key: string; frontProxy: FrontProxyConfig }): void;
  close(): Promise<void>;
}

const GROUP_VERSION = `${METRICS_API_GROUP}/${METRICS_API_VERSION}`;
const BASE = `/apis/${GROUP_VERSION}`;
const LIST_PATH = new RegExp(`^${BASE.replaceAll('.', '\\.')}/namespaces/([a-z0-9-]{1,63})/([^/]+)$`);

function send(res: ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  503: 'ServiceUnavailable',
};

function sendStatus(res: ServerResponse, code: number, message: string): void {
  send(res, code, {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: REASONS[code],
    code,
  });
}

/** A resource.Quantity in thousandths, exact enough for any threshold an HPA sets. */
export function formatQuantity(value: number): string {
  const milli = Math.round(value * 1000);
  return milli % 1000 === 0 ? String(milli / 1000) : `${milli}m`;
}

const DISCOVERY = {
  kind: 'APIResourceList',
  apiVersion: 'v1',
  groupVersion: GROUP_VERSION,
  // The API lists metrics by name; it has no fixed resources, as every external metrics server.
  resources: [] as unknown[],
};

export async function startMetricsApiServer(opts: MetricsApiServerOptions): Promise<MetricsApiServer> {
  const now = opts.now ?? (() => new Date());
  let frontProxy = opts.frontProxy;
  const server: Server = createServer(
    {
      cert: opts.cert,
      key: opts.key,
      ca: opts.frontProxy.clientCa,
      // Checked per request, so that a refusal is a Status the caller can read, not a TLS alert.
      requestCert: true,
      rejectUnauthorized: false,
    },
    (req, res) => {
      handle(req, res).catch((err: unknown) => {
        opts.logger.error('metrics API request failed', { error: (err as Error).message });
        if (!res.headersSent) sendStatus(res, 503, `metrics API: ${(err as Error).message}`);
      });
    },
  );

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const socket = req.socket as TLSSocket;
    const peer = socket.getPeerCertificate();
    const user = readProxiedUser(
      frontProxy,
      {
        authorized: socket.authorized,
        commonName: typeof peer.subject?.CN === 'string' ? peer.subject.CN : undefined,
      },
      req.headersDistinct,
    );
    if (!user.ok) return sendStatus(res, 401, user.error);
    if (req.method !== 'GET')
      return sendStatus(res, 405, `${req.method ?? ''} is not served: the metrics API is read-only`);
    const url = new URL(req.url ?? '/', 'https://metrics-api');
    if (url.pathname === BASE || url.pathname === `${BASE}/`) return send(res, 200, DISCOVERY);
    const m = LIST_PATH.exec(url.pathname);
    if (!m) return sendStatus(res, 404, `${url.pathname} is not a path of ${GROUP_VERSION}`);
    const [, namespace = '', metric = ''] = m;
    if (!isExternalMetric(metric))
      return sendStatus(
        res,
        404,
        `no external metric ${metric}: cacheroute serves ${EXTERNAL_METRICS.join(', ')}`,
      );
    const selector = parseLabelSelector(url.searchParams.get('labelSelector') ?? '');
    if (!selector.ok) return sendStatus(res, 400, selector.error);
    const access = await opts.authorize(user.value, { namespace, metric });
    if (!access.allowed)
      return sendStatus(
        res,
        403,
        `${user.value.name} may not list ${metric} of ${GROUP_VERSION} in namespace ${namespace}${access.reason ? `: ${access.reason}` : ''}`,
      );
    const series = await opts.series();
    if (!series.ok) return sendStatus(res, 503, series.error);
    const timestamp = now()
      .toISOString()
      .replace(/\.\d+Z$/, 'Z');
    const items = series.value
      .filter((s) => s.namespace === namespace)
      .map((s) => ({ s, labels: { [LABEL_DEPLOYMENT]: s.deployment, [LABEL_PART]: s.part } }))
      .filter(({ s, labels }) => s.values[metric] !== undefined && matchesSelector(selector.value, labels))
      .map(({ s, labels }) => ({
        metricName: metric,
        metricLabels: labels,
        timestamp,
        value: formatQuantity(s.values[metric] ?? 0),
      }));
    send(res, 200, { kind: 'ExternalMetricValueList', apiVersion: GROUP_VERSION, metadata: {}, items });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    address: () => server.address() as AddressInfo,
    reload(creds) {
      server.setSecureContext({ cert: creds.cert, key: creds.key, ca: creds.frontProxy.clientCa });
      frontProxy = creds.frontProxy;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
