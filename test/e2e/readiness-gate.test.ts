// The cacheroute.dev/verified readiness gate holds an apps Deployment rollout until the operator
// verified the new pod's runtime: the new pod stays not Ready while its runtime does not answer,
// the old pod stays (maxUnavailable 0 counts Ready pods), and once the runtime answers and is
// verified the new pod turns Ready and the rollout goes on. Real kube-apiserver and
// kube-controller-manager (its Deployment and ReplicaSet controllers decide), KWOK, the
// sim-kubelet computing Ready from the gates as a kubelet does.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PodObject } from '../../operator/src/controllers/deployment/meta/pod-view.ts';
import { LABEL_DEPLOYMENT_ID } from '../../operator/src/controllers/deployment/meta/labels.ts';
import { VERIFIED_CONDITION } from '../../operator/src/controllers/deployment/readiness-gate/verified.ts';
import { buildDeploymentManifest } from '../support/builders.ts';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.ts';
import { eventually } from '../support/kubectl.ts';

let stack: E2eStack;
// Pods of the second identity get no runtime until the test lets them (canStart).
let secondMayStart = false;
const SECOND_ID_SUFFIX = '-r2';

beforeAll(async () => {
  stack = await startE2eStack('e2e-gate', {
    kubelet: {
      canStart: (pod) =>
        Promise.resolve(
          secondMayStart || !(pod.metadata?.labels?.[LABEL_DEPLOYMENT_ID] ?? '').endsWith(SECOND_ID_SUFFIX),
        ),
    },
  });
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

const conditionOf = (pod: PodObject | undefined, type: string) =>
  pod?.status?.conditions?.find((c) => c.type === type);

describe('verified readiness gate', () => {
  it('keeps the old pod until the new one is verified', { timeout: 180_000 }, async () => {
    const m = buildDeploymentManifest({ name: 'llama', replicas: 1, gpus: 1 });
    await stack.k(['apply', '-f', '-'], JSON.stringify(m));
    await eventually(
      async () => {
        const [first, ...rest] = await pods();
        expect(rest).toEqual([]);
        expect(conditionOf(first, VERIFIED_CONDITION)?.status).toBe('True');
        expect(conditionOf(first, 'Ready')?.status).toBe('True');
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    const [old] = await pods();
    const oldName = old?.metadata?.name ?? '';

    m.spec['deploymentId'] = `${String(m.spec['deploymentId'])}${SECOND_ID_SUFFIX}`;
    await stack.k(['apply', '-f', '-'], JSON.stringify(m));
    // The new pod's containers are ready (KWOK), its runtime does not answer: verification failed.
    let newName = '';
    await eventually(
      async () => {
        const fresh = (await pods()).find((p) => p.metadata?.name !== oldName);
        expect(conditionOf(fresh, 'ContainersReady')?.status).toBe('True');
        expect(conditionOf(fresh, VERIFIED_CONDITION)).toMatchObject({
          status: 'False',
          reason: 'VerificationFailed',
        });
        newName = fresh?.metadata?.name ?? '';
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    const now = await pods();
    const fresh = now.find((p) => p.metadata?.name === newName);
    const kept = now.find((p) => p.metadata?.name === oldName);
    expect(conditionOf(fresh, 'Ready')?.status).toBe('False');
    // The rollout waits: the old pod is neither gone nor going, and it alone is available.
    expect(kept?.metadata?.deletionTimestamp).toBeUndefined();
    const workload = JSON.parse(await stack.k(['get', 'deployment', 'llama-sglang', '-o', 'json'])) as {
      status?: { updatedReplicas?: number; availableReplicas?: number; replicas?: number };
    };
    expect(workload.status).toMatchObject({ replicas: 2, updatedReplicas: 1, availableReplicas: 1 });

    // Its runtime may start now; a pod update makes the kubelet ask again.
    secondMayStart = true;
    await stack.k(['annotate', 'pod', newName, 'test.cacheroute.dev/poke=1']);
    await eventually(
      async () => {
        const [only, ...rest] = await pods();
        expect(rest).toEqual([]);
        expect(only?.metadata?.name).toBe(newName);
        expect(conditionOf(only, VERIFIED_CONDITION)?.status).toBe('True');
        expect(conditionOf(only, 'Ready')?.status).toBe('True');
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
  });
});
