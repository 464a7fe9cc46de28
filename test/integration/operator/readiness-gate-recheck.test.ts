// The verified readiness gate tolerates one failed re-verification, against the real API
// server: the operator's plan (readiness-gate/verified.ts) is applied as the reconciler applies
// it (a strategic merge PATCH of pods/status), and each pass reads the pod back from the API, so
// the mark that remembers the first failure must survive the round trip through the server's
// merge of conditions by type, and the Ready condition the kubelet keeps is left alone.
import { describe, expect, inject, it } from 'vitest';
import type { Endpoint } from '#api';
import type { PodObject } from '../../../operator/src/controllers/deployment/meta/pod-view.ts';
import {
  buildConditionPatch,
  planVerifiedConditions,
  VERIFIED_CONDITION,
  VERIFIED_READINESS_GATES,
} from '../../../operator/src/controllers/deployment/readiness-gate/verified.ts';
import { createTestNamespace, kubectlOk } from '../../support/kubectl.ts';

const kubeconfig = inject('kubeconfig');

async function getPod(ns: string, name: string): Promise<PodObject> {
  return JSON.parse(
    await kubectlOk(['get', 'pod', name, '-n', ns, '-o', 'json'], { kubeconfig }),
  ) as PodObject;
}

async function patchStatus(ns: string, name: string, patch: object, type = 'strategic'): Promise<void> {
  await kubectlOk(
    ['patch', 'pod', name, '-n', ns, '--subresource=status', `--type=${type}`, '-p', JSON.stringify(patch)],
    { kubeconfig },
  );
}

/** One reconcile pass of the gate: plan from the pod as the API has it, PATCH what changed. */
async function pass(ns: string, name: string, endpoint: Endpoint): Promise<void> {
  const pod = await getPod(ns, name);
  for (const { condition } of planVerifiedConditions([pod], [endpoint]))
    await patchStatus(ns, name, buildConditionPatch(pod, condition, new Date()));
}

const gate = (pod: PodObject) => pod.status?.conditions?.find((c) => c.type === VERIFIED_CONDITION);

describe('verified readiness gate, re-verification', () => {
  it('keeps a verified pod True through one failed re-check and turns it False at the second', async () => {
    const ns = await createTestNamespace(kubeconfig, 'gate-recheck');
    const name = 'runtime-0';
    await kubectlOk(['create', '-n', ns, '-f', '-'], {
      kubeconfig,
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, labels: { 'cacheroute.dev/role': 'standalone' } },
        spec: { containers: [{ name: 'sglang', image: 'sglang' }], readinessGates: VERIFIED_READINESS_GATES },
      }),
    });
    const ip = '10.244.252.1';
    await patchStatus(
      ns,
      name,
      {
        status: {
          phase: 'Running',
          podIP: ip,
          podIPs: [{ ip }],
          conditions: [{ type: 'ContainersReady', status: 'True' }],
        },
      },
      'merge',
    );
    const endpoint = (over: Partial<Endpoint>): Endpoint => ({
      pod: name,
      ip,
      port: 30000,
      role: 'standalone',
      ready: true,
      verified: false,
      ...over,
    });
    const failed = endpoint({ reason: 'VerificationFailed', message: 'GET /server_info: timeout' });

    await pass(ns, name, endpoint({ verified: true }));
    const verified = gate(await getPod(ns, name));
    expect(verified).toMatchObject({ status: 'True', reason: 'Verified' });

    await pass(ns, name, failed);
    const once = await getPod(ns, name);
    expect(gate(once)).toMatchObject({ status: 'True', reason: 'RecheckFailed' });
    // Still True: the transition time is the one it became True at; the kubelet's own condition stays.
    expect(gate(once)?.lastTransitionTime).toBe(verified?.lastTransitionTime);
    expect(once.status?.conditions?.find((c) => c.type === 'ContainersReady')?.status).toBe('True');

    await pass(ns, name, endpoint({ verified: true }));
    expect(gate(await getPod(ns, name))).toMatchObject({ status: 'True', reason: 'Verified' });

    await pass(ns, name, failed);
    await pass(ns, name, failed);
    expect(gate(await getPod(ns, name))).toMatchObject({ status: 'False', reason: 'VerificationFailed' });
  });
});
