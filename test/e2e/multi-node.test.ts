// multi-node: replicas that span nodes, on the real LeaderWorkerSet controller (ADR 0018).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeploymentStatus } from '#api';
import { buildDeploymentManifest } from '../support/builders.ts';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.ts';
import { createTestNamespace, eventually, kubectlOk, listEvents } from '../support/kubectl.ts';

interface PodJson {
  metadata: { name: string; labels?: Record<string, string> };
  spec: { nodeName?: string; containers: { name: string; env?: { name: string; value?: string }[] }[] };
  status: { phase?: string; podIP?: string };
}

describe('multi-node: the LeaderWorkerSet controller on the test control plane', () => {
  let cp: ControlPlane;

  beforeAll(async () => {
    cp = await startControlPlane({ full: true, gpuNodes: 2, leaderWorkerSet: true });
  });
  afterAll(async () => {
    await cp?.stop();
  });

  it('runs a LeaderWorkerSet applied by hand: leader and worker pods on KWOK nodes, LWS env injected', async () => {
    const kubeconfig = cp.kubeconfig;
    const ns = await createTestNamespace(kubeconfig);
    const lws = {
      apiVersion: 'leaderworkerset.x-k8s.io/v1',
      kind: 'LeaderWorkerSet',
      metadata: { name: 'by-hand', namespace: ns },
      spec: {
        replicas: 2,
        leaderWorkerTemplate: {
          size: 2,
          workerTemplate: {
            spec: {
              containers: [
                {
                  name: 'c',
                  image: 'example.invalid/c',
                  resources: { limits: { 'nvidia.com/gpu': '1' } },
                },
              ],
              tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
            },
          },
        },
      },
    };
    await kubectlOk(['apply', '-f', '-'], { kubeconfig, input: JSON.stringify(lws) });
    const pods = await eventually(
      async () => {
        const out = await kubectlOk(
          ['get', 'pods', '-n', ns, '-l', 'leaderworkerset.sigs.k8s.io/name=by-hand', '-o', 'json'],
          { kubeconfig },
        );
        const items = (JSON.parse(out) as { items: PodJson[] }).items;
        expect(items.map((p) => p.metadata.name).sort()).toEqual([
          'by-hand-0',
          'by-hand-0-1',
          'by-hand-1',
          'by-hand-1-1',
        ]);
        for (const p of items) expect(p.status.phase).toBe('Running');
        return items;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    const env = (name: string) =>
      new Map(
        (pods.find((p) => p.metadata.name === name)?.spec.containers[0]?.env ?? []).map((e) => [
          e.name,
          e.value,
        ]),
      );
    expect(env('by-hand-1-1').get('LWS_LEADER_ADDRESS')).toBe(`by-hand-1.by-hand.${ns}`);
    expect(env('by-hand-1-1').get('LWS_WORKER_INDEX')).toBe('1');
    expect(env('by-hand-1').get('LWS_WORKER_INDEX')).toBe('0');
    expect(env('by-hand-0').get('LWS_GROUP_SIZE')).toBe('2');
    const sts = await kubectlOk(['get', 'statefulsets', '-n', ns, '-o', 'name'], { kubeconfig });
    expect(sts.trim().split('\n').sort()).toEqual([
      'statefulset.apps/by-hand',
      'statefulset.apps/by-hand-0',
      'statefulset.apps/by-hand-1',
    ]);
  });
});

const NS = 'e2e-multi-node';
const condition = (s: DeploymentStatus, type: string) => s.conditions?.find((c) => c.type === type);
const GROUP_OF_TWO = { parallelism: { tensor: 2, nodes: 2 }, resources: { gpus: 1 } };

describe('multi-node: a Deployment whose replicas span two nodes, on the real LeaderWorkerSet controller', () => {
  let stack: E2eStack;

  beforeAll(async () => {
    stack = await startE2eStack(NS, { gpuNodes: 2, leaderWorkerSet: true });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  const readyGroups = (name: string, groups: number) =>
    eventually(
      async () => {
        const s = await stack.status(name);
        expect(condition(s, 'Ready')?.status).toBe('True');
        expect(s.endpoints?.map((e) => e.pod)).toHaveLength(groups);
        return s;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );

  it('reaches Ready with one verified endpoint per group, the leader; a worker rank is not an endpoint', async () => {
    const m = buildDeploymentManifest({ name: 'mn', replicas: 1, spec: GROUP_OF_TWO });
    await stack.k(['apply', '-f', '-'], JSON.stringify(m));
    const s = await readyGroups('mn', 1);
    expect(s.endpoints?.[0]).toMatchObject({ pod: 'mn-sglang-0', ready: true, verified: true });
    expect(s.endpoints?.[0]?.reported).toMatchObject({ tensorParallel: 2 });
    expect(s.replicas).toBe(1);
    // The group's pods: the leader and its worker, each with its simulator and its rank.
    const worker = stack.kubelet.sims.get('mn-sglang-0-1');
    const leader = stack.kubelet.sims.get('mn-sglang-0');
    expect(leader?.argv).toEqual(expect.arrayContaining(['--nnodes', '2', '--node-rank', '0']));
    expect(worker?.argv).toEqual(expect.arrayContaining(['--nnodes', '2', '--node-rank', '1']));
    expect(worker?.argv).toContain(`mn-sglang-0.mn-sglang.${NS}:20000`);
    // The Service selects leaders only.
    const eps = JSON.parse(
      await stack.k(['get', 'endpointslices', '-l', 'kubernetes.io/service-name=mn-sglang', '-o', 'json']),
    ) as { items: { endpoints?: { targetRef?: { name: string } }[] }[] };
    const targets = eps.items.flatMap((i) => i.endpoints ?? []).map((e) => e.targetRef?.name);
    expect(targets).toEqual(['mn-sglang-0']);
  });

  it('restarts the group as a whole when a worker pod is lost: not ready, then a new verified leader', async () => {
    const before = await stack.status('mn');
    const leaderUid = JSON.parse(await stack.k(['get', 'pod', 'mn-sglang-0', '-o', 'json'])) as {
      metadata: { uid: string };
    };
    await stack.k(['delete', 'pod', 'mn-sglang-0-1', '--wait=false']);
    await eventually(
      async () => {
        const s = await stack.status('mn');
        expect(condition(s, 'Ready')?.status).toBe('False');
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const s = await readyGroups('mn', 1);
    const now = JSON.parse(await stack.k(['get', 'pod', 'mn-sglang-0', '-o', 'json'])) as {
      metadata: { uid: string };
    };
    // LWS recreated the leader too (RecreateGroupOnPodRestart), and it was verified anew.
    expect(now.metadata.uid).not.toBe(leaderUid.metadata.uid);
    expect(s.endpoints?.[0]?.verifiedAt).not.toBe(before.endpoints?.[0]?.verifiedAt);
  });

  it('kubectl scale scales groups: two groups, two endpoints', async () => {
    await stack.k(['scale', 'sgd/mn', '--replicas=2']);
    const s = await readyGroups('mn', 2);
    expect(s.endpoints?.map((e) => e.pod).sort()).toEqual(['mn-sglang-0', 'mn-sglang-1']);
    expect(s.endpoints?.every((e) => e.verified)).toBe(true);
    const lws = JSON.parse(await stack.k(['get', 'leaderworkerset', 'mn-sglang', '-o', 'json'])) as {
      spec: { replicas: number };
    };
    expect(lws.spec.replicas).toBe(2);
  });
});

describe('multi-node: without the LeaderWorkerSet CRD', () => {
  let stack: E2eStack;
  beforeAll(async () => {
    stack = await startE2eStack(`${NS}-no-lws`);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('says so in a condition and an Event, and applies nothing', async () => {
    const m = buildDeploymentManifest({ name: 'mn', replicas: 1, spec: GROUP_OF_TWO });
    await stack.k(['apply', '-f', '-'], JSON.stringify(m));
    const s = await eventually(
      async () => {
        const s = await stack.status('mn');
        expect(condition(s, 'Progressing')).toMatchObject({
          status: 'False',
          reason: 'LeaderWorkerSetMissing',
        });
        return s;
      },
      { timeoutMs: 60_000 },
    );
    expect(condition(s, 'Progressing')?.message).toContain('install LeaderWorkerSet');
    expect(condition(s, 'Degraded')?.status).toBe('True');
    await eventually(async () => {
      const events = await listEvents(stack.cp.kubeconfig, `${NS}-no-lws`, 'mn');
      expect(events.map((e) => e.reason)).toContain('LeaderWorkerSetMissing');
    });
    expect(await stack.k(['get', 'pods', '-o', 'name'])).toBe('');
  });
});
