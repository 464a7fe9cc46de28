// The real node's cluster DNS (real-node.ts): CoreDNS, built from its Go module by
// `hack/build-controlplane.sh --node`, serving cluster.local from the API server (its
// kubernetes plugin, as the kube-dns Deployment of a cluster runs it). It runs beside the
// kubelet as a process of the node, on the node's address, port 53, the clusterDNS the
// kubelet writes into every pod's resolv.conf: a pod reaches it through the bridge's gateway
// as it reaches the API server. No Service in front (there is one node), no upstream (nothing
// outside the namespace answers): other names fail.
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { writeKubeconfig, apiRequest, type Credentials } from './kube-api.ts';
import { issueClientCert, pkiPaths } from './pki.ts';
import { spawnManaged, waitUntilAnswering, type ManagedProcess } from './processes.ts';
import { withFreshPorts } from './fresh-ports.ts';

export const CLUSTER_DOMAIN = 'cluster.local';
const COREDNS_USER = 'system:coredns';

/** The Corefile: cluster.local (and reverse lookups) from the API server, on address:53 only. */
export function buildCorefile(c: { address: string; kubeconfig: string; readyPort: number }): string {
  return [
    '.:53 {',
    `    bind ${c.address}`,
    '    errors',
    // 200 once the kubernetes plugin has synced: what the start waits for.
    `    ready 127.0.0.1:${c.readyPort}`,
    `    kubernetes ${CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {`,
    `        kubeconfig ${c.kubeconfig}`,
    '        pods insecure',
    '        fallthrough in-addr.arpa ip6.arpa',
    '    }',
    '    cache 5',
    '}',
    '',
  ].join('\n');
}

/** What CoreDNS's kubernetes plugin reads (the rules of the ClusterRole system:coredns in kubeadm). */
export const COREDNS_CLUSTER_ROLE = {
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: 'cacheroute-real-node:coredns' },
  rules: [
    { apiGroups: [''], resources: ['endpoints', 'services', 'pods', 'namespaces'], verbs: ['list', 'watch'] },
    { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
  ],
} as const;

export async function startNodeDns(opts: {
  binDir: string;
  dir: string;
  logs: string;
  pkiDir: string;
  server: string;
  address: string;
  admin: Credentials;
}): Promise<ManagedProcess> {
  const ca = pkiPaths(opts.pkiDir);
  const pair = await issueClientCert(opts.pkiDir, 'coredns', COREDNS_USER, []);
  const kubeconfig = join(opts.dir, 'coredns.kubeconfig');
  writeKubeconfig(
    kubeconfig,
    { server: opts.server, caFile: ca.servingCa.cert, certFile: pair.cert, keyFile: pair.key },
    COREDNS_USER,
  );
  for (const [collection, obj] of [
    ['/apis/rbac.authorization.k8s.io/v1/clusterroles', COREDNS_CLUSTER_ROLE],
    [
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: COREDNS_CLUSTER_ROLE.metadata.name },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'ClusterRole',
          name: COREDNS_CLUSTER_ROLE.metadata.name,
        },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: COREDNS_USER }],
      },
    ],
  ] as const) {
    const res = await apiRequest(opts.admin, 'POST', collection, obj);
    if (res.status !== 201 && res.status !== 409)
      throw new Error(`POST ${collection}: ${res.status} ${res.body}`);
  }
  // The ready plugin's port: CoreDNS does not say what port 0 bound (fresh-ports.ts).
  return withFreshPorts(
    1,
    async ([readyPort = 0]) => {
      const corefile = join(opts.dir, 'Corefile');
      writeFileSync(corefile, buildCorefile({ address: opts.address, kubeconfig, readyPort }));
      const proc = spawnManaged('coredns', join(opts.binDir, 'coredns'), ['-conf', corefile], {
        logPath: join(opts.logs, 'coredns.log'),
      });
      // The ready plugin answers 200 "OK": another server on the port would not.
      await waitUntilAnswering(
        proc,
        async () =>
          await fetch(`http://127.0.0.1:${readyPort}/ready`).then(
            async (r) => r.status === 200 && (await r.text()).trim() === 'OK',
            () => false,
          ),
        { what: '/ready', timeoutMs: 60_000, intervalMs: 250 },
      );
      return proc;
    },
    { what: 'coredns' },
  );
}
