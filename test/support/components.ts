// Command lines of the control-plane components and the fake GPU node: pure data,
// checked against v1.35.4 / etcd 3.6 / KWOK 0.8.0 (docs/controlplane.md).
import { join } from 'node:path';
import type { Pki } from './pki.ts';

export const SERVICE_CIDR = '10.0.0.0/24';
export const POD_CIDR = '10.244.0.0/16';
export const KWOK_NODE_ANNOTATION = { key: 'kwok.x-k8s.io/node', value: 'fake' } as const;
// Fake GPU nodes look like a cloud GPU pool: labelled, tainted, 8 GPUs each. Pods
// requesting nvidia.com/gpu get the toleration from the ExtendedResourceToleration
// admission plugin (as on GKE); others must tolerate the taint explicitly.
// The labels NVIDIA's GPU feature discovery puts on an 8x H100 node, so samples that select them schedule.
export const GPU_NODE_LABELS = {
  'nvidia.com/gpu.present': 'true',
  'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3',
  type: 'kwok',
} as const;
export const GPU_NODE_TAINT = { key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule' } as const;
export const GPU_NODE_CAPACITY = { cpu: '64', memory: '512Gi', pods: '110', 'nvidia.com/gpu': '8' } as const;

// nodelifecycle lifts the not-ready taint new nodes get; nodeipam gives each node a
// podCIDR (KWOK takes pod IPs from it); garbagecollector does cascading deletion.
export const DEFAULT_CONTROLLERS = [
  'deployment',
  'replicaset',
  'statefulset',
  'daemonset',
  'job',
  'endpoint',
  'endpointslice',
  'disruption',
  'garbagecollector',
  'namespace',
  'serviceaccount',
  'nodeipam',
  'nodelifecycle',
  'podgc',
  // Autoscaling e2e: an HPA on the operator's external metrics.
  'horizontalpodautoscaling',
] as const;

export interface Ports {
  etcdClient: number;
  etcdPeer: number;
  apiserver: number;
  controllerManager: number;
  scheduler: number;
}

export interface ComponentConfig {
  dir: string;
  ports: Ports;
  pki: Pki;
  kubeconfig: string;
  // Advertised by kube-apiserver and used as the nodes' InternalIP; undefined outside
  // a private network namespace (then loopback only, see docs/controlplane.md).
  hostIP: string | undefined;
  controllers: readonly string[];
  kwokStages: string;
  // The ServiceAccount admission plugin (a pod's token volume); off unless a real kubelet
  // mounts the token (real-node.ts): KWOK's pods need none, and with it a pod made before its
  // namespace's default ServiceAccount is refused.
  serviceAccountAdmission?: boolean;
}

export function buildEtcdArgs(c: ComponentConfig): string[] {
  const client = `http://127.0.0.1:${c.ports.etcdClient}`;
  const peer = `http://127.0.0.1:${c.ports.etcdPeer}`;
  return [
    '--name=test',
    `--data-dir=${join(c.dir, 'etcd')}`,
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=test=${peer}`,
    '--unsafe-no-fsync',
    '--log-level=warn',
  ];
}

export function buildApiserverArgs(c: ComponentConfig): string[] {
  const advertise = c.hostIP ?? '127.0.0.1';
  return [
    `--etcd-servers=http://127.0.0.1:${c.ports.etcdClient}`,
    `--secure-port=${c.ports.apiserver}`,
    // Inside the private namespace every address is ours; outside it, stay on loopback.
    `--bind-address=${c.hostIP === undefined ? '127.0.0.1' : '0.0.0.0'}`,
    `--advertise-address=${advertise}`,
    `--tls-cert-file=${c.pki.serving.cert}`,
    `--tls-private-key-file=${c.pki.serving.key}`,
    `--client-ca-file=${c.pki.clientCa.cert}`,
    // The aggregation layer, as kubeadm sets it up: aggregated APIs (the operator's external
    // metrics) trust the front-proxy CA; the API server dials their endpoints directly (no
    // kube-proxy here).
    `--requestheader-client-ca-file=${c.pki.frontProxyCa.cert}`,
    '--requestheader-allowed-names=front-proxy-client',
    '--requestheader-username-headers=X-Remote-User',
    '--requestheader-group-headers=X-Remote-Group',
    '--requestheader-extra-headers-prefix=X-Remote-Extra-',
    `--proxy-client-cert-file=${c.pki.proxyClient.cert}`,
    `--proxy-client-key-file=${c.pki.proxyClient.key}`,
    '--enable-aggregator-routing=true',
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    '--allow-privileged=true',
    '--authorization-mode=RBAC',
    ...(c.serviceAccountAdmission ? [] : ['--disable-admission-plugins=ServiceAccount']),
    '--enable-admission-plugins=ExtendedResourceToleration',
    `--service-account-issuer=https://${advertise}:${c.ports.apiserver}`,
    `--service-account-key-file=${c.pki.serviceAccount.publicKey}`,
    `--service-account-signing-key-file=${c.pki.serviceAccount.privateKey}`,
    '--profiling=false',
  ];
}

export function buildControllerManagerArgs(c: ComponentConfig): string[] {
  return [
    ...clientFlags(c.kubeconfig),
    `--secure-port=${c.ports.controllerManager}`,
    `--cert-dir=${join(c.dir, 'kube-controller-manager-certs')}`,
    `--controllers=${c.controllers.join(',')}`,
    `--root-ca-file=${c.pki.servingCa.cert}`,
    `--service-account-private-key-file=${c.pki.serviceAccount.privateKey}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    '--allocate-node-cidrs=true',
    `--cluster-cidr=${POD_CIDR}`,
    '--node-cidr-mask-size=24',
    // Its client's default (20 qps, burst 30) makes ReplicaSets and Pods for about five
    // Deployments a second: a fleet of 200 then waits on it, not on the operator. Large
    // clusters raise it likewise.
    '--kube-api-qps=100',
    '--kube-api-burst=200',
    // An HPA acts every 15 s by default; tests watch it go up and down within a minute.
    '--horizontal-pod-autoscaler-sync-period=2s',
  ];
}

export function buildSchedulerArgs(c: ComponentConfig): string[] {
  return [...clientFlags(c.kubeconfig), `--secure-port=${c.ports.scheduler}`];
}

export function buildKwokArgs(c: ComponentConfig): string[] {
  return [
    `--kubeconfig=${c.kubeconfig}`,
    '--manage-all-nodes=false',
    `--manage-nodes-with-annotation-selector=${KWOK_NODE_ANNOTATION.key}=${KWOK_NODE_ANNOTATION.value}`,
    `--cidr=${POD_CIDR}`,
    `--node-ip=${c.hostIP ?? '127.0.0.1'}`,
    `--config=${c.kwokStages}`,
    // Off by default when run out of cluster: without leases (and with the stages'
    // 10-minute status heartbeat) nodelifecycle marks the nodes NotReady after ~50s.
    '--node-lease-duration-seconds=40',
  ];
}

export function buildGpuNode(name: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        ...GPU_NODE_LABELS,
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
      },
      annotations: {
        [KWOK_NODE_ANNOTATION.key]: KWOK_NODE_ANNOTATION.value,
        'node.alpha.kubernetes.io/ttl': '0',
      },
    },
    spec: { taints: [GPU_NODE_TAINT] },
    // No conditions: KWOK's node-initialize stage sets Ready and keeps this capacity.
    status: { capacity: GPU_NODE_CAPACITY, allocatable: GPU_NODE_CAPACITY },
  };
}

/**
 * A pod that only takes an IP on `node`, made and deleted before any other pod goes there.
 * KWOK 0.8.0 makes a node's pod IP pool on the first pod it renders there with a Load and then
 * a Store (pod_controller.go, ipPool): pods its four stage workers render at once can each make
 * a pool and each take the CIDR's first address (two Ready pods on 10.244.0.1, once in CI). One
 * pod alone first makes the pool; every later pod takes from that one.
 */
export function buildIpPoolWarmupPod(node: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `kwok-ip-pool-${node}`, namespace: 'default' },
    spec: {
      nodeName: node,
      tolerations: [{ operator: 'Exists' }],
      automountServiceAccountToken: false,
      containers: [{ name: 'pause', image: 'registry.k8s.io/pause:3.10' }],
    },
  };
}

// kube-controller-manager and kube-scheduler: admin client, loopback health port.
function clientFlags(kubeconfig: string): string[] {
  return [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    '--leader-elect=false',
    '--bind-address=127.0.0.1',
    '--profiling=false',
  ];
}
