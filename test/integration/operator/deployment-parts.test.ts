// The parts of a disaggregated Deployment as scale targets of their own
// (DeploymentPart, ADR 0015), against the real API server: the operator makes
// one per part, seeded with the declared replicas, and renders each part's
// workload with the part's replicas. `kubectl scale` on a part (a write through
// /scale, as an HPA's) stands: later passes do not revert it, and the
// operator's server-side apply never owns the field. Editing the Deployment's
// declared replicas of a part carries the new value to that part only. The
// HPA controller's built-in role may use the parts' /scale.
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { join } from 'node:path';
import { startTestOperator } from '../../support/operator/start.ts';
import type { ManagedFieldsEntry } from '#kube/objects.ts';
import { buildDeploymentManifest } from '../../support/builders.ts';
import { createTestNamespace, eventually, kubectl, kubectlOk } from '../../support/kubectl.ts';
import { REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');

beforeAll(async () => {
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], { kubeconfig });
});

interface PartView {
  metadata: {
    annotations?: Record<string, string>;
    managedFields?: ManagedFieldsEntry[];
    ownerReferences?: { kind: string; name: string; controller?: boolean }[];
  };
  spec: { deployment: string; part: string; replicas?: number };
  status?: { replicas?: number; selector?: string };
}

describe('DeploymentPart: each part of a disaggregated Deployment scales apart', () => {
  it('seeds each part, keeps what kubectl scale wrote, and carries a changed declared value', async () => {
    const ns = await createTestNamespace(kubeconfig, 'parts');
    await startTestOperator(kubeconfig, [ns]);
    const k = (args: string[], input?: string) =>
      kubectlOk(['-n', ns, ...args], { kubeconfig, ...(input ? { input } : {}) });
    const part = async (name: string) =>
      JSON.parse(await k(['get', 'sgdpart', name, '-o', 'json'])) as PartView;
    const workloadReplicas = async (name: string) =>
      Number(await k(['get', 'deployment.apps', name, '-o', 'jsonpath={.spec.replicas}']));
    const setDeclared = (prefill: number, decode: number) =>
      k([
        'patch',
        'sgd',
        'pd',
        '--type=merge',
        '-p',
        JSON.stringify({
          spec: { disaggregation: { prefill: { replicas: prefill }, decode: { replicas: decode } } },
        }),
      ]);

    const manifest = buildDeploymentManifest({
      name: 'pd',
      sample: 'deployment-pd-hisparse.yaml',
      spec: { parallelism: { tensor: 2 } },
      gpus: 2,
    });
    await k(['apply', '-f', '-'], JSON.stringify(manifest));

    // Seeded: prefill 1 and decode 2, as declared, each owned by the Deployment.
    await eventually(async () => {
      expect((await part('pd-prefill')).spec.replicas).toBe(1);
      expect((await part('pd-decode')).spec.replicas).toBe(2);
      expect(await workloadReplicas('pd-prefill')).toBe(1);
      expect(await workloadReplicas('pd-decode')).toBe(2);
    });
    const prefill = await part('pd-prefill');
    expect(prefill.spec).toMatchObject({ deployment: 'pd', part: 'prefill' });
    expect(prefill.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Deployment', name: 'pd', controller: true }),
    ]);
    await eventually(async () =>
      expect((await part('pd-prefill')).status?.selector).toBe(
        'cacheroute.dev/deployment=pd,cacheroute.dev/role=prefill',
      ),
    );
    const listed = await k(['get', 'cacheroute']);
    expect(listed).toMatch(/deploymentpart\.cacheroute\.dev\/pd-prefill/);

    // kubectl scale writes through /scale, as an HPA does: the workload follows it.
    await k(['scale', 'sgdpart/pd-prefill', '--replicas=3']);
    await eventually(async () => expect(await workloadReplicas('pd-prefill')).toBe(3));

    // The Deployment's decode declaration changes: carried to the decode part, and the pass that
    // did it left the prefill part at what kubectl scale wrote.
    await setDeclared(1, 1);
    await eventually(async () => {
      expect((await part('pd-decode')).spec.replicas).toBe(1);
      expect(await workloadReplicas('pd-decode')).toBe(1);
      const parts = JSON.parse(await k(['get', 'sgd', 'pd', '-o', 'jsonpath={.status.parts}'])) as unknown;
      expect(parts).toEqual([
        expect.objectContaining({ part: 'prefill', name: 'pd-prefill', replicas: 3 }),
        expect.objectContaining({ part: 'decode', name: 'pd-decode', replicas: 1 }),
      ]);
    });
    expect((await part('pd-prefill')).spec.replicas).toBe(3);
    expect(await workloadReplicas('pd-prefill')).toBe(3);
    // The operator's server-side apply owns what the part is, never its replicas.
    const withFields = JSON.parse(
      await k(['get', 'sgdpart', 'pd-prefill', '-o', 'json', '--show-managed-fields']),
    ) as PartView;
    const applied = withFields.metadata.managedFields?.find(
      (m) => m.manager === 'cacheroute-operator' && m.operation === 'Apply',
    );
    expect(applied?.fieldsV1?.['f:spec']).toEqual({ 'f:deployment': {}, 'f:part': {} });

    // Now the prefill declaration changes: the new value wins over what was scaled.
    await setDeclared(2, 1);
    await eventually(async () => {
      expect((await part('pd-prefill')).spec.replicas).toBe(2);
      expect(await workloadReplicas('pd-prefill')).toBe(2);
    });
    expect((await part('pd-prefill')).metadata.annotations?.['cacheroute.dev/declared-replicas']).toBe('2');
  });

  it("the HPA controller's built-in role may read and write a part's /scale", async () => {
    const as = ['--as=system:serviceaccount:kube-system:horizontal-pod-autoscaler'];
    for (const verb of ['get', 'update']) {
      const res = await kubectl(
        [
          'auth',
          'can-i',
          verb,
          'deploymentparts.cacheroute.dev',
          '--subresource=scale',
          '-n',
          'default',
          ...as,
        ],
        { kubeconfig },
      );
      expect(res.stdout.trim(), `${verb} deploymentparts/scale`).toBe('yes');
    }
  });
});
