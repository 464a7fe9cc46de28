// The CachePolicy controller's warm-up against the real API server and SGLang
// simulators in this process: the Deployment's status is written by hand (no
// Deployment controller, no kubelet), its endpoints pointing at the simulators,
// so the test decides which runtime answers, which hangs, and when a container
// "restarts".
import { KubeConfig } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import type { CachePolicyStatus, Endpoint } from '#api';
import { buildCachePolicyController } from '../../../operator/src/controllers/cachepolicy/reconciler.ts';
import { KubeClient } from '#kube/client.ts';
import { createLogger } from '#kube/logger.ts';
import { Manager } from '../../../operator/src/manager/manager.ts';
import { startSim, type RunningSim } from '../../support/sim/testing.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../../support/builders.ts';
import { createTestNamespace, eventually, kubectlOk, patchCacherouteStatus } from '../../support/kubectl.ts';
import { REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');
const HANDBOOK = ' ba be bi bo bu ca ce ci co cu da de di do du';

beforeAll(async () => {
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], { kubeconfig });
});

async function sim(args: string[] = []): Promise<RunningSim> {
  const s = await startSim(['--model-path', 'm', '--enable-cache-report', ...args]);
  onTestFinished(() => s.close());
  return s;
}

/** Only the CachePolicy controller, as the operator wires it, on the test namespace. */
async function startController(ns: string): Promise<Manager> {
  const kc = new KubeConfig();
  kc.loadFromString(readFileSync(kubeconfig, 'utf8'));
  const client = await KubeClient.fromKubeConfig(kc);
  const manager = new Manager({
    client,
    namespaces: [ns],
    http: false,
    leaderElection: false,
    logger: createLogger({ level: 'error' }),
  });
  manager.addController(buildCachePolicyController({ manager, client }));
  await manager.start();
  onTestFinished(async () => {
    await manager.stop();
    await client.close();
  });
  return manager;
}

const endpoint = (pod: string, s: RunningSim, restartCount = 0): Endpoint => {
  const url = new URL(s.url);
  return {
    pod,
    ip: url.hostname,
    port: Number(url.port),
    role: 'standalone',
    ready: true,
    verified: true,
    fingerprint: 'fp1',
    restartCount,
    verifiedAt: new Date().toISOString(),
  };
};

async function setup(ns: string, endpoints: Endpoint[]): Promise<void> {
  const k = (args: string[], input?: string) =>
    kubectlOk(['-n', ns, ...args], { kubeconfig, ...(input ? { input } : {}) });
  await k(
    ['apply', '-f', '-'],
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'knowledge' },
      data: { 'handbook.md': HANDBOOK },
    }),
  );
  await k(['apply', '-f', '-'], JSON.stringify(buildDeploymentManifest({ name: 'llama' })));
  await writeEndpoints(ns, endpoints);
  await k(
    ['apply', '-f', '-'],
    JSON.stringify(
      buildCachePolicyManifest('team-a', ['llama'], {
        warmup: { documents: [{ name: 'knowledge', key: 'handbook.md' }] },
      }),
    ),
  );
}

async function writeEndpoints(ns: string, endpoints: Endpoint[]): Promise<void> {
  const status = {
    identity: { deploymentId: 'llama-3-1-8b-instruct-r1', fingerprint: 'fp1' },
    endpoints,
    routable: { value: true, reason: 'VerifiedEndpoints' },
  };
  await patchCacherouteStatus(kubeconfig, ns, 'deployments', 'llama', status);
}

async function policyStatus(ns: string): Promise<CachePolicyStatus> {
  const out = await kubectlOk(['get', 'cachepolicies.cacheroute.dev', 'team-a', '-n', ns, '-o', 'json'], {
    kubeconfig,
  });
  return (JSON.parse(out) as { status?: CachePolicyStatus }).status ?? {};
}

const statesOf = (s: CachePolicyStatus) =>
  Object.fromEntries((s.targets?.[0]?.warmup ?? []).map((e) => [`${e.pod}#${e.restartCount}`, e.state]));

describe('CachePolicy warm-up', () => {
  // The bug this guards: warm-up ran inside reconcile (up to 120 s a document), so one
  // runtime that does not answer held back the status of every other replica.
  it('never waits in reconcile: a hanging runtime stays Warming while another is recorded Warmed', async () => {
    const ns = await createTestNamespace(kubeconfig, 'warmup');
    const [fast, hung] = [await sim(), await sim(['--sim-hang'])];
    await startController(ns);
    await setup(ns, [endpoint('fast', fast), endpoint('hung', hung)]);
    await eventually(
      async () =>
        expect(statesOf(await policyStatus(ns))).toEqual({ 'fast#0': 'Warmed', 'hung#0': 'Warming' }),
      {
        timeoutMs: 15_000,
      },
    );
    expect(fast.server.engine.counters.requests).toBe(1);
    const s = await policyStatus(ns);
    expect(s.conditions?.find((c) => c.type === 'Warmed')).toMatchObject({
      status: 'False',
      reason: 'Warming',
      message: '1 of 2 endpoint(s) warmed',
    });
  });

  // The bug this guards: the warmed mark was the pod name, so a restarted container
  // (same pod, empty cache) was never warmed again.
  it('warms a restarted container again: a new entry for its restart count', async () => {
    const ns = await createTestNamespace(kubeconfig, 'warmup');
    const runtime = await sim();
    await startController(ns);
    await setup(ns, [endpoint('a', runtime)]);
    await eventually(async () => expect(statesOf(await policyStatus(ns))).toEqual({ 'a#0': 'Warmed' }), {
      timeoutMs: 15_000,
    });
    expect(runtime.server.engine.counters.requests).toBe(1);
    await writeEndpoints(ns, [endpoint('a', runtime, 1)]);
    await eventually(async () => expect(statesOf(await policyStatus(ns))).toEqual({ 'a#1': 'Warmed' }), {
      timeoutMs: 15_000,
    });
    expect(runtime.server.engine.counters.requests).toBe(2);
  });

  it('says a missing document in the Warmed condition and an event, and does not crash-loop', async () => {
    const ns = await createTestNamespace(kubeconfig, 'warmup');
    const runtime = await sim();
    await startController(ns);
    await setup(ns, [endpoint('a', runtime)]);
    await eventually(async () => expect(statesOf(await policyStatus(ns))).toEqual({ 'a#0': 'Warmed' }));
    await kubectlOk(['delete', 'configmap', 'knowledge', '-n', ns], { kubeconfig });
    await writeEndpoints(ns, [endpoint('a', runtime), endpoint('b', runtime)]);
    await eventually(async () => {
      const s = await policyStatus(ns);
      expect(s.conditions?.find((c) => c.type === 'Warmed')).toMatchObject({
        status: 'False',
        reason: 'WarmupDocumentMissing',
        message: 'warm-up document knowledge/handbook.md not found: create the ConfigMap key',
      });
      expect(statesOf(s)).toEqual({ 'a#0': 'Warmed', 'b#0': 'Pending' });
    });
    await eventually(async () => {
      const events = await kubectlOk(['get', 'events.events.k8s.io', '-n', ns, '-o', 'json'], { kubeconfig });
      expect(events).toContain('WarmupDocumentMissing');
    });
  });
});
