// The operator end to end: real control plane, KWOK fake GPU nodes, and an
// SGLang simulator on every running pod's IP started with the pod's own
// rendered arguments. Nothing here is mocked but the GPU.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CachePolicyStatus, DeploymentStatus } from '#api';
import { startOperator, type Operator } from '../../operator/src/operator.ts';
import { createLogger } from '#kube/logger.ts';
import { buildDeploymentManifest } from '../support/builders.ts';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { eventually, kubectl, kubectlOk, listEvents } from '../support/kubectl.ts';
import { loadSample, REPO_ROOT } from '../support/samples.ts';
import { startSimKubelet, type SimKubelet } from '../support/sim-kubelet.ts';
import { join } from 'node:path';

const NS = 'e2e-operator';
let cp: ControlPlane;
let kubelet: SimKubelet;
let operator: Operator;
const impostors = new Set<string>();

async function k(args: string[], input?: string): Promise<string> {
  return kubectlOk(['-n', NS, ...args], { kubeconfig: cp.kubeconfig, ...(input ? { input } : {}) });
}

async function status(name: string): Promise<DeploymentStatus> {
  return (
    (JSON.parse(await k(['get', 'sgd', name, '-o', 'json'])) as { status?: DeploymentStatus }).status ?? {}
  );
}

const condition = (s: DeploymentStatus, type: string) => s.conditions?.find((c) => c.type === type);

const events = (name: string) => listEvents(cp.kubeconfig, NS, name);

beforeAll(async () => {
  cp = await startControlPlane({ full: true, gpuNodes: 2 });
  await kubectlOk(['apply', '--server-side', '-f', join(REPO_ROOT, 'crds')], { kubeconfig: cp.kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', join(REPO_ROOT, 'crds')], {
    kubeconfig: cp.kubeconfig,
  });
  await kubectlOk(['create', 'namespace', NS], { kubeconfig: cp.kubeconfig });
  // A runtime that reports another served model than the one its pod was launched for.
  kubelet = await startSimKubelet({
    kubeconfig: cp.kubeconfig,
    extraArgs: (pod) =>
      impostors.has(pod.metadata?.labels?.['cacheroute.dev/deployment'] ?? '')
        ? ['--served-model-name', 'someone-else']
        : [],
  });
  operator = await startOperator({
    kubeconfig: cp.kubeconfig,
    logger: createLogger({ level: 'warn', fields: { component: 'operator' } }),
    leaderElection: { namespace: NS, name: 'cacheroute-operator' },
    http: { host: '127.0.0.1', port: 0 },
  });
});

afterAll(async () => {
  await operator?.stop();
  await kubelet?.stop();
  await cp?.stop();
});

