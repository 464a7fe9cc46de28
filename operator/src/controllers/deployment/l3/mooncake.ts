// HiCache's L3 tier of the `mooncake` backend (ADR 0041): a Mooncake store the operator runs for
// one role and identity of a Deployment, the way a platform team runs it: a pod with
// `mooncake_master` (the metadata service, with its HTTP metrics) and one store node
// (`mooncake_client`, which holds the memory segment the KV lives in), a Service in front of the
// master. The replicas join as clients that lend no memory, so what they put outlives them.
// Pure builders: the store's objects, and what each replica's SGLang is told.
import type {
  V1Container,
  V1Deployment,
  V1EnvVar,
  V1NetworkPolicyPeer,
  V1Service,
  V1Toleration,
} from '@kubernetes/client-node';
import {
  DEFAULT_MOONCAKE_CAPACITY,
  parseBinaryQuantity,
  type DeploymentResource,
  type EndpointRole,
} from '#api';
import { buildWorkloadName, LABEL_DEPLOYMENT, LABEL_FINGERPRINT, MANAGED_BY } from '../meta/labels.ts';
import { buildOwnedMetadata } from '../meta/owned.ts';
import type { NetworkPolicyObject, PodPeer } from '../meta/network-policy-object.ts';

/** The pinned SGLang image of the samples: it ships Mooncake's wheel (its PD transfer engine), `mooncake_master` with it. */
export const DEFAULT_MOONCAKE_IMAGE =
  'lmsysorg/sglang@sha256:5925d779a6f6e07c2904c74cd1b12ae400cb6159bf4e1926264b220f80087544';
/** Marks the store's objects and pods (the operator's informers select them): the role it serves. */
export const LABEL_L3_STORE = 'cacheroute.dev/hicache-l3-store';
export const MASTER_RPC_PORT = 50051;
export const MASTER_METRICS_PORT = 9003;
/** The store node's own RPC port; its transfer engine listens on a port it picks. */
export const STORE_NODE_PORT = 50052;
/** What the store node's process takes besides its segment (its transfer engine, its RPC server). */
const STORE_NODE_OVERHEAD_BYTES = 256 * 2 ** 20;
const POD_IP_ENV = 'POD_IP';
const MAX_NAME = 63;

/** The store of one role and identity. */
export interface MooncakePlan {
  readonly role: EndpointRole;
  readonly backend: 'mooncake';
  readonly fingerprint: string;
  /** The store's Deployment and Service (one name). */
  readonly store: string;
  /** host:port of the master, as the replicas' MOONCAKE_MASTER. */
  readonly master: string;
  /** The declared segment. */
  readonly capacity: string;
  readonly capacityBytes: number;
  readonly workload: V1Deployment;
  readonly service: V1Service;
}

/**
 * `<workload>-l3-<8 of the fingerprint>`: one store per identity, because Mooncake's keys (page
 * hashes, the served name, the rank) say nothing of the weights, as the file backend's do not
 * (ADR 0029). A DNS label, as a Service name must be.
 */
export function buildMooncakeStoreName(deployment: string, role: EndpointRole, fingerprint: string): string {
  const suffix = `-l3-${fingerprint.slice(0, 8)}`;
  const base = buildWorkloadName(deployment, role)
    .slice(0, MAX_NAME - suffix.length)
    .replace(/[-.]+$/, '');
  return `${base.replace(/\./g, '-')}${suffix}`;
}

function buildStoreLabels(deployment: string, role: EndpointRole, fingerprint: string) {
  return {
    'app.kubernetes.io/name': 'mooncake-store',
    'app.kubernetes.io/instance': deployment,
    'app.kubernetes.io/component': 'hicache-l3',
    'app.kubernetes.io/part-of': 'cacheroute',
    'app.kubernetes.io/managed-by': MANAGED_BY,
    // Not LABEL_DEPLOYMENT: the Deployment's pods by that label are its SGLang replicas.
    [LABEL_L3_STORE]: deployment,
    'cacheroute.dev/role': role,
    [LABEL_FINGERPRINT]: fingerprint,
  };
}

