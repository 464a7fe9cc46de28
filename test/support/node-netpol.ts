// NetworkPolicy enforcement on the real node (real-node.ts): the bridge plugin enforces
// none, so kube-router (built from its Go module by `hack/build-controlplane.sh --node`) runs
// beside the kubelet with only its network-policy controller (no routing, no service proxy,
// no CNI: kube-proxy and the bridge do those). It writes iptables chains and ipsets matching
// the node's pods' IPs in the private network namespace, filtering what reaches them as
// their NetworkPolicies say. kube-network-policies, the SIG's own, needs the kernel's nftables
// queue (CONFIG_NFT_QUEUE), which this kernel lacks.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { apiRequest, writeKubeconfig, type Credentials } from './kube-api.ts';
import { issueClientCert, pkiPaths } from './pki.ts';
import { httpStatus, spawnManaged, waitUntilAnswering, type ManagedProcess } from './processes.ts';
import { listensOn, withFreshPorts } from './fresh-ports.ts';

const KUBE_ROUTER_USER = 'system:kube-router';

/** What kube-router's network-policy controller reads (its release's ClusterRole, less what routing needs). */
export const KUBE_ROUTER_CLUSTER_ROLE = {
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: 'cacheroute-real-node:kube-router' },
  rules: [
    {
      apiGroups: [''],
      resources: ['namespaces', 'pods', 'services', 'nodes', 'endpoints'],
      verbs: ['get', 'list', 'watch'],
    },
    { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['get', 'list', 'watch'] },
  ],
} as const;

export function buildKubeRouterArgs(c: {
  kubeconfig: string;
  name: string;
  serviceCidr: string;
  healthPort: number;
}): string[] {
  return [
    '--run-firewall=true',
    '--run-router=false',
    '--run-service-proxy=false',
    '--enable-cni=false',
    `--kubeconfig=${c.kubeconfig}`,
    `--hostname-override=${c.name}`,
    `--service-cluster-ip-range=${c.serviceCidr}`,
    `--health-port=${c.healthPort}`,
    '--metrics-port=0',
    // Rules follow a policy's change within seconds (they are resynced in full every 5 minutes).
    '--iptables-sync-period=1m',
  ];
}

export async function startNetworkPolicyAgent(opts: {
  binDir: string;
  dir: string;
  logs: string;
  pkiDir: string;
  server: string;
  name: string;
  serviceCidr: string;
  admin: Credentials;
}): Promise<ManagedProcess> {
  const ca = pkiPaths(opts.pkiDir);
  const pair = await issueClientCert(opts.pkiDir, 'kube-router', KUBE_ROUTER_USER, []);
  const kubeconfig = join(opts.dir, 'kube-router.kubeconfig');
  writeKubeconfig(
    kubeconfig,
    { server: opts.server, caFile: ca.servingCa.cert, certFile: pair.cert, keyFile: pair.key },
    KUBE_ROUTER_USER,
  );
  const name = KUBE_ROUTER_CLUSTER_ROLE.metadata.name;
  for (const [collection, obj] of [
    ['/apis/rbac.authorization.k8s.io/v1/clusterroles', KUBE_ROUTER_CLUSTER_ROLE],
    [
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: KUBE_ROUTER_USER }],
      },
    ],
  ] as const) {
    const res = await apiRequest(opts.admin, 'POST', collection, obj);
    if (res.status !== 201 && res.status !== 409)
      throw new Error(`POST ${collection}: ${res.status} ${res.body}`);
  }
  // The health port: kube-router does not say what port 0 bound (fresh-ports.ts).
  return withFreshPorts(
    1,
    async ([healthPort = 0]) => {
      const args = buildKubeRouterArgs({
        kubeconfig,
        name: opts.name,
        serviceCidr: opts.serviceCidr,
        healthPort,
      });
      writeFileSync(join(opts.dir, 'kube-router.args'), `${args.join('\n')}\n`);
      const proc = spawnManaged('kube-router', join(opts.binDir, 'kube-router'), args, {
        logPath: join(opts.logs, 'kube-router.log'),
      });
      await waitUntilAnswering(
        proc,
        async () =>
          (await httpStatus(`http://127.0.0.1:${healthPort}/healthz`)) === 200 &&
          listensOn(proc.pid, healthPort),
        { what: '/healthz', timeoutMs: 60_000, intervalMs: 250 },
      );
      return proc;
    },
    { what: 'kube-router' },
  );
}
