// HiCache's shared L3 tier (issue 33 item 2, ADR 0029) as the operator provisions it, against the
// real API server: for the file backend a ReadWriteMany claim owned by the Deployment (or one the
// user names), mounted by every replica at one directory per identity fingerprint, and status
// saying whether the replicas can share it. No PersistentVolume controller runs here: a claim
// binds when the test writes its status, as that controller would.
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { join } from 'node:path';
import type { V1Deployment, V1PersistentVolumeClaim } from '@kubernetes/client-node';
import type { DeploymentStatus } from '#api';
import { startTestOperator } from '../../support/operator/start.ts';
import { buildDeploymentManifest } from '../../support/builders.ts';
import { createTestNamespace, eventually, kubectlOk } from '../../support/kubectl.ts';
import { REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');
const NAME = 'llama-8b';

beforeAll(async () => {
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], { kubeconfig });
});

function hicacheDeployment(storage: Record<string, unknown> | undefined) {
  return buildDeploymentManifest({
    name: NAME,
    replicas: 2,
    spec: { profile: 'hicache', hicache: { ratio: 2, ...(storage ? { storage } : {}) } },
  });
}

const get = async <T>(ns: string, what: string[]): Promise<T> =>
  JSON.parse(await kubectlOk(['get', ...what, '-n', ns, '-o', 'json'], { kubeconfig })) as T;
const status = async (ns: string) =>
  (await get<{ status?: DeploymentStatus }>(ns, ['deployments.cacheroute.dev', NAME])).status ?? {};
const apply = (ns: string, doc: unknown) =>
  kubectlOk(['apply', '-n', ns, '-f', '-'], { kubeconfig, input: JSON.stringify(doc) });

/** What the PersistentVolume controller writes when it binds a claim. */
async function bind(ns: string, claim: string, accessModes: string[], capacity: string): Promise<void> {
  await kubectlOk(
    [
      'patch',
      'pvc',
      claim,
      '-n',
      ns,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status: { phase: 'Bound', accessModes, capacity: { storage: capacity } } }),
    ],
    { kubeconfig },
  );
}

