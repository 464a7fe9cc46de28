import type {
  V1Container,
  V1Deployment,
  V1Secret,
  V1EnvVar,
  V1PodSpec,
  V1PodTemplateSpec,
  V1Service,
  V1ServicePort,
  V1Toleration,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import type { DeploymentResource, DeploymentSpec } from '#api';
import type { KubeObject } from '#kube/objects.ts';
import { buildRuntimeKeySecretName } from '#api';
import { renderSglangArgs } from '#sglang/flags.ts';
import { buildArgv, computeEventPorts, SGLANG_PORT } from './args.ts';
import { computeFingerprint } from './fingerprint.ts';
import type { NetworkPolicyObject } from './network-policy.ts';
import {
  ANNOTATION_FINGERPRINT,
  buildPodLabels,
  buildSelectorLabels,
  buildWorkloadName,
  RUNTIME_API_KEY_ENV,
} from './meta/labels.ts';
import { buildOwnedMetadata } from './meta/owned.ts';
import { planRoles, type RoleEngine } from './roles.ts';
import { VERIFIED_READINESS_GATES } from './readiness-gate/verified.ts';
import type { ModelCacheConfig } from './model-cache/objects.ts';
import { buildPodModel } from './model-cache/pod-model.ts';
import { buildL3PodParts, planL3 } from './l3/plan.ts';
import {
  buildLeaderSelector,
  buildLeaderWorkerSet,
  buildRankArgs,
  isMultiNode,
  type LeaderWorkerSet,
} from './multi-node/leader-worker-set.ts';

export const DEFAULT_SHM_SIZE = '16Gi';
// Model loading of a large checkpoint can take most of an hour; the startup
// probe must not kill a pod that is still reading weights.
const STARTUP_PROBE_BUDGET_SECONDS = 3600;
const PROBE_PERIOD_SECONDS = 10;
export const PRE_STOP_SLEEP_SECONDS = 10;
// SGLang's /health waits up to 20 s for the scheduler to generate one token.
const HEALTH_TIMEOUT_SECONDS = 25;
const RDMA_TRANSFER_BACKENDS = new Set(['mooncake', 'nixl', 'mori']);

/**
 * The builders author with client-node's typed models; the wire layer takes
 * plain JSON objects. One cast, here, where the two meet.
 */
export function toKubeObject(
  obj: V1Deployment | V1Service | V1Secret | NetworkPolicyObject | LeaderWorkerSet,
): KubeObject {
  return obj as unknown as KubeObject;
}

export interface DesiredState {
  fingerprint: string;
  engines: RoleEngine[];
  /** apps/v1 Deployments: the engines whose replicas fit on one node. */
  workloads: V1Deployment[];
  /** LeaderWorkerSets: the engines whose replicas span nodes (multi-node/). */
  groupSets: LeaderWorkerSet[];
  services: V1Service[];
}

/** What of the operator's own settings shapes the objects it renders. */
export interface RenderOptions {
  /** The model cache settings (a fetch image): node caches and hostPath checks add an init container. */
  readonly modelCache?: ModelCacheConfig | undefined;
}

/** Every object the operator owns for one Deployment. Pure: same input, same output. */
export function buildDesired(root: DeploymentResource, opts: RenderOptions = {}): DesiredState {
  const engines = planRoles(root.spec);
  const fingerprint = computeFingerprint(root.spec, engines);
  const multiNode = isMultiNode(root.spec);
  return {
    fingerprint,
    engines,
    workloads: multiNode ? [] : engines.map((e) => buildWorkload(root, e, fingerprint, opts)),
    groupSets: multiNode ? engines.map((e) => buildGroupSet(root, e, fingerprint, opts)) : [],
    services: engines.map((e) => buildService(root, e)),
  };
}

/** The identity labels of one engine's workload and pods. */
function buildEngineLabels(
  root: DeploymentResource,
  engine: RoleEngine,
  fingerprint: string,
): Record<string, string> {
  return buildPodLabels(
    root.metadata.name ?? '',
    engine.role,
    root.spec.deploymentId,
    fingerprint,
    root.spec.runtime.version,
  );
}

export function buildWorkload(
  root: DeploymentResource,
  engine: RoleEngine,
  fingerprint: string,
  opts: RenderOptions = {},
): V1Deployment {
  const name = root.metadata.name ?? '';
  const labels = buildEngineLabels(root, engine, fingerprint);
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: buildOwnedMetadata(root, buildWorkloadName(name, engine.role), labels),
    spec: {
      replicas: engine.replicas,
      selector: { matchLabels: buildSelectorLabels(name, engine.role) },
      // A new pod comes up before an old one goes: no serving gap, at the cost of
      // one spare replica's GPUs; without them the rollout reports Unschedulable.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      revisionHistoryLimit: 3,
      progressDeadlineSeconds: STARTUP_PROBE_BUDGET_SECONDS + 600,
      template: buildPodTemplate(root, engine, fingerprint, [], opts),
    },
  };
}

