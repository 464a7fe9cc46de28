// Where the routing table comes from, as the command line says: a static
// `--routes file.json`, or discovery from Kubernetes (`--kubeconfig`, default
// $KUBECONFIG, ~/.kube/config, then the pod's service account; `--namespace`
// to narrow the watch). server.ts parses flags with `parseRouteSourceFlags`
// and opens discovery with `openDiscovery`.

import type { Parsed } from '#kube/parsed.ts';
import type { FastifyBaseLogger } from 'fastify';
import { z } from 'zod';
import { parseSecretLocation, type SecretLocation } from '#api/gateway-keys.ts';
import { KubeClient } from '#kube/client.ts';
import { loadClusterCredentials } from '#kube/cluster-credentials.ts';
import { NamespaceListFlag, NamespaceName } from '#kube/namespace-flags.ts';
import { describeError, type LogFields, type Logger } from '#kube/logger.ts';
import type { PeerSet } from '../fleet/peers.ts';
import { StaticRoutingTable, type ModelRoute, type RoutingTable } from '../routing/table.ts';
import { EndpointSlicePeers } from './peer-slices.ts';
import type { TenantDirectory } from '../tenancy/tenant.ts';
import type { RuntimeKeyDirectory } from './runtime-keys.ts';
import { RuntimeKeyWatcher } from './runtime-key-watcher.ts';
import { TenantWatcher } from './tenant-watcher.ts';
import { DiscoveryWatcher } from './watcher.ts';
import { QualificationWatcher } from './qualification-watcher.ts';
import type { QualificationView } from './qualification-view.ts';
import type { DiscoveryIssue } from './build-table.ts';

export const RouteSourceFlags = z
  .object({
    routes: z.string().min(1, 'give a file path').optional(),
    kubeconfig: z.string().min(1, 'give a file path').optional(),
    namespace: NamespaceListFlag,
    // The gateway tier: this replica's Service, its pod name and namespace (the chart sets them).
    'peers-service': z.string().min(1, "give the gateway Service's name").optional(),
    'pod-name': z.string().min(1).optional(),
    'pod-namespace': NamespaceName.optional(),
    // The Secret the operator keeps for the gateway (ADR 0027): NAME in the pod's namespace, or
    // NAMESPACE/NAME. Tenants' key digests and the runtimes' keys come from it alone.
    'keys-secret': z.string().min(1, 'give the Secret the operator keeps for the gateway').optional(),
  })
  .refine((f) => !(f.routes && (f.kubeconfig || f.namespace.length > 0)), {
    message:
      '--routes (a static table) and --kubeconfig/--namespace (discovery) exclude each other; choose one',
    path: ['routes'],
  })
  .refine((f) => !(f.routes && f['peers-service']), {
    message: '--peers-service reads EndpointSlices from Kubernetes: it needs discovery, not --routes',
    path: ['peers-service'],
  })
  .refine((f) => !(f.routes && f['keys-secret']), {
    message: '--keys-secret reads keys from Kubernetes: it needs discovery, not --routes',
    path: ['keys-secret'],
  })
  .refine((f) => f.routes || f['keys-secret'], {
    message:
      "required with discovery: the Secret the operator keeps for the gateway (the operator's --gateway-keys-secret), NAME in --pod-namespace or NAMESPACE/NAME",
    path: ['keys-secret'],
  })
  .refine((f) => !f['peers-service'] || (f['pod-name'] && f['pod-namespace']), {
    message:
      '--peers-service needs --pod-name and --pod-namespace (or $POD_NAME and $POD_NAMESPACE from the downward API)',
    path: ['peers-service'],
  });

/** The gateway tier's members come from this Service's EndpointSlices. */
export interface PeerSource {
  readonly service: string;
  readonly namespace: string;
  readonly self: string;
}

export type RouteSource =
  | { readonly kind: 'static'; readonly routes: string }
  | {
      readonly kind: 'discovery';
      readonly kubeconfig?: string;
      readonly namespaces: readonly string[];
      readonly peers?: PeerSource;
      /** The Secret the operator keeps for the gateway: Tenants' key digests, runtimes' keys. */
      readonly keysSecret: SecretLocation;
    };

export type { Parsed };

/** Flags → where routes come from; an error names the flag and what to change. */
export function parseRouteSourceFlags(values: Readonly<Record<string, unknown>>): Parsed<RouteSource> {
  const r = RouteSourceFlags.safeParse(values);
  if (!r.success) return { ok: false, error: formatFlagIssues(r.error) };
  const f = r.data;
  if (f.routes) return { ok: true, value: { kind: 'static', routes: f.routes } };
  const service = f['peers-service'];
  const self = f['pod-name'];
  const namespace = f['pod-namespace'];
  const keysSecret = parseSecretLocation(f['keys-secret'] ?? '', namespace);
  if (!keysSecret.ok) return { ok: false, error: `--keys-secret: ${keysSecret.error}` };
  return {
    ok: true,
    value: {
      kind: 'discovery',
      namespaces: f.namespace,
      keysSecret: keysSecret.value,
      ...(f.kubeconfig ? { kubeconfig: f.kubeconfig } : {}),
      ...(service && self && namespace ? { peers: { service, namespace, self } } : {}),
    },
  };
}

