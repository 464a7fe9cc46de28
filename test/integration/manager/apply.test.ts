// Server-side apply of owned objects and status writes against a real API server,
// with every request counted: a second identical apply and an unchanged status make
// zero writes; drift and removed fields are put right; an object controlled by someone
// else is refused, not adopted.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { applyOwned, FIELD_MANAGER } from '../../../operator/src/manager/apply.ts';
import { setControllerReference } from '../../../operator/src/manager/apply-plan.ts';
import { KubeClient, isConflict } from '#kube/client.ts';
import { setCondition } from '../../../operator/src/manager/conditions.ts';
import type { KubeObject } from '#kube/objects.ts';
import { createRequestCounter } from '../../../operator/src/manager/request-counter.ts';
import { Resources } from '#kube/resources.ts';
import { writeStatusIfChanged } from '../../../operator/src/manager/status.ts';
import { REPO_ROOT, loadSample } from '../../support/samples.ts';
import { createTestNamespace, kubectlOk } from '../../support/kubectl.ts';

const kubeconfig = inject('kubeconfig');
let client: KubeClient;
const counter = createRequestCounter();

beforeAll(async () => {
  await kubectlOk(['apply', '--server-side', '--force-conflicts', '-f', join(REPO_ROOT, 'crds')], {
    kubeconfig,
  });
  const kc = new KubeConfig();
  kc.loadFromString(readFileSync(kubeconfig, 'utf8'));
  client = await KubeClient.fromKubeConfig(kc, { observers: [counter.observe] });
});
afterAll(async () => client.close());
beforeEach(() => counter.reset());

async function createOwner(ns: string, name = 'owner'): Promise<KubeObject> {
  const owner = await client.create(Resources.configMaps, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: ns },
    data: {},
  });
  counter.reset();
  return owner;
}

function buildWorkload(
  ns: string,
  owner: KubeObject,
  opts: { image?: string; cpu?: string; extraLabel?: boolean } = {},
): KubeObject {
  const labels = { app: 'web', ...(opts.extraLabel ? { extra: 'yes' } : {}) };
  return setControllerReference(owner, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web', namespace: ns, labels },
    spec: {
      selector: { matchLabels: { app: 'web' } },
      template: {
        metadata: { labels: { app: 'web' }, annotations: { 'cacheroute.dev/fingerprint': 'abc' } },
        spec: {
          containers: [
            {
              name: 'main',
              image: opts.image ?? 'registry.example/web@sha256:1111',
              args: ['--port', '8080'],
              ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
              env: [{ name: 'A', value: '1' }],
              resources: {
                requests: { cpu: opts.cpu ?? '1', memory: '1Gi' },
                limits: { 'nvidia.com/gpu': '1' },
              },
              volumeMounts: [{ name: 'shm', mountPath: '/dev/shm' }],
            },
          ],
          volumes: [{ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '1Gi' } }],
          tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
        },
      },
    },
  });
}