/** An engine whose replicas span nodes: a LeaderWorkerSet, its leader and workers told their rank. */
export function buildGroupSet(
  root: DeploymentResource,
  engine: RoleEngine,
  fingerprint: string,
  opts: RenderOptions = {},
): LeaderWorkerSet {
  const name = root.metadata.name ?? '';
  const labels = buildEngineLabels(root, engine, fingerprint);
  return buildLeaderWorkerSet({
    metadata: buildOwnedMetadata(root, buildWorkloadName(name, engine.role), labels),
    replicas: engine.replicas,
    nodes: root.spec.parallelism.nodes,
    leader: buildPodTemplate(root, engine, fingerprint, buildRankArgs('leader'), opts),
    worker: buildPodTemplate(root, engine, fingerprint, buildRankArgs('worker'), opts),
  });
}

/**
 * The pod template of an engine: identity labels, the fingerprint annotation, and SGLang with
 * `rankArgs` (a multi-node pod's rank and its leader's address) after the rendered arguments.
 */
export function buildPodTemplate(
  root: DeploymentResource,
  engine: RoleEngine,
  fingerprint: string,
  rankArgs: readonly string[] = [],
  opts: RenderOptions = {},
): V1PodTemplateSpec {
  const name = root.metadata.name ?? '';
  const model = buildPodModel(root.spec, opts.modelCache);
  const labels = { ...buildEngineLabels(root, engine, fingerprint), ...model.labels };
  const apiKey = { name: buildRuntimeKeySecretName(name), key: fingerprint };
  const shm = buildShmVolume(engine);
  // HiCache's shared L3 directory (l3/plan.ts): the same claim in every replica of the role.
  const l3 = buildL3PodParts(planL3(root, [engine], fingerprint)[0]);
  const spec = buildPodSpec(root.spec, engine, apiKey, rankArgs, {
    volumes: [shm.volume, ...model.volumes, ...l3.volumes],
    mounts: [shm.mount, ...model.mounts, ...l3.mounts],
    env: l3.env,
  });
  return {
    metadata: { labels, annotations: { [ANNOTATION_FINGERPRINT]: fingerprint } },
    spec: model.initContainers.length > 0 ? { ...spec, initContainers: model.initContainers } : spec,
  };
}

/** Where a pod's SGLang API key is: the Deployment's key Secret, the entry of the pod's fingerprint. */
interface ApiKeyRef {
  name: string;
  key: string;
}

function buildPodSpec(
  spec: DeploymentSpec,
  engine: RoleEngine,
  apiKey: ApiKeyRef,
  rankArgs: readonly string[],
  { volumes, mounts, env }: { volumes: V1Volume[]; mounts: V1VolumeMount[]; env: V1EnvVar[] },
): V1PodSpec {
  const scheduling = spec.scheduling;
  return {
    containers: [buildSglangContainer(spec, engine, { mounts, env }, apiKey, rankArgs)],
    volumes,
    // SGLang never calls the API: a token in a pod running the user's image is a credential
    // for whoever controls that image (issue 30). Multi-node groups find their leader through
    // the LeaderWorkerSet's environment, not the API.
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    terminationGracePeriodSeconds: 60,
    // Ready only once the operator verified the runtime: a rollout keeps old pods until then.
    readinessGates: VERIFIED_READINESS_GATES.map((g) => ({ ...g })),
    ...(scheduling?.nodeSelector ? { nodeSelector: scheduling.nodeSelector } : {}),
    ...(scheduling?.tolerations ? { tolerations: scheduling.tolerations.map(buildToleration) } : {}),
    ...(scheduling?.affinity ? { affinity: scheduling.affinity } : {}),
    ...(scheduling?.priorityClassName ? { priorityClassName: scheduling.priorityClassName } : {}),
  };
}

// zod's optional fields may hold `undefined`; the Kubernetes types may not.
function buildToleration(
  t: NonNullable<NonNullable<DeploymentSpec['scheduling']>['tolerations']>[number],
): V1Toleration {
  return Object.fromEntries(Object.entries(t).filter(([, v]) => v !== undefined));
}

