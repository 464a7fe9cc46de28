// The operator under the chart's least-privilege identity, end to end: real pods on a
// fake GPU node, a simulator on each pod's IP, identity read-back, and a CachePolicy
// warm-up that reads its documents from a ConfigMap. On a plane of its own every
// request must succeed: not one 403.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CachePolicyStatus, DeploymentStatus } from '#api';
import { startOperator } from '../../operator/src/operator.ts';
import type { Operator } from '../../operator/src/operator.ts';
import { KubeClient } from '#kube/client.ts';
import { createLogger } from '#kube/logger.ts';
import { createRequestCounter } from '../../operator/src/manager/request-counter.ts';
import { buildDeploymentManifest } from '../support/builders.ts';
import { createUserKubeconfig, startControlPlane } from '../support/controlplane.ts';
import type { ControlPlane } from '../support/controlplane.ts';
import { helmTemplate } from '../support/helm.ts';
import { eventually, kubectl, kubectlOk } from '../support/kubectl.ts';
import { loadSample, REPO_ROOT } from '../support/samples.ts';
import { startSimKubelet } from '../support/sim-kubelet.ts';
import type { SimKubelet } from '../support/sim-kubelet.ts';

const SYSTEM = 'cacheroute-system';
const NS = 'e2e-rbac';
const counter = createRequestCounter();
let cp: ControlPlane;
let kubelet: SimKubelet | undefined;
let operator: Operator | undefined;
let userKubeconfig = '';

async function admin(args: string[], input?: string): Promise<string> {
  return kubectlOk(args, { kubeconfig: cp.kubeconfig, ...(input ? { input } : {}) });
}

beforeAll(async () => {
  cp = await startControlPlane({ full: true, gpuNodes: 1 });
  const crds = join(REPO_ROOT, 'crds');
  await admin(['apply', '--server-side', '-f', crds]);
  await admin(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds]);
  await admin(['create', 'namespace', SYSTEM]);
  await admin(['create', 'namespace', NS]);
  const identity = (await helmTemplate({ release: 'cr', namespace: SYSTEM })).filter(
    (o) =>
      ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'].includes(o.kind) &&
      o.metadata.labels?.['app.kubernetes.io/component'] === 'operator',
  );
  await admin(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: identity }));
  const sa = identity.find((o) => o.kind === 'ServiceAccount')?.metadata.name ?? '';
  userKubeconfig = await createUserKubeconfig(cp, {
    user: `system:serviceaccount:${SYSTEM}:${sa}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${SYSTEM}`],
  });
  kubelet = await startSimKubelet({ kubeconfig: cp.kubeconfig });

  // The operator's client counts every request from its first.
  const original = KubeClient.fromKubeConfig.bind(KubeClient);
  const spy = vi
    .spyOn(KubeClient, 'fromKubeConfig')
    .mockImplementationOnce((kc, opts = {}) =>
      original(kc, { ...opts, observers: [...(opts.observers ?? []), counter.observe] }),
    );
  try {
    operator = await startOperator({
      kubeconfig: userKubeconfig,
      logger: createLogger({ level: 'warn', fields: { component: 'operator' } }),
      leaderElection: { namespace: SYSTEM, name: 'cacheroute-operator' },
      http: false,
    });
  } finally {
    spy.mockRestore();
  }
});

afterAll(async () => {
  await operator?.stop();
  await kubelet?.stop();
  await cp?.stop();
});

describe('operator as the chart ServiceAccount, end to end', () => {
  it('verifies endpoints and warms them up from a ConfigMap with no request forbidden', async () => {
    await admin(
      ['apply', '-n', NS, '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'shared-knowledge' },
        data: { 'handbook.md': 'Cache-aware routing sends a prompt where its prefix is cached.' },
      }),
    );
    await admin(
      ['apply', '-n', NS, '-f', '-'],
      JSON.stringify(buildDeploymentManifest({ name: 'llama-8b', replicas: 1 })),
    );
    const policy = loadSample('cachepolicy.yaml');
    policy.spec['targetRefs'] = [{ kind: 'Deployment', name: 'llama-8b' }];
    await admin(['apply', '-n', NS, '-f', '-'], JSON.stringify(policy));

    await eventually(
      async () => {
        const s = JSON.parse(await admin(['get', 'sgd', 'llama-8b', '-n', NS, '-o', 'json'])) as {
          status?: DeploymentStatus;
        };
        expect(s.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
        expect(s.status?.verifiedReplicas).toBe(1);
      },
      { timeoutMs: 90_000 },
    );
    await eventually(
      async () => {
        const p = JSON.parse(
          await admin(['get', 'cachepolicies.cacheroute.dev', 'team-a', '-n', NS, '-o', 'json']),
        ) as { status?: CachePolicyStatus };
        expect(p.status?.targets?.[0]?.warmup?.filter((e) => e.state === 'Warmed')).toHaveLength(1);
      },
      { timeoutMs: 60_000 },
    );
    await operator?.manager.events.flush();

    const seen = counter.snapshot().byVerbResource;
    expect(seen['get configmaps']).toBeGreaterThan(0);
    expect(seen['update cachepolicies.cacheroute.dev/status']).toBeGreaterThan(0);
    expect(seen['create events.events.k8s.io']).toBeGreaterThan(0);
    expect(counter.requests().filter((r) => r.code === 401 || r.code === 403)).toEqual([]);
    // And that identity is no admin.
    const canI = async (...args: string[]): Promise<boolean> =>
      (await kubectl(['auth', 'can-i', ...args], { kubeconfig: userKubeconfig })).code === 0;
    expect(await canI('list', 'pods', '-A')).toBe(true);
    // Secrets: it keeps the runtime API key Secrets (applied; RBAC cannot narrow by label),
    // and never replaces or deletes one.
    expect(await canI('update', 'secrets', '-A')).toBe(false);
    expect(await canI('delete', 'secrets', '-A')).toBe(false);
    // The runtime was verified and warmed with its own key (the sim refuses any call without).
    expect(seen['apply secrets']).toBeGreaterThan(0);
    expect(await canI('delete', 'deployments.apps', '-n', NS)).toBe(false);
  });
});