describe('runtime apply', () => {
  it('creates, then a second identical apply makes zero requests beyond the cache read', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-apply');
    const owner = await createOwner(ns);
    const created = await applyOwned(client, Resources.deployments, buildWorkload(ns, owner), { live: null });
    expect(created).toMatchObject({ ok: true, action: 'created' });
    expect(counter.snapshot()).toMatchObject({ total: 1, writes: 1, byVerb: { apply: 1 } });

    // The live object as an informer would hold it: the only input of the check.
    const live = await client.get(Resources.deployments, ns, 'web');
    counter.reset();
    const again = await applyOwned(client, Resources.deployments, buildWorkload(ns, owner), {
      live: live ?? null,
    });
    expect(again).toMatchObject({ ok: true, action: 'unchanged', dryRun: false });
    expect(counter.snapshot()).toMatchObject({ total: 0, writes: 0 });
    expect(live?.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ uid: owner.metadata?.uid, controller: true, blockOwnerDeletion: true }),
    ]);
  });

  it('settles a value the server normalises with a dry run, not a write', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-apply');
    const owner = await createOwner(ns);
    await applyOwned(client, Resources.deployments, buildWorkload(ns, owner, { cpu: '1000m' }), {
      live: null,
    });
    const live = await client.get(Resources.deployments, ns, 'web');
    counter.reset();
    const again = await applyOwned(
      client,
      Resources.deployments,
      buildWorkload(ns, owner, { cpu: '1000m' }),
      {
        live: live ?? null,
      },
    );
    expect(again).toMatchObject({ ok: true, action: 'unchanged', dryRun: true });
    expect(counter.snapshot()).toMatchObject({
      total: 1,
      writes: 0,
      byVerbResource: { 'apply deployments.apps (dry-run)': 1 },
    });
  });

  it('updates a changed field, reverts drift by another manager, and removes a field no longer set', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-apply');
    const owner = await createOwner(ns);
    await applyOwned(client, Resources.deployments, buildWorkload(ns, owner, { extraLabel: true }));

    const changed = await applyOwned(
      client,
      Resources.deployments,
      buildWorkload(ns, owner, { image: 'registry.example/web@sha256:2222', extraLabel: true }),
    );
    expect(changed).toMatchObject({ ok: true, action: 'updated' });

    // Drift: someone edits a field we own; the edit takes ownership from us.
    await kubectlOk(
      [
        'patch',
        'deployment',
        'web',
        '-n',
        ns,
        '--type=json',
        '-p',
        '[{"op":"replace","path":"/spec/template/spec/containers/0/env/0/value","value":"drifted"}]',
      ],
      { kubeconfig },
    );
    counter.reset();
    const reverted = await applyOwned(
      client,
      Resources.deployments,
      buildWorkload(ns, owner, { image: 'registry.example/web@sha256:2222', extraLabel: true }),
    );
    expect(reverted).toMatchObject({ ok: true, action: 'updated' });
    expect(counter.snapshot().writes).toBe(1);
    const live = await client.get<
      KubeObject & { spec: { template: { spec: { containers: { env: unknown[] }[] } } } }
    >(Resources.deployments, ns, 'web');
    expect(live?.spec.template.spec.containers[0]?.env).toEqual([{ name: 'A', value: '1' }]);

    // A label we no longer set is removed by the next apply.
    const removed = await applyOwned(
      client,
      Resources.deployments,
      buildWorkload(ns, owner, { image: 'registry.example/web@sha256:2222' }),
    );
    expect(removed).toMatchObject({ ok: true, action: 'updated' });
    const after = await client.get(Resources.deployments, ns, 'web');
    expect(after?.metadata?.labels).toEqual({ app: 'web' });
    counter.reset();
    expect(
      await applyOwned(
        client,
        Resources.deployments,
        buildWorkload(ns, owner, { image: 'registry.example/web@sha256:2222' }),
        { live: after ?? null },
      ),
    ).toMatchObject({ action: 'unchanged', dryRun: false });
    expect(counter.snapshot().total).toBe(0);
  });

  it('refuses to adopt an object another controller controls, with or without a cached view', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-apply');
    const theirs = await createOwner(ns, 'someone-else');
    const ours = await createOwner(ns, 'ours');
    await applyOwned(client, Resources.deployments, buildWorkload(ns, theirs), {
      fieldManager: 'another-controller',
    });
    counter.reset();

    const result = await applyOwned(client, Resources.deployments, buildWorkload(ns, ours));
    expect(result).toMatchObject({
      ok: false,
      error: {
        code: 'AdoptionRefused',
        name: 'web',
        controller: { kind: 'ConfigMap', name: 'someone-else', uid: theirs.metadata?.uid },
      },
    });
    expect(counter.snapshot().writes).toBe(0);

    // A stale cache that believes the object absent: the server's refusal is mapped too.
    const stale = await applyOwned(client, Resources.deployments, buildWorkload(ns, ours), { live: null });
    expect(stale).toMatchObject({ ok: false, error: { code: 'AdoptionRefused' } });
    const live = await client.get(Resources.deployments, ns, 'web');
    expect(live?.metadata?.ownerReferences?.map((r) => r.name)).toEqual(['someone-else']);
  });

  it('uses one field manager', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-apply');
    const owner = await createOwner(ns);
    const r = await applyOwned(
      client,
      Resources.services,
      setControllerReference<KubeObject>(owner, {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'web', namespace: ns },
        spec: {
          selector: { app: 'web' },
          ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }],
        },
      }),
    );
    expect(r.ok && r.object.metadata?.managedFields?.map((m) => m.manager)).toEqual([FIELD_MANAGER]);
  });
});

describe('runtime status', () => {
  it('writes status through the subresource only when it changed, with observedGeneration', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rt-status');
    const sample = { ...loadSample('deployment-dense.yaml'), metadata: { name: 'llama', namespace: ns } };
    let obj = await client.create<KubeObject>(Resources.sglangDeployments, sample);
    const now = new Date('2026-01-01T00:00:00Z');
    const { conditions } = setCondition(
      [],
      { type: 'Ready', status: 'False', reason: 'Starting', message: '' },
      now,
    );
    counter.reset();

    const first = await writeStatusIfChanged(client, Resources.sglangDeployments, obj, {
      conditions,
      replicas: 0,
    });
    expect(first.written).toBe(true);
    expect(first.object['status']).toEqual({ conditions, replicas: 0, observedGeneration: 1 });
    expect(counter.snapshot()).toMatchObject({
      writes: 1,
      byVerbResource: { 'update deployments.cacheroute.dev/status': 1 },
    });
    // The spec is untouched by a status write, and generation does not move.
    expect(first.object.metadata?.generation).toBe(1);
    obj = first.object;

    counter.reset();
    const second = await writeStatusIfChanged(client, Resources.sglangDeployments, obj, {
      conditions,
      replicas: 0,
    });
    expect(second.written).toBe(false);
    expect(counter.snapshot().total).toBe(0);

    // A write from a stale view conflicts instead of overwriting a newer status.
    const stale = obj;
    obj = (await writeStatusIfChanged(client, Resources.sglangDeployments, obj, { conditions, replicas: 1 }))
      .object;
    await expect(
      writeStatusIfChanged(client, Resources.sglangDeployments, stale, { conditions, replicas: 2 }),
    ).rejects.toSatisfy(isConflict);
    expect(obj['status']).toMatchObject({ replicas: 1 });
  });
});