function buildSglangContainer(
  spec: DeploymentSpec,
  engine: RoleEngine,
  { mounts, env }: { mounts: V1VolumeMount[]; env: V1EnvVar[] },
  apiKey: ApiKeyRef,
  rankArgs: readonly string[],
): V1Container {
  const r = engine.resources;
  // A replica across nodes has one pod a node, each with its share of the tensor-parallel ranks.
  const gpus = r.gpus ?? spec.parallelism.tensor / spec.parallelism.nodes;
  const limits: Record<string, string> = { [r.gpuResourceName]: String(gpus) };
  const requests: Record<string, string> = {};
  if (r.cpu !== undefined) limits['cpu'] = requests['cpu'] = String(r.cpu);
  if (r.memory !== undefined) limits['memory'] = requests['memory'] = String(r.memory);
  const ports = [{ name: 'http', containerPort: SGLANG_PORT, protocol: 'TCP' }];
  if (engine.role === 'prefill' && spec.disaggregation) {
    ports.push({ name: 'bootstrap', containerPort: spec.disaggregation.bootstrapPort, protocol: 'TCP' });
  }
  // The first port of each event range (data-parallel rank r publishes on base + r).
  const events = computeEventPorts(spec);
  if (events) {
    ports.push({ name: 'kv-events', containerPort: events.kv, protocol: 'TCP' });
    ports.push({ name: 'kv-replay', containerPort: events.replay, protocol: 'TCP' });
    if (events.load !== undefined)
      ports.push({ name: 'load-events', containerPort: events.load, protocol: 'TCP' });
  }
  const health = { httpGet: { path: '/health', port: 'http' }, timeoutSeconds: HEALTH_TIMEOUT_SECONDS };
  const needsRdma =
    engine.role !== 'standalone' && RDMA_TRANSFER_BACKENDS.has(spec.disaggregation?.transferBackend ?? '');
  return {
    name: 'sglang',
    image: spec.runtime.image,
    command: ['python3', '-m', 'sglang.launch_server'],
    // The API key is not identity (it is never in buildArgv, so never in the fingerprint): the
    // kubelet puts it in the env from the Secret and expands $(…) in the args. Last, so argparse
    // keeps it over anything before it.
    args: [
      ...buildArgv(spec, engine),
      ...rankArgs,
      ...renderSglangArgs({ api_key: `$(${RUNTIME_API_KEY_ENV})` }),
    ],
    ports,
    env: [
      ...(spec.runtime.env ?? []).map((e): V1EnvVar => ({ name: e.name, value: e.value })),
      // After the user's: what the operator mounted wins (a kubelet keeps the last of a name).
      ...env,
      { name: RUNTIME_API_KEY_ENV, valueFrom: { secretKeyRef: { name: apiKey.name, key: apiKey.key } } },
    ],
    resources: { limits, ...(Object.keys(requests).length > 0 ? { requests } : {}) },
    volumeMounts: mounts,
    startupProbe: {
      ...health,
      periodSeconds: PROBE_PERIOD_SECONDS,
      failureThreshold: STARTUP_PROBE_BUDGET_SECONDS / PROBE_PERIOD_SECONDS,
    },
    readinessProbe: { ...health, periodSeconds: PROBE_PERIOD_SECONDS, failureThreshold: 3 },
    livenessProbe: { ...health, periodSeconds: 30, failureThreshold: 5 },
    // A pod being removed (scale-down, rollout) leaves Deployment status at once, but the
    // gateways learn that through a watch: it keeps serving this long before SGLang gets
    // SIGTERM, so nothing new reaches a process that is exiting.
    lifecycle: { preStop: { sleep: { seconds: PRE_STOP_SLEEP_SECONDS } } },
    // The SGLang image runs as root and writes its kernel caches under /root, so
    // runAsNonRoot would break it; everything else is locked down. RDMA transfer
    // pins memory, which needs IPC_LOCK.
    securityContext: {
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'], ...(needsRdma ? { add: ['IPC_LOCK'] } : {}) },
      seccompProfile: { type: 'RuntimeDefault' },
    },
  };
}

function buildShmVolume(engine: RoleEngine): { volume: V1Volume; mount: V1VolumeMount } {
  const shm = String(engine.resources.shmSize ?? DEFAULT_SHM_SIZE);
  return {
    volume: { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: shm } },
    mount: { name: 'shm', mountPath: '/dev/shm' },
  };
}

export function buildService(root: DeploymentResource, engine: RoleEngine): V1Service {
  const name = root.metadata.name ?? '';
  const ports: V1ServicePort[] = [{ name: 'http', port: SGLANG_PORT, targetPort: 'http', protocol: 'TCP' }];
  if (engine.role === 'prefill' && root.spec.disaggregation) {
    const port = root.spec.disaggregation.bootstrapPort;
    ports.push({ name: 'bootstrap', port, targetPort: 'bootstrap', protocol: 'TCP' });
  }
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: buildOwnedMetadata(root, buildWorkloadName(name, engine.role), {
      'app.kubernetes.io/name': 'sglang',
      'app.kubernetes.io/instance': name,
      'app.kubernetes.io/component': engine.role,
      'app.kubernetes.io/managed-by': 'cacheroute-operator',
    }),
    // Headless: the gateway routes to pod IPs from status; DNS and scrapers get every pod. Across
    // nodes it is the groups' subdomain too (multi-node/): leaders only, and published before
    // they are Ready, since the workers dial the leader to come up at all.
    spec: {
      clusterIP: 'None',
      selector: { ...buildSelectorLabels(name, engine.role), ...buildLeaderSelector(root.spec) },
      ports,
      ...(isMultiNode(root.spec) ? { publishNotReadyAddresses: true } : {}),
    },
  };
}