export function formatFlagIssues(error: z.ZodError): string {
  return error.issues
    .map((i) => {
      const flag = typeof i.path[0] === 'string' ? `--${i.path[0]}` : 'flags';
      return `${flag}: ${i.message}`;
    })
    .join('\n');
}

export interface Discovery {
  /** Discovery: not ready until the first sync. server.ts hands it to build(). */
  readonly table: RoutingTable;
  /** Tenants and their keys, when discovery was asked for them (--auth keys). */
  readonly tenants?: TenantDirectory;
  /** The runtimes' own API keys (discovery only; a --routes table names runtimes without keys). */
  readonly runtimeKeys?: RuntimeKeyDirectory;
  /** The gateway tier, when a peer Service was named; `synced` gates readiness. */
  readonly peers?: PeerSet & { synced(): boolean };
  /** What discovery leaves out of the table right now, and why (for /status); none with --routes. */
  issues(): readonly DiscoveryIssue[];
  /** The Qualifications /status plots (discovery only; none with --routes). */
  qualifications(): readonly QualificationView[];
  /** Starts the informers (discovery); logs through the app's logger. */
  start(log: FastifyBaseLogger): void;
  close(): Promise<void>;
}

/** The table and its lifecycle, for either source; `loadStatic` reads a --routes file. */
export async function openRouteSource(
  source: RouteSource,
  loadStatic: (path: string) => ModelRoute[],
  opts: { readonly tenants?: boolean } = {},
): Promise<Discovery> {
  if (source.kind === 'discovery') return openDiscovery(source, opts);
  const table = new StaticRoutingTable(loadStatic(source.routes));
  return {
    table,
    issues: () => [],
    qualifications: () => [],
    start: () => undefined,
    close: () => Promise.resolve(),
  };
}

export async function openDiscovery(
  source: Extract<RouteSource, { kind: 'discovery' }>,
  opts: { readonly tenants?: boolean } = {},
): Promise<Discovery> {
  const client = await KubeClient.fromKubeConfig(await loadClusterCredentials(source.kubeconfig), {
    userAgent: 'cacheroute-gateway',
  });
  const table = new StaticRoutingTable();
  table.ready = false;
  let watcher: DiscoveryWatcher | undefined;
  // Made now (the app needs its directory at build), started with the rest.
  const tenantWatcher = opts.tenants
    ? new TenantWatcher({ client, namespaces: source.namespaces, keysSecret: source.keysSecret })
    : undefined;
  // Whatever --auth says: the runtimes take their own key (SGLang's --api-key) from every caller.
  const runtimeKeyWatcher = new RuntimeKeyWatcher({ client, keysSecret: source.keysSecret });
  // For /status only: the Qualifications' plots (ADR 0040).
  const qualificationWatcher = new QualificationWatcher({ client, namespaces: source.namespaces });
  // Made at start(), when the app's logger exists; until then this replica knows no peers.
  let slices: EndpointSlicePeers | undefined;
  const peerSource = source.peers;
  const peers = peerSource && {
    self: peerSource.self,
    members: () => slices?.members() ?? [],
    addresses: () => slices?.addresses() ?? [],
    synced: () => slices?.hasSynced() ?? false,
  };
  return {
    table,
    ...(peers ? { peers } : {}),
    ...(tenantWatcher ? { tenants: tenantWatcher.directory } : {}),
    runtimeKeys: runtimeKeyWatcher.keys,
    issues: () => watcher?.issues ?? [],
    qualifications: () => qualificationWatcher.views(),
    start(log) {
      const logger = adaptFastifyLogger(log);
      watcher = new DiscoveryWatcher({ client, table, namespaces: source.namespaces, logger });
      watcher.start();
      tenantWatcher?.start(logger);
      runtimeKeyWatcher.start(logger);
      qualificationWatcher.start(logger);
      if (peerSource) {
        slices = new EndpointSlicePeers({ client, ...peerSource, logger });
        slices.start();
      }
    },
    async close() {
      await watcher?.stop();
      await tenantWatcher?.stop();
      await runtimeKeyWatcher.stop();
      await qualificationWatcher.stop();
      await slices?.stop();
      await client.close();
    },
  };
}

/** The runtime's Logger interface over fastify's pino logger: one log stream. */
export function adaptFastifyLogger(log: FastifyBaseLogger): Logger {
  const fields = (f: LogFields | undefined): LogFields => {
    const out: LogFields = {};
    for (const [k, v] of Object.entries(f ?? {})) out[k] = v instanceof Error ? describeError(v) : v;
    return out;
  };
  return {
    debug: (msg, f) => log.debug(fields(f), msg),
    info: (msg, f) => log.info(fields(f), msg),
    warn: (msg, f) => log.warn(fields(f), msg),
    error: (msg, f) => log.error(fields(f), msg),
    child: (f) => adaptFastifyLogger(log.child(fields(f))),
    isEnabled: (level) => isPinoLevelEnabled(log.level, level),
  };
}

const PINO_LEVELS: Readonly<Record<string, number>> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
  silent: Infinity,
};

function isPinoLevelEnabled(current: string, level: string): boolean {
  return (PINO_LEVELS[level] ?? 0) >= (PINO_LEVELS[current] ?? 30);
}
