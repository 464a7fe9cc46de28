// The operator process: `node operator/src/main.ts [flags]` (`make run-operator`).
import { z } from 'zod';
import { parseSecretLocation } from '#api/gateway-keys.ts';
import type { RuntimeIngress } from './controllers/deployment/network-policy.ts';
import { parsePodPeer } from './controllers/deployment/pod-peer.ts';
import { formatDecimal } from './controllers/task/attempt/budget.ts';
import { parseDailyCap } from './controllers/task/daily-cap.ts';
import { DEFAULT_OPENROUTER_BASE_URL } from './controllers/task/reconciler.ts';
import type { MetricsApiOptions } from './metrics-api/start.ts';
import { startOperator } from './operator.ts';
import {
  DEFAULT_MODEL_CACHE_NODE_ROOT,
  DEFAULT_MODEL_CACHE_SIZE,
  type ModelCacheConfig,
} from './controllers/deployment/model-cache/objects.ts';
import { createLogger } from '#kube/logger.ts';
import { NamespaceListFlag } from '#kube/namespace-flags.ts';
import { DEFAULT_MOONCAKE_IMAGE } from './controllers/deployment/l3/mooncake.ts';
import { startTracing } from '#kube/tracing.ts';
import { parseTracingConfig } from '#kube/tracing-config.ts';
import type { PickerService } from './controllers/inferencepool/desired.ts';

// A NetworkPolicy peer, `namespace=NS[,LABEL=VALUE...]` (pod-peer.ts).
const PodPeerFlag = z.string().transform((text, ctx) => {
  const peer = parsePodPeer(text);
  if (peer.ok) return peer.value;
  ctx.addIssue({ code: 'custom', message: peer.error });
  return z.NEVER;
});

const INGRESS_FLAGS = [
  'runtime-ingress-gateway',
  'runtime-ingress-operator',
  'runtime-ingress-metrics',
] as const;