describe('Deployment on fake GPU nodes', () => {
  it('runs a dense deployment to Ready with every endpoint verified by the runtime itself', async () => {
    await k(['apply', '-f', '-'], JSON.stringify(buildDeploymentManifest({ name: 'dense', replicas: 2 })));
    const s = await eventually(
      async () => {
        const s = await status('dense');
        expect(condition(s, 'Ready')?.status).toBe('True');
        return s;
      },
      { timeoutMs: 60_000 },
    );
    expect(condition(s, 'IdentityVerified')).toMatchObject({ status: 'True', reason: 'Verified' });
    expect(s.routable).toMatchObject({ value: true });
    expect(s.endpoints).toHaveLength(2);
    for (const e of s.endpoints ?? []) {
      expect(e).toMatchObject({ role: 'standalone', ready: true, verified: true, port: 30000 });
      expect(e.ip).toMatch(/^10\.244\.\d+\.\d+$/);
      expect(e.reported).toMatchObject({
        servedModelName: 'llama-8b',
        modelPath: '/models',
        version: '0.5.23',
        radixCache: true,
      });
      expect(kubelet.sims.get(e.pod)?.ip).toBe(e.ip);
    }
    expect(s.identity?.fingerprint).toMatch(/^[0-9a-f]{16}$/);
    const table = await k(['get', 'sgd', 'dense']);
    expect(table).toMatch(/dense\s+llama-3-1-8b-instruct-r1\s+dense\s+True\s+2\s+2\s+2\s+true/);
  });

  it('marks an endpoint whose runtime reports another model unverified, with a Warning event, and never crashes', async () => {
    impostors.add('impostor');
    await k(['apply', '-f', '-'], JSON.stringify(buildDeploymentManifest({ name: 'impostor', replicas: 1 })));
    const s = await eventually(
      async () => {
        const s = await status('impostor');
        expect(condition(s, 'IdentityVerified')?.status).toBe('False');
        return s;
      },
      { timeoutMs: 60_000 },
    );
    expect(s.endpoints?.[0]).toMatchObject({
      verified: false,
      reason: 'IdentityMismatch',
      message: expect.stringContaining('servedModelName: declared llama-8b, runtime reports someone-else'),
    });
    expect(s.routable).toMatchObject({ value: false });
    expect(condition(s, 'Ready')?.status).toBe('False');
    await eventually(
      async () => expect((await events('impostor')).map((e) => e.reason)).toContain('IdentityMismatch'),
      { timeoutMs: 30_000 },
    );
  });

  it('scales up and down through the scale subresource', async () => {
    await k(['scale', 'sgd/dense', '--replicas=3']);
    await eventually(async () => expect((await status('dense')).verifiedReplicas).toBe(3), {
      timeoutMs: 60_000,
    });
    await k(['scale', 'sgd/dense', '--replicas=1']);
    await eventually(
      async () => {
        const s = await status('dense');
        expect(s.endpoints).toHaveLength(1);
        expect(condition(s, 'Ready')?.status).toBe('True');
      },
      { timeoutMs: 60_000 },
    );
  });

  it('surfaces the scheduler: more GPUs than any node has is Progressing=False Unschedulable', async () => {
    await k(
      ['apply', '-f', '-'],
      JSON.stringify(buildDeploymentManifest({ name: 'too-big', replicas: 1, gpus: 16 })),
    );
    const s = await eventually(
      async () => {
        const s = await status('too-big');
        expect(condition(s, 'Progressing')).toMatchObject({ status: 'False', reason: 'Unschedulable' });
        return s;
      },
      { timeoutMs: 60_000 },
    );
    expect(condition(s, 'Progressing')?.message).toContain('nvidia.com/gpu');
    expect(condition(s, 'Ready')?.status).toBe('False');
  });

  it('runs a disaggregated HiSparse deployment as prefill and decode parts, routable as a pair', async () => {
    // Two GPUs per replica instead of the sample's eight: three pods fit on the two fake nodes.
    const pd = buildDeploymentManifest({
      name: 'pd',
      sample: 'deployment-pd-hisparse.yaml',
      spec: { parallelism: { tensor: 2 } },
      gpus: 2,
    });
    await k(['apply', '-f', '-'], JSON.stringify(pd));
    const s = await eventually(
      async () => {
        const s = await status('pd');
        expect(condition(s, 'Ready')?.status).toBe('True');
        return s;
      },
      { timeoutMs: 60_000 },
    );
    expect(s.routable).toMatchObject({ value: true, reason: 'PrefillDecodePaired' });
    expect(s.profile).toBe('pd:hicache/hisparse');
    const decode = s.endpoints?.filter((e) => e.role === 'decode') ?? [];
    expect(decode).toHaveLength(2);
    expect(decode[0]?.reported).toMatchObject({
      hisparse: true,
      radixCache: false,
      disaggregationMode: 'decode',
    });
    expect(s.endpoints?.find((e) => e.role === 'prefill')).toMatchObject({
      bootstrapPort: 8998,
      reported: { hicache: true },
    });
  });

  // The bug this guards: warm-up posted a room-less /generate to prefill pods, which a
  // disaggregated SGLang (and now the simulator) refuses, so a PD target was never warmed.
  it('warms a disaggregated deployment through a prefill/decode pair', async () => {
    await k(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'shared-knowledge' },
        data: { 'handbook.md': 'Every replica starts with this prefix in its cache.' },
      }),
    );
    const policy = loadSample('cachepolicy.yaml');
    policy.metadata.name = 'pd-warmup';
    policy.spec['targetRefs'] = [{ kind: 'Deployment', name: 'pd' }];
    await k(['apply', '-f', '-'], JSON.stringify(policy));
    const prefill = (await status('pd')).endpoints?.find((e) => e.role === 'prefill')?.pod ?? '';
    await eventually(
      async () => {
        const p = JSON.parse(await k(['get', 'cachepolicies.cacheroute.dev', 'pd-warmup', '-o', 'json'])) as {
          status?: CachePolicyStatus;
        };
        expect(p.status?.targets?.[0]?.warmup).toEqual([
          expect.objectContaining({ pod: prefill, restartCount: 0, state: 'Warmed' }),
        ]);
      },
      { timeoutMs: 60_000 },
    );
    const counters = kubelet.sims.get(prefill)?.server.engine.counters;
    expect(counters?.requests).toBeGreaterThan(0);
    expect(counters?.aborted).toBe(0);
    const decodes = [...kubelet.sims.values()].filter((sim) => sim.argv.includes('decode'));
    expect(decodes.reduce((n, sim) => n + sim.server.engine.counters.requests, 0)).toBeGreaterThan(0);
  });

  it('refuses an identity change under the same deploymentId: a condition, an event, nothing applied', async () => {
    const before = await k([
      'get',
      'deployment.apps',
      'dense-sglang',
      '-o',
      'jsonpath={.spec.template.metadata.annotations.cacheroute\\.dev/fingerprint}',
    ]);
    const m = buildDeploymentManifest({ name: 'dense', replicas: 1 });
    (m.spec['runtime'] as { extraArgs?: string[] }).extraArgs = ['--log-level', 'debug'];
    await k(['apply', '-f', '-'], JSON.stringify(m));
    await eventually(
      async () =>
        expect(condition(await status('dense'), 'Progressing')).toMatchObject({
          status: 'False',
          reason: 'IdentityChangedWithoutNewId',
        }),
      { timeoutMs: 30_000 },
    );
    const after = await k([
      'get',
      'deployment.apps',
      'dense-sglang',
      '-o',
      'jsonpath={.spec.template.metadata.annotations.cacheroute\\.dev/fingerprint}',
    ]);
    expect(after).toBe(before);
    await eventually(
      async () =>
        expect((await events('dense')).map((e) => e.reason)).toContain('IdentityChangedWithoutNewId'),
      { timeoutMs: 30_000 },
    );
    // A new deploymentId accepts the new identity and rolls the pods.
    m.spec['deploymentId'] = 'llama-3-1-8b-instruct-r2';
    await k(['apply', '-f', '-'], JSON.stringify(m));
    await eventually(
      async () => {
        const s = await status('dense');
        expect(s.identity?.deploymentId).toBe('llama-3-1-8b-instruct-r2');
        expect(condition(s, 'Ready')?.status).toBe('True');
        expect(s.endpoints?.every((e) => e.fingerprint === s.identity?.fingerprint)).toBe(true);
      },
      { timeoutMs: 90_000 },
    );
  });

  it('reverts drift on an owned object and recreates a deleted one', async () => {
    await k(['scale', 'deployment.apps/dense-sglang', '--replicas=4']);
    await eventually(
      async () =>
        expect(await k(['get', 'deployment.apps', 'dense-sglang', '-o', 'jsonpath={.spec.replicas}'])).toBe(
          '1',
        ),
      { timeoutMs: 30_000 },
    );
    await k(['delete', 'service', 'dense-sglang']);
    await eventually(
      async () =>
        expect(await k(['get', 'service', 'dense-sglang', '-o', 'jsonpath={.spec.clusterIP}'])).toBe('None'),
      { timeoutMs: 30_000 },
    );
  });

  it('cascades deletion of the Deployment to what it owns', async () => {
    await k(['delete', 'sgd', 'impostor']);
    await eventually(
      async () => {
        const res = await kubectl(['-n', NS, 'get', 'deployment.apps', 'impostor-sglang'], {
          kubeconfig: cp.kubeconfig,
        });
        expect(res.stderr).toContain('NotFound');
      },
      { timeoutMs: 60_000 },
    );
  });
});
