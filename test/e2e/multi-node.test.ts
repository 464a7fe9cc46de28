// multi-node: replicas that span nodes, on the real LeaderWorkerSet controller (ADR 0015).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { createTestNamespace, eventually, kubectlOk } from '../support/kubectl.ts';

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
