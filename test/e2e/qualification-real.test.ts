// A Qualification of the REAL SGLang 0.5.23 on CPU (the kit's tiny Llama): a
// dense and a HiCache Deployment, each a real server the sim-kubelet starts
// from its pod's arguments (at most two at once on this machine). What the
// report claims about caching is what the engines reported in meta_info.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeploymentStatus, QualificationStatus } from '#api';
import { MODEL_DIR } from '../../operator/src/controllers/deployment/model-cache/names.ts';
import { parseRecords, recordConfigMapName } from '../../operator/src/controllers/qualification/record.ts';
import { startOperator, type Operator } from '../../operator/src/operator.ts';
import { createLogger } from '#kube/logger.ts';
import { buildDeploymentManifest } from '../support/builders.ts';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { eventually, kubectlOk } from '../support/kubectl.ts';
import { removeKitModelLink } from '../support/real-sglang.ts';
import { REPO_ROOT } from '../support/samples.ts';
import { startSimKubelet, type SimKubelet } from '../support/sim-kubelet.ts';

const NS = 'e2e-qualification-real';
const ARMS = ['dense', 'hicache'] as const;

let cp: ControlPlane;
let kubelet: SimKubelet;
let operator: Operator;
let linkedModelDir = false;

const k = (args: string[], input?: string) =>
  kubectlOk(['-n', NS, ...args], { kubeconfig: cp.kubeconfig, ...(input ? { input } : {}) });

async function getJson<T>(resource: string, name: string): Promise<T> {
  return JSON.parse(await k(['get', resource, name, '-o', 'json'])) as T;
}

/** The tiny model on one GPU; both arms share everything but the profile. */
function tinyDeployment(name: string, spec: Record<string, unknown>) {
  const m = buildDeploymentManifest({ name, replicas: 1, gpus: 1 });
  Object.assign(m.spec, {
    deploymentId: `${name}-r1`,
    serving: { pageSize: 16, maxTotalTokens: 2048 },
    ...spec,
  });
  return m;
}

beforeAll(async () => {
  linkedModelDir = !existsSync(MODEL_DIR);
  cp = await startControlPlane({ full: true, gpuNodes: 1 });
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig: cp.kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], {
    kubeconfig: cp.kubeconfig,
  });
  await kubectlOk(['create', 'namespace', NS], { kubeconfig: cp.kubeconfig });
  kubelet = await startSimKubelet({
    kubeconfig: cp.kubeconfig,
    realSglang: (pod) =>
      (ARMS as readonly string[]).includes(pod.metadata?.labels?.['cacheroute.dev/deployment'] ?? '')
        ? []
        : undefined,
  });
  operator = await startOperator({
    kubeconfig: cp.kubeconfig,
    logger: createLogger({ level: 'warn', fields: { component: 'operator' } }),
    leaderElection: false,
    http: false,
  });
  await k(['apply', '-f', '-'], JSON.stringify(tinyDeployment('dense', { profile: 'dense' })));
  await k(
    ['apply', '-f', '-'],
    JSON.stringify(tinyDeployment('hicache', { profile: 'hicache', hicache: { ratio: 4 } })),
  );
  for (const name of ARMS)
    await eventually(
      async () => {
        const s = (await getJson<{ status?: DeploymentStatus }>('sgd', name)).status ?? {};
        expect(s.verifiedReplicas).toBe(1);
        expect(s.routable?.value).toBe(true);
      },
      { timeoutMs: 300_000, intervalMs: 1_000 },
    );
}, 420_000);

afterAll(async () => {
  await operator?.stop();
  await kubelet?.stop();
  await cp?.stop();
  if (linkedModelDir) removeKitModelLink(MODEL_DIR);
});

describe('Qualification on the real SGLang', () => {
  it('reports warm samples with real cached tokens and cold samples with none, as RealEngine', async () => {
    await k(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'cacheroute.dev/v1alpha1',
        kind: 'Qualification',
        metadata: { name: 'real' },
        spec: {
          arms: ARMS.map((a) => ({ name: a, deployment: { name: a } })),
          workload: {
            generator: {
              seed: 5,
              documents: { documents: 1, documentWords: 120, questionsPerDocument: 2, questionWords: 6 },
            },
          },
          maxOutputTokens: 2,
          concurrency: 1,
          samplesPerArm: 2,
          budget: { maxDurationSeconds: 900 },
          pricePerGpuHour: '1.00',
        },
      }),
    );
    const s = await eventually(
      async () => {
        const st = (await getJson<{ status?: QualificationStatus }>('qualifications.cacheroute.dev', 'real'))
          .status;
        expect(st?.phase).toBe('Succeeded');
        return st ?? {};
      },
      { timeoutMs: 600_000, intervalMs: 2_000 },
    );
    expect(s).toMatchObject({ evidence: 'RealEngine', progress: '4/4' });
    for (const arm of s.arms ?? []) {
      expect(arm).toMatchObject({ samplesDone: 2, samplesFailed: 0 });
      expect(arm.warm?.cachedTokens).toBeGreaterThan(0);
      expect(arm.warm?.cachedShare).toBeGreaterThan(arm.cold?.cachedShare ?? 1);
    }
    const cm = await getJson<{ data?: Record<string, string> }>('configmap', recordConfigMapName('real'));
    const { records } = parseRecords(cm.data);
    expect(records.map((r) => r.arm)).toEqual(['dense', 'hicache', 'hicache', 'dense']);
    for (const r of records) {
      // Nothing before the cold pass counts: its first request finds no cached token.
      expect(r.cold?.requests[0]?.cachedTokens).toBe(0);
      for (const q of r.warm?.requests ?? []) {
        expect(q.ok).toBe(true);
        expect(q.simulator).toBe(false);
        expect(q.cachedTokens).toBeGreaterThan(0);
      }
    }
  });
});
