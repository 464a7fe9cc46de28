// Each Deployment's SGLang API keys and NetworkPolicy, against the real API
// server: the operator keeps a key Secret and a NetworkPolicy per Deployment,
// both owned by it; the pods read the key of their own fingerprint; an identity
// change adds a key and keeps the previous one until no pod of it remains; an
// operator without NetworkPolicy peers removes the policy it made. Pods are
// made by hand here (no kubelet): the operator only reads their labels.
import { beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { join } from 'node:path';
import { startOperator, type Operator } from '../../../operator/src/operator.ts';
import type { RuntimeIngress } from '../../../operator/src/controllers/deployment/network-policy.ts';
import { createLogger } from '#kube/logger.ts';
import { buildDeploymentManifest } from '../../support/builders.ts';
import { createTestNamespace, eventually, kubectl, kubectlOk } from '../../support/kubectl.ts';
import { REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');
const INGRESS: RuntimeIngress = {
  gateway: { namespace: 'cacheroute-system', podLabels: { 'app.kubernetes.io/component': 'gateway' } },
  operator: { namespace: 'cacheroute-system', podLabels: { 'app.kubernetes.io/component': 'operator' } },
};

beforeAll(async () => {
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], { kubeconfig });
});

async function start(ns: string, runtimeIngress?: RuntimeIngress): Promise<Operator> {
  const op = await startOperator({
    kubeconfig,
    namespaces: [ns],
    logger: createLogger({ level: 'error', fields: { component: 'operator' } }),
    leaderElection: false,
    http: false,
    runtimeIngress,
    // A key outlives its last endpoint in status this long (30 s in the operator); shorter here.
    runtimeKeyGraceMs: 2_000,
  });
  onTestFinished(() => op.stop());
  return op;
}

async function getJson<T>(ns: string, args: string[]): Promise<T> {
  return JSON.parse(await kubectlOk(['get', ...args, '-n', ns, '-o', 'json'], { kubeconfig })) as T;
}

interface Owned {
  metadata: { ownerReferences?: { kind: string; name: string; controller?: boolean }[] };
}
type SecretView = Owned & { data?: Record<string, string> };
type WorkloadView = Owned & {
  spec: {
    template: {
      metadata: { annotations: Record<string, string> };
      spec: { containers: { args: string[]; env?: { name: string; valueFrom?: unknown }[] }[] };
    };
  };
};

const keysOf = (s: SecretView): Record<string, string> =>
  Object.fromEntries(
    Object.entries(s.data ?? {}).map(([fp, v]) => [fp, Buffer.from(v, 'base64').toString('utf8')]),
  );

/** The fingerprint the workload's pod template runs, once it is this one's (not `not`). */
async function templateFingerprint(ns: string, not?: string): Promise<string> {
  return eventually(async () => {
    const w = await getJson<WorkloadView>(ns, ['deployment.apps', 'llama-8b-sglang']);
    const fp = w.spec.template.metadata.annotations['cacheroute.dev/fingerprint'] ?? '';
    expect(fp).not.toBe('');
    expect(fp).not.toBe(not);
    return fp;
  });
}

async function createPod(ns: string, name: string, fingerprint: string): Promise<void> {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      labels: {
        'cacheroute.dev/deployment': 'llama-8b',
        'cacheroute.dev/role': 'standalone',
        'cacheroute.dev/fingerprint': fingerprint,
      },
    },
    spec: { containers: [{ name: 'sglang', image: 'sglang' }] },
  };
  await kubectlOk(['apply', '-n', ns, '-f', '-'], { kubeconfig, input: JSON.stringify(pod) });
}