describe('HiCache L3 on the file backend', () => {
  it('the operator claims a ReadWriteMany volume, every replica mounts it, status says when it is shared', async () => {
    const ns = await createTestNamespace(kubeconfig, 'l3');
    await startTestOperator(kubeconfig, [ns]);
    await apply(
      ns,
      hicacheDeployment({ backend: 'file', volume: { size: '5Gi', storageClassName: 'shared-nfs' } }),
    );
    const claimName = `${NAME}-sglang-l3`;
    const claim = await eventually(() => get<V1PersistentVolumeClaim>(ns, ['pvc', claimName]));
    expect(claim.spec).toMatchObject({
      accessModes: ['ReadWriteMany'],
      resources: { requests: { storage: '5Gi' } },
      storageClassName: 'shared-nfs',
    });
    const root = await get<{ metadata: { uid: string } }>(ns, ['deployments.cacheroute.dev', NAME]);
    expect(claim.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: 'Deployment',
      uid: root.metadata.uid,
    });

    // The pods: the claim, at one directory per identity, and SGLang told where it is.
    const workload = await eventually(() => get<V1Deployment>(ns, ['deployments.apps', `${NAME}-sglang`]));
    const fingerprint = workload.metadata?.labels?.['cacheroute.dev/fingerprint'] ?? '';
    expect(fingerprint).not.toBe('');
    const pod = workload.spec?.template.spec;
    expect(pod?.volumes).toContainEqual({ name: 'hicache-l3', persistentVolumeClaim: { claimName } });
    const sglang = pod?.containers.find((c) => c.name === 'sglang');
    expect(sglang?.volumeMounts).toContainEqual({
      name: 'hicache-l3',
      mountPath: '/var/cache/cacheroute/hicache-l3',
      subPath: `kv/${fingerprint}`,
    });
    expect(sglang?.env).toContainEqual({
      name: 'SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR',
      value: '/var/cache/cacheroute/hicache-l3',
    });
    expect(sglang?.args).toEqual(expect.arrayContaining(['--hicache-storage-backend', 'file']));

    const pending = await eventually(async () => {
      const l3 = (await status(ns)).l3;
      expect(l3).toHaveLength(1);
      return l3?.[0];
    });
    expect(pending).toMatchObject({
      role: 'standalone',
      backend: 'file',
      claim: claimName,
      managed: true,
      directory: `kv/${fingerprint}`,
      reachable: false,
      reason: 'ClaimPending',
    });
    await bind(ns, claimName, ['ReadWriteMany'], '5Gi');
    await eventually(async () =>
      expect((await status(ns)).l3?.[0]).toMatchObject({
        reachable: true,
        capacity: '5Gi',
        accessModes: ['ReadWriteMany'],
      }),
    );

    // No storage tier any more (a new identity, so a new deploymentId): the claim the operator
    // made goes (Kubernetes keeps it while a pod mounts it).
    const without = hicacheDeployment(undefined);
    without.spec['deploymentId'] = 'llama-8b-no-l3';
    await apply(ns, without);
    await eventually(async () => {
      const left = await get<{ items: V1PersistentVolumeClaim[] }>(ns, ['pvc']);
      expect(left.items.filter((c) => !c.metadata?.deletionTimestamp)).toEqual([]);
    });
    await eventually(async () => expect((await status(ns)).l3).toBeUndefined());
  });

  it("a claim the user names is mounted, not made; status says when it is missing or can't be shared", async () => {
    const ns = await createTestNamespace(kubeconfig, 'l3-named');
    await startTestOperator(kubeconfig, [ns]);
    await apply(ns, hicacheDeployment({ backend: 'file', volume: { claimName: 'team-kv' } }));
    const missing = await eventually(async () => {
      const l3 = (await status(ns)).l3?.[0];
      expect(l3).toBeDefined();
      return l3;
    });
    expect(missing).toMatchObject({
      claim: 'team-kv',
      managed: false,
      reachable: false,
      reason: 'ClaimNotFound',
    });
    expect(missing?.message).toContain('create a ReadWriteMany claim of that name');
    const workload = await eventually(() => get<V1Deployment>(ns, ['deployments.apps', `${NAME}-sglang`]));
    expect(workload.spec?.template.spec?.volumes).toContainEqual({
      name: 'hicache-l3',
      persistentVolumeClaim: { claimName: 'team-kv' },
    });
    expect((await get<{ items: unknown[] }>(ns, ['pvc'])).items).toEqual([]);

    // A ReadWriteOnce claim binds, but replicas on other nodes cannot mount it.
    await apply(ns, {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'team-kv' },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    });
    await bind(ns, 'team-kv', ['ReadWriteOnce'], '1Gi');
    // A named claim has no watch: the operator reads it on its next pass.
    await kubectlOk(['annotate', 'deployments.cacheroute.dev', NAME, '-n', ns, 'test/poke=1'], {
      kubeconfig,
    });
    await eventually(async () =>
      expect((await status(ns)).l3?.[0]).toMatchObject({ reachable: false, reason: 'NotReadWriteMany' }),
    );
  });

  it('the API server refuses a volume without the file backend, and a file_storage_path of its own', async () => {
    const ns = await createTestNamespace(kubeconfig, 'l3-cel');
    const refused = async (storage: Record<string, unknown>) =>
      kubectlOk(['apply', '-n', ns, '-f', '-'], {
        kubeconfig,
        input: JSON.stringify(hicacheDeployment(storage)),
      }).then(
        () => '',
        (e: unknown) => String(e),
      );
    expect(await refused({ backend: 'mooncake', volume: { size: '1Gi' } })).toContain(
      'hicache.storage.volume is the shared directory of the file backend',
    );
    expect(await refused({ backend: 'file', extraConfig: '{"file_storage_path":"/tmp/x"}' })).toContain(
      'remove file_storage_path',
    );
    expect(await refused({ backend: 'file', volume: { claimName: 'x', size: '1Gi' } })).toContain(
      'keep one or the other',
    );
  });
});