export function planMooncake(
  root: DeploymentResource,
  role: EndpointRole,
  fingerprint: string,
  capacity: string | undefined,
  image: string,
): MooncakePlan {
  const deployment = root.metadata.name ?? '';
  const namespace = root.metadata.namespace ?? 'default';
  const store = buildMooncakeStoreName(deployment, role, fingerprint);
  const size = capacity ?? DEFAULT_MOONCAKE_CAPACITY;
  const capacityBytes = parseBinaryQuantity(size) ?? 0;
  const labels = buildStoreLabels(deployment, role, fingerprint);
  const selector = {
    [LABEL_L3_STORE]: deployment,
    [LABEL_FINGERPRINT]: fingerprint,
    'cacheroute.dev/role': role,
  };
  const podIp = `$(${POD_IP_ENV})`;
  const tolerations = (root.spec.scheduling?.tolerations ?? []).map((t): V1Toleration =>
    Object.fromEntries(Object.entries(t).filter(([, v]) => v !== undefined)),
  );
  const env: V1EnvVar[] = [{ name: POD_IP_ENV, valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }];
  const locked = {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
  const master: V1Container = {
    name: 'master',
    image,
    command: ['mooncake_master'],
    args: [
      `--rpc_address=${podIp}`,
      `--rpc_port=${MASTER_RPC_PORT}`,
      `--metrics_host=${podIp}`,
      `--metrics_port=${MASTER_METRICS_PORT}`,
    ],
    env,
    ports: [
      { name: 'rpc', containerPort: MASTER_RPC_PORT, protocol: 'TCP' },
      { name: 'metrics', containerPort: MASTER_METRICS_PORT, protocol: 'TCP' },
    ],
    resources: {
      requests: { cpu: '100m', memory: '256Mi' },
      limits: { memory: '1Gi' },
    },
    readinessProbe: { httpGet: { path: '/metrics', port: 'metrics' }, periodSeconds: 5 },
    securityContext: locked,
  };
  const segment = String(capacityBytes);
  const memory = String(capacityBytes + STORE_NODE_OVERHEAD_BYTES);
  const node: V1Container = {
    name: 'store',
    image,
    command: ['mooncake_client'],
    args: [
      `--master_server_address=${podIp}:${MASTER_RPC_PORT}`,
      `--global_segment_size=${segment}`,
      '--protocol=tcp',
      '--metadata_server=P2PHANDSHAKE',
      `--host=${podIp}`,
      `--port=${STORE_NODE_PORT}`,
    ],
    env,
    ports: [{ name: 'store', containerPort: STORE_NODE_PORT, protocol: 'TCP' }],
    // The segment is the store: requested whole, so the node is not the first one the kernel kills.
    resources: { requests: { cpu: '250m', memory }, limits: { memory } },
    securityContext: locked,
  };
  const workload: V1Deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: buildOwnedMetadata(root, store, labels),
    spec: {
      replicas: 1,
      selector: { matchLabels: selector },
      // One store: a second one would be another, empty, store.
      strategy: { type: 'Recreate' },
      revisionHistoryLimit: 2,
      template: {
        metadata: { labels },
        spec: {
          containers: [master, node],
          // Neither process calls the Kubernetes API.
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 10,
          // The replicas' tolerations, not their node selector: a cluster whose nodes all carry an
          // accelerator's taint still places the store, which asks for no accelerator.
          ...(tolerations.length > 0 ? { tolerations } : {}),
        },
      },
    },
  };
  const service: V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: buildOwnedMetadata(root, store, labels),
    spec: {
      selector,
      ports: [
        { name: 'rpc', port: MASTER_RPC_PORT, targetPort: 'rpc', protocol: 'TCP' },
        { name: 'metrics', port: MASTER_METRICS_PORT, targetPort: 'metrics', protocol: 'TCP' },
      ],
    },
  };
  return {
    role,
    backend: 'mooncake',
    fingerprint,
    store,
    master: `${store}.${namespace}.svc:${MASTER_RPC_PORT}`,
    capacity: size,
    capacityBytes,
    workload,
    service,
  };
}

/**
 * What a replica's SGLang is told (its env: with no master in the extra config, SGLang 0.5.23
 * loads the store's settings from it, mooncake_store.py _load_config): the operator's store,
 * Mooncake's TCP transport, and no memory of its own to lend, so the KV lives in the store node's
 * segment and outlives the replica.
 */
export function buildMooncakeEnv(plan: MooncakePlan): V1EnvVar[] {
  return [
    { name: 'MOONCAKE_MASTER', value: plan.master },
    { name: 'MOONCAKE_MASTER_METRICS_PORT', value: String(MASTER_METRICS_PORT) },
    { name: 'MOONCAKE_PROTOCOL', value: 'tcp' },
    { name: 'MOONCAKE_DEVICE', value: '' },
    { name: 'MOONCAKE_TE_META_DATA_SERVER', value: 'P2PHANDSHAKE' },
    { name: 'MOONCAKE_GLOBAL_SEGMENT_SIZE', value: '0' },
    // The address the store node reaches this client's transfer engine at.
    { name: 'MOONCAKE_LOCAL_HOSTNAME', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
  ];
}

export function buildMooncakeNetworkPolicyName(store: string): string {
  return `${store}-ingress`;
}

/**
 * Who may reach the store: Mooncake has no authentication, so a caller that reaches the master
 * and the node reads and writes every tenant's KV. Only the Deployment's own pods (every port: the
 * transfer engine's is picked at run time), and the operator's on the metrics port.
 */
export function buildMooncakeNetworkPolicy(
  root: DeploymentResource,
  plan: MooncakePlan,
  operator: PodPeer,
): NetworkPolicyObject {
  const deployment = root.metadata.name ?? '';
  const peer: V1NetworkPolicyPeer = {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': operator.namespace } },
    podSelector: { matchLabels: { ...operator.podLabels } },
  };
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: buildOwnedMetadata(root, buildMooncakeNetworkPolicyName(plan.store), {
      // The operator caches only NetworkPolicies with this label (operator.ts cacheSelectors).
      [LABEL_DEPLOYMENT]: deployment,
      [LABEL_L3_STORE]: deployment,
      'app.kubernetes.io/managed-by': MANAGED_BY,
    }),
    spec: {
      podSelector: { matchLabels: { ...(plan.workload.spec?.selector.matchLabels ?? {}) } },
      policyTypes: ['Ingress'],
      ingress: [
        { from: [{ podSelector: { matchLabels: { [LABEL_DEPLOYMENT]: deployment } } }] },
        { from: [peer], ports: [{ protocol: 'TCP', port: MASTER_METRICS_PORT }] },
      ],
    },
  };
}