const Flags = z
  .object({
    kubeconfig: z.string().optional(),
    // The namespaces to watch; none: all.
    namespace: NamespaceListFlag,
    'metrics-port': z.coerce.number().int().min(0).max(65535).default(8080),
    'metrics-host': z.string().default('0.0.0.0'),
    'leader-elect': z.enum(['true', 'false']).default('true'),
    'lease-namespace': z.string().default('cacheroute-system'),
    'lease-name': z.string().default('cacheroute-operator'),
    'log-level': z.enum(['debug', 'info', 'warn', 'error']).default('info'),
    concurrency: z.coerce.number().int().min(1).max(64).default(4),
    'openrouter-base-url': z.url({ protocol: /^https?$/ }).default(DEFAULT_OPENROUTER_BASE_URL),
    // Paid calls are opt-in: without it, Tasks with an openrouter target fail TargetNotRoutable.
    'allow-paid-calls': z.enum(['true', 'false']).default('false'),
    // What each namespace may spend on paid calls per UTC day (daily-cap.ts), e.g. "10 USD".
    'paid-calls-daily-cap': z
      .string()
      .default('10 USD')
      .transform((text, ctx) => {
        const cap = parseDailyCap(text);
        if (cap.ok) return cap.value;
        ctx.addIssue({ code: 'custom', message: cap.error });
        return z.NEVER;
      }),
    // The chart's endpoint picker (gateway.mode picker or both): an InferencePool per Deployment
    // names this Service (controllers/inferencepool); unset: no InferencePools.
    'inference-pool-picker-service': z
      .string()
      .regex(/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/, 'a Service name')
      .optional(),
    'inference-pool-picker-namespace': z.string().min(1).optional(),
    'inference-pool-picker-port': z.coerce.number().int().min(1).max(65535).default(9002),
    // A NetworkPolicy per Deployment admitting only its own pods and these peers to its SGLang pods.
    'runtime-network-policy': z.enum(['true', 'false']).default('false'),
    // The gateway's pods (HTTP and event ports), the operator's (HTTP), and Prometheus (HTTP, /metrics).
    'runtime-ingress-gateway': PodPeerFlag.optional(),
    'runtime-ingress-operator': PodPeerFlag.optional(),
    'runtime-ingress-metrics': PodPeerFlag.optional(),
    // Cache health (the CacheHealthy condition): the runtimes' /metrics are read this often; 0: never.
    // At most half the 5-minute window, so a window always holds two readings.
    'cache-health-period-seconds': z.coerce.number().int().min(0).max(150).default(30),
    // The gateway's admin address (http://HOST:PORT): its replicas' routing predictions, compared
    // with what the runtimes report. Every address HOST resolves to is read (a headless Service: all).
    'gateway-admin-url': z.url({ protocol: /^http$/ }).optional(),
    // The external metrics API (external.metrics.k8s.io) for autoscalers; 0: not served. It
    // reads the gateway tier (--gateway-admin-url) and serves HTTPS with this key pair.
    'metrics-api-port': z.coerce.number().int().min(0).max(65535).default(0),
    'metrics-api-host': z.string().default('0.0.0.0'),
    'metrics-api-tls-cert-file': z.string().min(1).optional(),
    'metrics-api-tls-key-file': z.string().min(1).optional(),
    // Download sources (model-cache/, ADR 0016): the image of the fetch Job (the operator's own:
    // it holds the fetcher), the cache volume's storage class when a spec names none (unset: the
    // cluster's default class) and its size when a spec gives no sizeLimit. No image: not fetched.
    'model-fetch-image': z.string().min(1).optional(),
    'model-cache-storage-class': z.string().min(1).optional(),
    'model-cache-size': z
      .string()
      .regex(/^[0-9]+(\.[0-9]+)?([KMGTPE]i?)?$/, { message: 'a quantity, e.g. 200Gi' })
      .default(DEFAULT_MODEL_CACHE_SIZE),
    // Node caches (download.cache Node, ADR 0019): the directory on each node they live under.
    'model-cache-node-root': z
      .string()
      .regex(/^\/[^\n]*$/, { message: 'an absolute path on the nodes, e.g. /var/lib/cacheroute/models' })
      .default(DEFAULT_MODEL_CACHE_NODE_ROOT),
    // The node directories a Deployment's hostPath model source may name, comma-separated
    // (host-path-roots.ts); unset: --model-cache-node-root only; empty: none.
    'host-path-roots': z
      .string()
      .transform((text) => text.split(',').filter((r) => r !== ''))
      .pipe(
        z.array(
          z.string().regex(/^\/[^\n,]*$/, {
            message:
              'absolute paths on the nodes, comma-separated, e.g. /var/lib/cacheroute/models,/data/models',
          }),
        ),
      )
      .optional(),
    // HiCache's mooncake L3 (l3/mooncake.ts, ADR 0041): the image of the Mooncake stores the operator
    // runs (mooncake_master and mooncake_client on its PATH). Default: the samples' SGLang image.
    'mooncake-image': z.string().min(1).default(DEFAULT_MOONCAKE_IMAGE),
    // The one Secret the operator keeps for the gateway, namespace/name (ADR 0027): the Tenants'
    // key digests and the runtimes' keys, which the gateway reads by name; unset: not kept.
    'gateway-keys-secret': z
      .string()
      .transform((text, ctx) => {
        const where = parseSecretLocation(text);
        if (where.ok) return where.value;
        ctx.addIssue({ code: 'custom', message: where.error });
        return z.NEVER;
      })
      .optional(),
    // Hosts a fetched source's endpoint may reach over plain http:// (endpoint-transport.ts); by
    // default none: a token or store keys never cross the network in clear.
    'insecure-endpoint-hosts': z
      .array(z.string())
      .default([])
      .transform((list) => [
        ...new Set(
          list
            .flatMap((h) => h.split(','))
            .map((h) => h.trim().toLowerCase())
            .filter((h) => h !== ''),
        ),
      ])
      .pipe(
        z.array(
          z.string().regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$|^\[[0-9a-f:.]+\]$/, {
            error: (iss) =>
              `${JSON.stringify(iss.input)} is not a host name (a DNS name or an IP address, without scheme or port)`,
          }),
        ),
      ),
  })
  .superRefine((f, ctx) => {
    if (f['metrics-api-port'] > 0)
      for (const flag of [
        'metrics-api-tls-cert-file',
        'metrics-api-tls-key-file',
        'gateway-admin-url',
      ] as const)
        if (f[flag] === undefined)
          ctx.addIssue({
            code: 'custom',
            path: [flag],
            message:
              flag === 'gateway-admin-url'
                ? 'required with --metrics-api-port: the metrics are the gateway tier’s'
                : 'required with --metrics-api-port: the API server reaches the metrics API over HTTPS',
          });
    if (
      f['inference-pool-picker-service'] !== undefined &&
      f['inference-pool-picker-namespace'] === undefined
    )
      ctx.addIssue({
        code: 'custom',
        path: ['inference-pool-picker-namespace'],
        message: "required with --inference-pool-picker-service: the picker Service's namespace",
      });
    const on = f['runtime-network-policy'] === 'true';
    for (const flag of INGRESS_FLAGS) {
      if (!on && f[flag] !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: [flag],
          message: 'given without --runtime-network-policy=true: no NetworkPolicy is made to admit it',
        });
    }
    for (const flag of ['runtime-ingress-gateway', 'runtime-ingress-operator'] as const) {
      if (on && f[flag] === undefined)
        ctx.addIssue({
          code: 'custom',
          path: [flag],
          message: `required with --runtime-network-policy=true: the namespace and labels of the ${flag.slice('runtime-ingress-'.length)} pods (namespace=NS,LABEL=VALUE,...)`,
        });
    }
  });