describe('runtime API keys and NetworkPolicies', () => {
  it('a key per fingerprint, kept while its pods remain; the pods read their own', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rtkeys');
    await start(ns, INGRESS);
    await kubectlOk(['apply', '-n', ns, '-f', '-'], {
      kubeconfig,
      input: JSON.stringify(buildDeploymentManifest({ name: 'llama-8b', replicas: 1 })),
    });

    const fp1 = await templateFingerprint(ns);
    const secret = await eventually(async () => {
      const s = await getJson<SecretView>(ns, ['secret', 'llama-8b-runtime-api-key']);
      expect(Object.keys(keysOf(s))).toEqual([fp1]);
      return s;
    });
    expect(secret.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Deployment', name: 'llama-8b', controller: true }),
    ]);
    const key1 = keysOf(secret)[fp1] ?? '';
    expect(key1).toMatch(/^[0-9a-f]{64}$/);
    const w = await getJson<WorkloadView>(ns, ['deployment.apps', 'llama-8b-sglang']);
    const c = w.spec.template.spec.containers[0];
    expect(c?.env).toContainEqual({
      name: 'CACHEROUTE_RUNTIME_API_KEY',
      valueFrom: { secretKeyRef: { name: 'llama-8b-runtime-api-key', key: fp1 } },
    });
    // The key itself is never in the pod template: only its name.
    expect(JSON.stringify(w)).not.toContain(key1);

    // A pod of fp1 runs; the identity changes (a new deploymentId with a new image).
    await createPod(ns, 'llama-8b-old', fp1);
    await kubectlOk(
      [
        'patch',
        'sgd',
        'llama-8b',
        '-n',
        ns,
        '--type',
        'merge',
        '-p',
        JSON.stringify({
          spec: {
            deploymentId: 'llama-8b-v2',
            runtime: { image: `lmsysorg/sglang@sha256:${'b'.repeat(64)}` },
          },
        }),
      ],
      { kubeconfig },
    );
    const fp2 = await templateFingerprint(ns, fp1);
    // New key for the new identity; the old one stays while its pod serves.
    const rolled = await eventually(async () => {
      const keys = keysOf(await getJson<SecretView>(ns, ['secret', 'llama-8b-runtime-api-key']));
      expect(Object.keys(keys).sort()).toEqual([fp1, fp2].sort());
      return keys;
    });
    expect(rolled[fp1]).toBe(key1);
    expect(rolled[fp2]).toMatch(/^[0-9a-f]{64}$/);
    expect(rolled[fp2]).not.toBe(key1);

    // The last pod of fp1 goes: so does its key, after its grace, and fp2's stays as it was.
    await kubectlOk(['delete', 'pod', 'llama-8b-old', '-n', ns, '--grace-period=0', '--force'], {
      kubeconfig,
    });
    await eventually(async () => {
      const keys = keysOf(await getJson<SecretView>(ns, ['secret', 'llama-8b-runtime-api-key']));
      expect(keys).toEqual({ [fp2]: rolled[fp2] });
    });
  });

  it('a NetworkPolicy over the pods, owned; an operator without peers removes it', async () => {
    const ns = await createTestNamespace(kubeconfig, 'rtnp');
    const op = await start(ns, INGRESS);
    await kubectlOk(['apply', '-n', ns, '-f', '-'], {
      kubeconfig,
      input: JSON.stringify(buildDeploymentManifest({ name: 'llama-8b', replicas: 1 })),
    });
    const np = await eventually(() =>
      getJson<Owned & { spec: { podSelector: unknown; ingress: unknown[] } }>(ns, [
        'networkpolicy',
        'llama-8b-runtime-ingress',
      ]),
    );
    expect(np.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Deployment', name: 'llama-8b', controller: true }),
    ]);
    expect(np.spec.podSelector).toEqual({ matchLabels: { 'cacheroute.dev/deployment': 'llama-8b' } });
    expect(np.spec.ingress).toHaveLength(3);

    // Turned off (a restart without --runtime-network-policy): the policy it made goes.
    await op.stop();
    await start(ns);
    await eventually(async () => {
      const r = await kubectl(['get', 'networkpolicy', 'llama-8b-runtime-ingress', '-n', ns], { kubeconfig });
      expect(r.stderr).toContain('NotFound');
    });
  });
});
