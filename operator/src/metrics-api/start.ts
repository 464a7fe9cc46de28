// The metrics API in the operator process: every replica serves it (not only the
// leader: the aggregator may reach any), from the Deployments in its cache and
// the gateway tier's reports. It starts once the API server's front-proxy
// settings can be read; until then it logs why, every 30 s, and the operator
// runs on (reconciling does not depend on it).
import { readFileSync } from 'node:fs';
import type { DeploymentResource } from '#api';
import type { KubeClient } from '#kube/client.ts';
import type { Logger } from '#kube/logger.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { deepEqual } from '../manager/equal.ts';
import { buildSubjectAccessReviewer } from './authorize.ts';
import { AUTH_CONFIGMAP, parseFrontProxyConfig, type FrontProxyConfig } from './front-proxy.ts';
import { startMetricsApiServer, type MetricsApiServer } from './server.ts';
import { computeSeries, type Series } from './series.ts';
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
  /** The key pair and the front-proxy settings are read again this often (default 60 s). */
  readonly reloadMs?: number;
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
  const readKeyPair = () => ({
    cert: readFileSync(opts.certFile, 'utf8'),
    key: readFileSync(opts.keyFile, 'utf8'),
  });
  // Read now: a missing file is the operator's configuration, said at start.
  let keyPair = readKeyPair();
  const sampler = new TierSampler({
    gatewayAdminUrl: opts.gatewayAdminUrl,
    signal: deps.signal,
    ...(opts.maxSampleAgeMs !== undefined ? { maxAgeMs: opts.maxSampleAgeMs } : {}),
  });
  let server: MetricsApiServer | undefined;
  let frontProxy: FrontProxyConfig | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const later = (fn: () => Promise<void>, ms: number): void => {
    if (!closed) timer = setTimeout(() => void fn(), ms);
  };

  const series = async (): Promise<{ ok: true; value: Series[] } | { ok: false; error: string }> => {
    const sample = await sampler.read();
    if (!sample.ok) return { ok: false, error: `the gateway tier is unreadable: ${sample.error}` };
    // A replica unread would undercount the tier's load, and an autoscaler scale down on it.
    if (sample.unread.length > 0)
      return {
        ok: false,
        error: `gateway replicas unread (the load would be undercounted): ${sample.unread.join('; ')}`,
      };
    return { ok: true, value: computeSeries(deps.deployments(), sample) };
  };

  const start = async (): Promise<void> => {
    const read = await readFrontProxy(deps.client);
    if (!read.ok) throw new Error(read.error);
    frontProxy = read.value;
    const started = await startMetricsApiServer({
      ...(opts.host ? { host: opts.host } : {}),
      port: opts.port,
      ...keyPair,
      frontProxy,
      authorize: buildSubjectAccessReviewer(deps.client),
      series,
      logger: log,
    });
    if (closed) return started.close();
    server = started;
    log.info('metrics API serving', { port: started.address().port });
  };

  // Renewed certificates (cert-manager, a Secret rotated) and a new front-proxy CA are read again.
  const refresh = async (): Promise<void> => {
    try {
      const pair = readKeyPair();
      const read = await readFrontProxy(deps.client);
      if (!read.ok) throw new Error(read.error);
      if (
        server &&
        (JSON.stringify(pair) !== JSON.stringify(keyPair) || !deepEqual(read.value, frontProxy))
      ) {
        server.reload({ ...pair, frontProxy: read.value });
        keyPair = pair;
        frontProxy = read.value;
        log.info('metrics API credentials reloaded');
      }
    } catch (err) {
      log.warn('metrics API credentials not reloaded: the ones in use stay', {
        error: (err as Error).message,
      });
    }
    later(refresh, opts.reloadMs ?? 60_000);
  };

  const attempt = async (): Promise<void> => {
    try {
      await start();
      later(refresh, opts.reloadMs ?? 60_000);
    } catch (err) {
      log.error('metrics API not started; trying again', { error: (err as Error).message });
      later(attempt, deps.retryMs ?? 30_000);
    }
  };
  void attempt();

  const close = async (): Promise<void> => {
    closed = true;
    clearTimeout(timer);
    await server?.close();
  };
  // The operator stopping ends it too: an open server would keep the process alive.
  deps.signal.addEventListener('abort', () => void close(), { once: true });
  return { server: () => server, close };
}
