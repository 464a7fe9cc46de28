// The sim-kubelet terminates a deleted pod as a kubelet does, by default (kubelet-termination.ts):
// its runtime keeps serving through the preStop sleep, gets SIGTERM, and exits; until then the
// pod object stays, Terminating (the runtime finalizer), so KWOK hands its IP to no other pod.
// The replacement a ReplicaSet makes at once gets another IP, and the old pod goes only once its
// runtime has. Real control plane, KWOK, the operator, a simulator on every pod IP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PodObject } from '../../operator/src/controllers/deployment/meta/pod-view.ts';
import { buildDeploymentManifest } from '../support/builders.ts';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.ts';
import { eventually } from '../support/kubectl.ts';
import { RUNTIME_FINALIZER } from '../support/sim-kubelet.ts';

let stack: E2eStack;

beforeAll(async () => {
  stack = await startE2eStack('e2e-termination');
});

afterAll(async () => {
  await stack?.stop();
});

async function pods(): Promise<PodObject[]> {
  const list = JSON.parse(
    await stack.k(['get', 'pods', '-l', 'cacheroute.dev/deployment=llama', '-o', 'json']),
  ) as { items: PodObject[] };
  return list.items;
}

describe('pod termination on the sim-kubelet', () => {
  it('keeps a deleted pod and its IP until its runtime has exited', { timeout: 180_000 }, async () => {
    await stack.k(
      ['apply', '-f', '-'],
      JSON.stringify(buildDeploymentManifest({ name: 'llama', replicas: 1, gpus: 1 })),
    );
    await eventually(async () => expect((await stack.status('llama')).verifiedReplicas).toBe(1), {
      timeoutMs: 90_000,
    });
    const [old] = await pods();
    const oldName = old?.metadata?.name ?? '';
    const oldIp = old?.status?.podIP ?? '';
    expect(old?.metadata?.finalizers).toContain(RUNTIME_FINALIZER);

    await stack.k(['delete', 'pod', oldName, '--wait=false']);
    // The replacement runs on another IP while the old runtime still serves on its own.
    await eventually(
      async () => {
        const now = await pods();
        const going = now.find((p) => p.metadata?.name === oldName);
        const fresh = now.find((p) => p.metadata?.name !== oldName);
        expect(going?.metadata?.deletionTimestamp).toBeDefined();
        expect(stack.kubelet.sims.has(oldName)).toBe(true);
        expect(fresh?.status?.podIP).toBeDefined();
        expect(fresh?.status?.podIP).not.toBe(oldIp);
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const health = await fetch(`http://${oldIp}:30000/health`);
    expect(health.status).toBe(200);
    // Then preStop ends, SIGTERM drains it, it exits, and only then the pod object goes.
    await eventually(
      async () => {
        expect(stack.kubelet.sims.has(oldName)).toBe(false);
        expect((await pods()).map((p) => p.metadata?.name)).not.toContain(oldName);
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
  });
});
