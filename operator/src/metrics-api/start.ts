// The metrics API in the operator process: every replica serves it (not only the
// leader: the aggregator may reach any), from the Deployments in its cache and
// the gateway tier's reports. It starts once the API server's front-proxy
// settings can be read; until then it logs why, every 30 s, and the operator
// runs on (reconciling does not depend on it).
import { readFileSync } from 'node:fs';
import type { DeploymentResource } from '../api/index.ts';
import type { KubeClient } from '../runtime/client.ts';
import type { Logger } from '../runtime/logger.ts';
import type { KubeObject } from '../runtime/objects.ts';
import { Resources } from '../runtime/resources.ts';
import { buildSubjectAccessReviewer } from './authorize.ts';
import { AUTH_CONFIGMAP, parseFrontProxyConfig, type FrontProxyConfig } from './front-proxy.ts';
import { startMetricsApiServer, type MetricsApiServer } from './server.ts';
import { computeSeries } from './series.ts';
import { TierSampler } from './tier-sampler.ts';

export interface MetricsApiOptions {
  readonly host?: string;
  readonly port: number;
  readonly certFile: string;
  readonly keyFile: string;
  /** The gateway's admin address: every replica it resolves to is read. */
  readonly gatewayAdminUrl: string;
  /** A read of the tier serves the requests of this long (default 5 s). */
  readonly maxSampleAgeMs?: number;
}

export interface MetricsApiDeps {
  readonly client: KubeClient;
  readonly deployments: () => readonly DeploymentResource[];
  readonly logger: Logger;
  readonly signal: AbortSignal;
  readonly retryMs?: number;
}

export interface MetricsApi {
  /** The server, once started. */
  readonly server: () => MetricsApiServer | undefined;
  close(): Promise<void>;
}

async function readFrontProxy(
  client: KubeClient,
): Promise<{ ok: true; value: FrontProxyConfig } | { ok: false; error: string }> {
  const where = `${AUTH_CONFIGMAP.namespace}/${AUTH_CONFIGMAP.name}`;
  try {
    const cm = await client.get<KubeObject & { data?: unknown }>(
      Resources.configMaps,
      AUTH_CONFIGMAP.namespace,
      AUTH_CONFIGMAP.name,
    );
    if (!cm)
      return {
        ok: false,
        error: `ConfigMap ${where} not found: the API server runs without the aggregation layer (--requestheader-client-ca-file)`,
      };
    return parseFrontProxyConfig(cm.data);
  } catch (err) {
    return {
      ok: false,
      error: `read ConfigMap ${where}: ${(err as Error).message} (the operator needs the extension-apiserver-authentication-reader Role there)`,
    };
  }
}

export function startMetricsApi(deps: MetricsApiDeps, opts: MetricsApiOptions): MetricsApi {
  const log = deps.logger.child({ component: 'metrics-api' });
  // Read now: a missing file is the operator's configuration, said at start.
  const cert = readFileSync(opts.certFile, 'utf8');
  const key = readFileSync(opts.keyFile, 'utf8');
  const sampler = new TierSampler({
    gatewayAdminUrl: opts.gatewayAdminUrl,
    signal: deps.signal,
    ...(opts.maxSampleAgeMs !== undefined ? { maxAgeMs: opts.maxSampleAgeMs } : {}),
  });
  let server: MetricsApiServer | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const attempt = async (): Promise<void> => {
    const frontProxy = await readFrontProxy(deps.client);
    if (closed) return;
    if (!frontProxy.ok) {
      log.error('metrics API not started', { error: frontProxy.error });
      timer = setTimeout(() => void attempt(), deps.retryMs ?? 30_000);
      return;
    }
    server = await startMetricsApiServer({
      ...(opts.host ? { host: opts.host } : {}),
      port: opts.port,
      cert,
      key,
      frontProxy: frontProxy.value,
      authorize: buildSubjectAccessReviewer(deps.client),
      series: async () => {
        const sample = await sampler.read();
        if (!sample.ok) return { ok: false, error: `the gateway tier is unreadable: ${sample.error}` };
        for (const u of sample.unread) log.warn('gateway replica not read', { replica: u });
        return { ok: true, value: computeSeries(deps.deployments(), sample) };
      },
      logger: log,
    });
    log.info('metrics API serving', { port: server.address().port });
  };
  void attempt().catch((err: unknown) =>
    log.error('metrics API failed to start', { error: (err as Error).message }),
  );

  const close = async (): Promise<void> => {
    closed = true;
    clearTimeout(timer);
    await server?.close();
  };
  // The operator stopping ends it too: an open server would keep the process alive.
  deps.signal.addEventListener('abort', () => void close(), { once: true });
  return { server: () => server, close };
}