export type OperatorFlags = z.infer<typeof Flags>;

// Flags that may be given more than once; each occurrence adds to the list.
const REPEATABLE: ReadonlySet<string> = new Set(['namespace', 'insecure-endpoint-hosts']);

const USAGE = `usage: operator [--kubeconfig PATH] [--namespace NS[,NS...]]... [--metrics-port 8080] [--metrics-host 0.0.0.0]
  [--leader-elect true|false] [--lease-namespace cacheroute-system] [--lease-name cacheroute-operator]
  [--log-level debug|info|warn|error] [--concurrency 4] [--openrouter-base-url https://openrouter.ai/api/v1]
  [--allow-paid-calls false|true] [--paid-calls-daily-cap '10 USD']
  [--runtime-network-policy false|true --runtime-ingress-gateway namespace=NS,LABEL=VALUE,...
   --runtime-ingress-operator namespace=NS,LABEL=VALUE,... [--runtime-ingress-metrics namespace=NS,LABEL=VALUE,...]]
  [--cache-health-period-seconds 30] [--gateway-admin-url http://HOST:PORT]
  [--metrics-api-port 6443 --metrics-api-tls-cert-file FILE --metrics-api-tls-key-file FILE [--metrics-api-host 0.0.0.0]]
  [--model-fetch-image IMAGE [--model-cache-storage-class CLASS] [--model-cache-size 200Gi] [--model-cache-node-root DIR]
   [--insecure-endpoint-hosts HOST[,HOST...]]...]
  [--host-path-roots DIR[,DIR...] (default: the --model-cache-node-root)]
  [--inference-pool-picker-service NAME --inference-pool-picker-namespace NS [--inference-pool-picker-port 9002]]
  [--gateway-keys-secret NAMESPACE/NAME]`;

export function parseFlags(
  argv: readonly string[],
): { ok: true; value: OperatorFlags } | { ok: false; error: string } {
  const raw: Record<string, string | string[]> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (!arg.startsWith('--')) return { ok: false, error: `unexpected argument ${arg}` };
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const value = eq < 0 ? argv[++i] : arg.slice(eq + 1);
    if (!(name in Flags.shape)) return { ok: false, error: `unknown flag --${name}` };
    if (value === undefined) return { ok: false, error: `--${name} needs a value` };
    const seen = raw[name];
    raw[name] = REPEATABLE.has(name) ? [...(Array.isArray(seen) ? seen : []), value] : value;
  }
  const parsed = Flags.safeParse(raw);
  if (!parsed.success) {
    return {
      ok: false,
      // The path's first element is the flag (a list flag adds the item's index: not shown).
      error: parsed.error.issues.map((i) => `--${String(i.path[0])}: ${i.message}`).join('; '),
    };
  }
  return { ok: true, value: parsed.data };
}

/** The peers the runtimes' NetworkPolicies admit; none (no NetworkPolicy) unless asked for. */
export function runtimeIngressOf(flags: OperatorFlags): RuntimeIngress | undefined {
  const gateway = flags['runtime-ingress-gateway'];
  const operator = flags['runtime-ingress-operator'];
  if (flags['runtime-network-policy'] !== 'true' || !gateway || !operator) return undefined;
  return { gateway, operator, metrics: flags['runtime-ingress-metrics'] };
}

/** Where OpenRouter Tasks go: nowhere unless paid calls were allowed. */
export function paidCallsBaseUrl(flags: OperatorFlags): string | undefined {
  return flags['allow-paid-calls'] === 'true' ? flags['openrouter-base-url'] : undefined;
}

/** The picker Service the InferencePools name; undefined without --inference-pool-picker-service. */
export function pickerOf(flags: OperatorFlags): PickerService | undefined {
  const [name, namespace] = [
    flags['inference-pool-picker-service'],
    flags['inference-pool-picker-namespace'],
  ];
  if (!name || !namespace) return undefined;
  return { name, namespace, port: flags['inference-pool-picker-port'] };
}

/** Download sources' cache and fetch Job; undefined without --model-fetch-image (they are not fetched). */
export function modelCacheOf(flags: OperatorFlags): ModelCacheConfig | undefined {
  const image = flags['model-fetch-image'];
  if (!image) return undefined;
  return {
    fetchImage: image,
    storageClassName: flags['model-cache-storage-class'],
    size: flags['model-cache-size'],
    nodeRoot: flags['model-cache-node-root'],
    insecureEndpointHosts: flags['insecure-endpoint-hosts'],
  };
}

