import { RUNTIME_API_KEY_LABEL, type DeploymentResource } from '#api';
import type { SecretLocation } from '#api/gateway-keys.ts';
import { buildCachePolicyController } from './controllers/cachepolicy/reconciler.ts';
import { buildTenantController } from './controllers/tenant/reconciler.ts';
import type { PickerService } from './controllers/inferencepool/desired.ts';
import { buildInferencePoolController } from './controllers/inferencepool/reconciler.ts';
import { buildGatewayKeysController, gatewayKeysKey } from './controllers/gateway-keys/reconciler.ts';
import { LABEL_DEPLOYMENT } from './controllers/deployment/meta/labels.ts';
import type { RuntimeIngress } from './controllers/deployment/network-policy.ts';
import type { ModelCacheConfig } from './controllers/deployment/model-cache/objects.ts';
import { buildDeploymentController } from './controllers/deployment/reconciler.ts';
import { buildDeploymentPartController } from './controllers/deploymentpart/reconciler.ts';
import type { DailyCap } from './controllers/task/daily-cap.ts';
import { buildTaskController } from './controllers/task/reconciler.ts';
import { buildQualificationController } from './controllers/qualification/reconciler.ts';
import { LABEL_TASK } from './controllers/task/result.ts';
import { KubeClient } from '#kube/client.ts';
import { loadClusterCredentials } from '#kube/cluster-credentials.ts';
import type { Logger } from '#kube/logger.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Manager, type ManagerOptions } from './manager/manager.ts';
import { Resources } from '#kube/resources.ts';
import { startMetricsApi, type MetricsApi, type MetricsApiOptions } from './metrics-api/start.ts';

export interface OperatorOptions {
  /** A kubeconfig file; unset: in-cluster or $KUBECONFIG. */
  kubeconfig?: string | undefined;
  /**
   * Namespaces to watch (--namespace a,b); unset or empty: all. Everything the operator
   * reads and writes for an object (owned objects, Secrets, ConfigMaps, Leases, Events)
   * is in that object's namespace, so it stays inside these.
   */
  namespaces?: readonly string[] | undefined;
  logger: Logger;
  leaderElection: NonNullable<ManagerOptions['leaderElection']>;
  http: NonNullable<ManagerOptions['http']>;
  concurrency?: number;
  /**
   * Base URL of OpenRouter-shaped Chat Completions (--openrouter-base-url), given only with
   * --allow-paid-calls=true; unset: OpenRouter tasks fail TargetNotRoutable.
   */
  openrouterBaseUrl?: string | undefined;
  /** Each namespace's daily cap on paid calls (--paid-calls-daily-cap); unset: none. */
  dailyCap?: DailyCap | undefined;
  /** Every object is reconciled again this often (default 10 h); benchmarks shorten it. */
  syncPeriodMs?: number;
  /**
   * The peers each Deployment's NetworkPolicy admits to its SGLang pods (--runtime-network-policy
   * and --runtime-ingress-*); unset: no NetworkPolicy, and one made earlier is deleted.
   */
  runtimeIngress?: RuntimeIngress | undefined;
  /** Cache health measurement (--cache-health-period-seconds, --gateway-admin-url); unset: off. */
  cacheHealth?: { periodMs: number; windowMs?: number; gatewayAdminUrl?: string | undefined } | undefined;
  /** The external metrics API for autoscalers (--metrics-api-*); unset: not served. */
  metricsApi?: MetricsApiOptions | undefined;
  /** How often sleeping Deployments' demand is read from the gateway tier (default 2 s). */
  wakePeriodMs?: number;
  /** How long a runtime key outlives its fingerprint's last endpoint in status (default 30 s). */
  runtimeKeyGraceMs?: number;
  /** Download sources' shared cache and fetch Job (--model-fetch-image, …); unset: they are not fetched. */
  modelCache?: ModelCacheConfig | undefined;
  /**
   * The node directories a Deployment's hostPath model source may name (--host-path-roots);
   * unset: the node model cache root only.
   */
  hostPathRoots?: readonly string[] | undefined;
  /** The image of HiCache's Mooncake stores (--mooncake-image, l3/mooncake.ts). */
  mooncakeImage?: string | undefined;
  /**
   * The chart's endpoint picker Service (--inference-pool-picker-*): with it, an InferencePool per
   * Deployment for GIE gateways (controllers/inferencepool); unset: none.
   */
  picker?: PickerService | undefined;
  /** How soon a Deployment is looked at again while InferencePools are not served (default 60 s). */
  inferencePoolRecheckMs?: number;
  /**
   * The Secret the operator keeps for the gateway (--gateway-keys-secret namespace/name):
   * Tenants' key digests and the runtimes' keys, read by the gateway by name (ADR 0027);
   * unset: not kept.
   */
  gatewayKeysSecret?: SecretLocation | undefined;
}

