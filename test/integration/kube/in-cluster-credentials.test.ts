// A pod's own credentials against a real API server: the service account's token
// (issued by the API server's TokenRequest, as the kubelet mounts it) and the
// cluster CA, read by InClusterCredentials without client-node's KubeConfig. The
// requests carry the service account's identity and rights, not the admin's.
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { KubeClient } from '#kube/client.ts';
import { InClusterCredentials } from '#kube/cluster-credentials.ts';
import { Resources } from '#kube/resources.ts';
import { createTestNamespace, kubectlOk } from '../../support/kubectl.ts';

const kubeconfig = inject('kubeconfig');
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('InClusterCredentials against the API server', () => {
  it("authenticates as the pod's service account, with a token that may rotate", async () => {
    const ns = await createTestNamespace(kubeconfig, 'incluster');
    const rbac = {
      apiVersion: 'v1',
      kind: 'List',
      items: [
        { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'reader', namespace: ns } },
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'Role',
          metadata: { name: 'reader', namespace: ns },
          rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['list'] }],
        },
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'RoleBinding',
          metadata: { name: 'reader', namespace: ns },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' },
          subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: ns }],
        },
        { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'seen', namespace: ns } },
      ],
    };
    await kubectlOk(['apply', '-f', '-'], { kubeconfig, input: JSON.stringify(rbac) });
    const token = async (): Promise<string> =>
      (await kubectlOk(['create', 'token', 'reader', '-n', ns, '--duration=10m'], { kubeconfig })).trim();

    // What the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount, and the Service env.
    const admin = new KubeConfig();
    admin.loadFromFile(kubeconfig);
    const cluster = admin.getCurrentCluster();
    if (!cluster) throw new Error('the test kubeconfig has no cluster');
    const dir = mkdtempSync(join(tmpdir(), 'sa-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    if (cluster.caFile) copyFileSync(cluster.caFile, join(dir, 'ca.crt'));
    else if (cluster.caData) writeFileSync(join(dir, 'ca.crt'), Buffer.from(cluster.caData, 'base64'));
    else throw new Error('the test kubeconfig names no CA');
    writeFileSync(join(dir, 'token'), await token());
    const server = new URL(cluster.server);
    const creds = InClusterCredentials.fromEnvironment(
      { KUBERNETES_SERVICE_HOST: server.hostname, KUBERNETES_SERVICE_PORT: server.port },
      dir,
    );

    const client = await KubeClient.fromKubeConfig(creds, { userAgent: 'in-cluster-test' });
    cleanups.push(() => client.close());
    const listed = await client.list(Resources.configMaps, { namespace: ns });
    expect(listed.items.map((c) => c.metadata?.name)).toContain('seen');
    // The service account's rights, not the admin's: another namespace is forbidden, by name.
    await expect(client.list(Resources.configMaps, { namespace: 'kube-system' })).rejects.toThrow(
      new RegExp(`system:serviceaccount:${ns}:reader`),
    );

    // A rotated token is read from the file: a fresh client (KubeClient caches headers for 30 s)
    // works after the old token's file content is replaced by garbage and then by a new token.
    writeFileSync(join(dir, 'token'), 'not-a-token');
    const broken = await KubeClient.fromKubeConfig(creds);
    cleanups.push(() => broken.close());
    await expect(broken.list(Resources.configMaps, { namespace: ns })).rejects.toThrow(/401|Unauthorized/);
    writeFileSync(join(dir, 'token'), await token());
    const rotated = await KubeClient.fromKubeConfig(creds);
    cleanups.push(() => rotated.close());
    expect((await rotated.list(Resources.configMaps, { namespace: ns })).items.length).toBeGreaterThan(0);
  });
});