/** The node directories a hostPath model source may name: the flag's, else the node cache root. */
export function hostPathRootsOf(flags: OperatorFlags): readonly string[] {
  return flags['host-path-roots'] ?? [flags['model-cache-node-root']];
}

/** The external metrics API's settings; undefined unless --metrics-api-port was given. */
export function metricsApiOf(flags: OperatorFlags): MetricsApiOptions | undefined {
  const [certFile, keyFile, gatewayAdminUrl] = [
    flags['metrics-api-tls-cert-file'],
    flags['metrics-api-tls-key-file'],
    flags['gateway-admin-url'],
  ];
  if (flags['metrics-api-port'] === 0 || !certFile || !keyFile || !gatewayAdminUrl) return undefined;
  return {
    host: flags['metrics-api-host'],
    port: flags['metrics-api-port'],
    certFile,
    keyFile,
    gatewayAdminUrl,
  };
}

export async function runOperator(flags: OperatorFlags): Promise<number> {
  const logger = createLogger({ level: flags['log-level'], fields: { component: 'operator' } });
  // Off unless OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT is set; the SDK is loaded only then.
  const tracingConfig = parseTracingConfig(process.env, 'cacheroute-operator');
  if (!tracingConfig.ok) {
    process.stderr.write(`operator: ${tracingConfig.error}\n`);
    return 2;
  }
  const config = tracingConfig.value;
  const tracing = config ? await startTracing(config) : undefined;
  const op = await startOperator({
    kubeconfig: flags.kubeconfig,
    namespaces: flags.namespace,
    logger,
    leaderElection:
      flags['leader-elect'] === 'true'
        ? { namespace: flags['lease-namespace'], name: flags['lease-name'] }
        : false,
    http: { host: flags['metrics-host'], port: flags['metrics-port'] },
    concurrency: flags.concurrency,
    openrouterBaseUrl: paidCallsBaseUrl(flags),
    dailyCap: flags['paid-calls-daily-cap'],
    runtimeIngress: runtimeIngressOf(flags),
    cacheHealth: {
      periodMs: flags['cache-health-period-seconds'] * 1000,
      gatewayAdminUrl: flags['gateway-admin-url'],
    },
    metricsApi: metricsApiOf(flags),
    modelCache: modelCacheOf(flags),
    hostPathRoots: hostPathRootsOf(flags),
    mooncakeImage: flags['mooncake-image'],
    picker: pickerOf(flags),
    gatewayKeysSecret: flags['gateway-keys-secret'],
  });
  op.manager.handleSignals();
  const address = op.manager.address();
  logger.info('operator started', {
    namespaces: flags.namespace.length > 0 ? flags.namespace.join(',') : 'all',
    metrics: address ? `${address.address}:${address.port}` : 'off',
    paidCalls:
      flags['allow-paid-calls'] === 'true'
        ? `${flags['openrouter-base-url']}, daily cap ${formatDecimal(flags['paid-calls-daily-cap'].amount)} ${flags['paid-calls-daily-cap'].currency} per namespace`
        : 'off',
    runtimeNetworkPolicy: flags['runtime-network-policy'] === 'true' ? 'on' : 'off',
    modelFetch: flags['model-fetch-image'] ?? 'off (download sources are not fetched)',
    hostPathRoots: hostPathRootsOf(flags).join(',') || 'none',
    gatewayKeysSecret: flags['gateway-keys-secret']
      ? `${flags['gateway-keys-secret'].namespace}/${flags['gateway-keys-secret'].name}`
      : 'not kept',
    tracing: config ? config.url : 'off',
    inferencePools: flags['inference-pool-picker-service']
      ? `picker ${flags['inference-pool-picker-namespace'] ?? ''}/${flags['inference-pool-picker-service']}:${flags['inference-pool-picker-port']}`
      : 'off',
    cacheHealth:
      flags['cache-health-period-seconds'] === 0
        ? 'off'
        : `every ${flags['cache-health-period-seconds']} s, gateway ${flags['gateway-admin-url'] ?? 'not read'}`,
    metricsApi:
      flags['metrics-api-port'] > 0 ? `${flags['metrics-api-host']}:${flags['metrics-api-port']}` : 'off',
  });
  const exit = await op.manager.wait();
  await op.client.close();
  await tracing?.shutdown();
  logger.info('operator stopped', { reason: exit.reason });
  // Losing the lease ends the process: a fresh start rejoins the election with empty caches.
  return exit.reason === 'leadership-lost' ? 1 : 0;
}

if (import.meta.main) {
  const flags = parseFlags(process.argv.slice(2));
  if (!flags.ok) {
    process.stderr.write(`operator: ${flags.error}\n${USAGE}\n`);
    process.exit(2);
  }
  process.exitCode = await runOperator(flags.value);
}