/** Deployments wake on demand where the operator reads the gateway tier (--gateway-admin-url). */
function wakeOptionsOf(opts: OperatorOptions): { gatewayAdminUrl: string; periodMs?: number } | undefined {
  const gatewayAdminUrl = opts.cacheHealth?.gatewayAdminUrl ?? opts.metricsApi?.gatewayAdminUrl;
  if (!gatewayAdminUrl) return undefined;
  return { gatewayAdminUrl, ...(opts.wakePeriodMs ? { periodMs: opts.wakePeriodMs } : {}) };
}

export interface Operator {
  readonly manager: Manager;
  readonly client: KubeClient;
  readonly metricsApi: MetricsApi | undefined;
  stop(): Promise<void>;
}

/** Builds and starts the manager with every controller; the caller decides how the process ends. */
export async function startOperator(opts: OperatorOptions): Promise<Operator> {
  const client = await KubeClient.fromKubeConfig(await loadClusterCredentials(opts.kubeconfig), {
    userAgent: 'cacheroute-operator',
  });
  const manager = new Manager({
    client,
    logger: opts.logger,
    ...(opts.namespaces?.length ? { namespaces: opts.namespaces } : {}),
    leaderElection: opts.leaderElection,
    http: opts.http,
    // Only what the operator owns is cached: Tasks' result ConfigMaps, Deployments' runtime key
    // Secrets (never another Secret) and their NetworkPolicies.
    // (Model caches, their fetch Jobs and those Jobs' pods have informers of their own, selected
    // by cacheroute.dev/model-cache: model-cache/shell.ts.)
    cacheSelectors: {
      configmaps: LABEL_TASK,
      secrets: `${RUNTIME_API_KEY_LABEL}=true`,
      'networkpolicies.networking.k8s.io': LABEL_DEPLOYMENT,
    },
    ...(opts.syncPeriodMs ? { syncPeriodMs: opts.syncPeriodMs } : {}),
  });
  manager.addController(
    buildDeploymentController({
      manager,
      client,
      concurrency: opts.concurrency ?? 4,
      runtimeIngress: opts.runtimeIngress,
      cacheHealth: opts.cacheHealth,
      wake: wakeOptionsOf(opts),
      modelCache: opts.modelCache,
      hostPathRoots: opts.hostPathRoots,
      mooncakeImage: opts.mooncakeImage,
      ...(opts.runtimeKeyGraceMs !== undefined ? { runtimeKeyGraceMs: opts.runtimeKeyGraceMs } : {}),
    }),
  );
  manager.addController(buildDeploymentPartController({ manager, client }));
  manager.addController(buildCachePolicyController({ manager, client }));
  manager.addController(buildTenantController({ manager, client }));
  if (opts.picker)
    manager.addController(
      buildInferencePoolController({
        manager,
        client,
        picker: opts.picker,
        ...(opts.inferencePoolRecheckMs ? { recheckMissingMs: opts.inferencePoolRecheckMs } : {}),
        concurrency: opts.concurrency ?? 4,
      }),
    );
  if (opts.gatewayKeysSecret) {
    const secret = opts.gatewayKeysSecret;
    manager.addController(buildGatewayKeysController({ manager, client, secret }));
    // Once at start, whatever the caches hold: Tenants removed while no operator ran go too.
    manager.enqueue('gateway-keys', gatewayKeysKey(secret));
  }
  manager.addController(
    buildTaskController({
      manager,
      client,
      openrouterBaseUrl: opts.openrouterBaseUrl,
      dailyCap: opts.dailyCap,
    }),
  );
  manager.addController(buildQualificationController({ manager, client }));
  const deployments = manager.informer<KubeObject & DeploymentResource>(Resources.sglangDeployments);
  await manager.start();
  const metricsApi = opts.metricsApi
    ? startMetricsApi(
        { client, deployments: () => deployments.list(), logger: opts.logger, signal: manager.stopSignal },
        opts.metricsApi,
      )
    : undefined;
  return {
    manager,
    client,
    metricsApi,
    async stop() {
      await metricsApi?.close();
      await manager.stop();
      await client.close();
    },
  };
}
