// The gateway end to end with the operator: apply a sample, the operator
// verifies each runtime, the gateway discovers only verified endpoints from
// status, and a chat request is served; a runtime that reports another
// identity receives nothing. Real control plane, KWOK GPU nodes, a simulator
// on every pod IP.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CachePolicyStatus, DeploymentStatus } from '#api';
import { startOperator, type Operator } from '../../operator/src/operator.ts';
import { createLogger } from '#kube/logger.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../support/builders.ts';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { startInProcessGateway, testKeysSecret, type InProcessGateway } from '../support/gateway.ts';
import { eventually, kubectlOk } from '../support/kubectl.ts';
import { REPO_ROOT } from '../support/samples.ts';
import { startSimKubelet, type SimKubelet } from '../support/sim-kubelet.ts';

const NS = 'e2e-gateway';
let cp: ControlPlane;
let kubelet: SimKubelet;
let operator: Operator;
let gateway: InProcessGateway;
// Once set, every pod of `llama` not in this set is an impostor (known before its simulator starts).
let honestPods: Set<string> | undefined;
const isImpostor = (pod: { metadata?: { name?: string; labels?: Record<string, string> } }): boolean =>
  honestPods !== undefined &&
  pod.metadata?.labels?.['cacheroute.dev/deployment'] === 'llama' &&
  !honestPods.has(pod.metadata.name ?? '');

const k = (args: string[], input?: string) =>
  kubectlOk(['-n', NS, ...args], { kubeconfig: cp.kubeconfig, ...(input ? { input } : {}) });
const status = async (name: string): Promise<DeploymentStatus> =>
  (JSON.parse(await k(['get', 'sgd', name, '-o', 'json'])) as { status?: DeploymentStatus }).status ?? {};
const requestsOf = (pod: string): number =>
  kubelet.sims.get(pod)?.server.engine.snapshot().counters.requests ?? 0;

/** One token of a chat through the gateway that starts with `system`, as a team's requests do. */
const chatWithSystem = (system: string, question: string) =>
  gateway.app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    payload: {
      model: 'llama-8b',
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: question },
      ],
      max_tokens: 1,
    },
  });

/** A chat through the gateway, sent until it is served (the gateway's table follows status). */
const chatUntilServed = (model: string, content: string, maxTokens: number) =>
  eventually(
    async () => {
      const r = await gateway.app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        payload: { model, messages: [{ role: 'user', content }], max_tokens: maxTokens },
      });
      expect(r.statusCode).toBe(200);
      return r;
    },
    { timeoutMs: 30_000 },
  );

beforeAll(async () => {
  cp = await startControlPlane({ full: true, gpuNodes: 1 });
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig: cp.kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], {
    kubeconfig: cp.kubeconfig,
  });
  await kubectlOk(['create', 'namespace', NS], { kubeconfig: cp.kubeconfig });
  kubelet = await startSimKubelet({
    kubeconfig: cp.kubeconfig,
    extraArgs: (pod) => (isImpostor(pod) ? ['--served-model-name', 'not-llama'] : []),
  });
  // The gateway listens: the operator reads its cache report for the CacheHealthy condition.
  gateway = await startInProcessGateway(cp.kubeconfig, [NS], { listen: true });
  operator = await startOperator({
    kubeconfig: cp.kubeconfig,
    logger: createLogger({ level: 'warn' }),
    leaderElection: false,
    http: false,
    cacheHealth: { periodMs: 1_000, gatewayAdminUrl: gateway.url },
    gatewayKeysSecret: testKeysSecret(NS),
  });
});

afterAll(async () => {
  await gateway?.stop();
  await operator?.stop();
  await kubelet?.stop();
  await cp?.stop();
});

describe('gateway with the operator', () => {
  it('discovers the verified endpoints of a sample and serves a chat completion', async () => {
    await k(['apply', '-f', '-'], JSON.stringify(buildDeploymentManifest({ name: 'llama', replicas: 2 })));
    await k(['apply', '-f', '-'], JSON.stringify(buildCachePolicyManifest('team-a', ['llama'])));
    await eventually(async () => expect((await status('llama')).verifiedReplicas).toBe(2), {
      timeoutMs: 60_000,
    });
    const res = await chatUntilServed('llama-8b', 'Hello through the gateway', 8);
    const body = res.json<{
      choices: { message: { content: string } }[];
      usage: { completion_tokens: number };
    }>();
    expect(body.usage.completion_tokens).toBe(8);
    const endpoint = String(res.headers['x-cacheroute-endpoint']);
    expect(endpoint).toMatch(new RegExp(`^${NS}/llama-sglang-`));
    expect(requestsOf(endpoint.split('/')[1] ?? '')).toBeGreaterThan(0);
  });

  it('never sends a request to an endpoint whose runtime reports another identity', async () => {
    // Delete one pod and make its replacement an impostor: the operator refuses it, the gateway skips it.
    const pods = (
      await k([
        'get',
        'pods',
        '-l',
        'cacheroute.dev/deployment=llama',
        '-o',
        'jsonpath={.items[*].metadata.name}',
      ])
    ).split(' ');
    const keep = pods[0] ?? '';
    honestPods = new Set(pods);
    await k(['delete', 'pod', pods[1] ?? '', '--wait=false']);
    const impostor = await eventually(
      async () => {
        const now = (
          await k([
            'get',
            'pods',
            '-l',
            'cacheroute.dev/deployment=llama',
            '-o',
            'jsonpath={.items[*].metadata.name}',
          ])
        ).split(' ');
        const fresh = now.find((p) => p && !honestPods?.has(p));
        expect(fresh).toBeDefined();
        return fresh ?? '';
      },
      { timeoutMs: 30_000 },
    );
    await eventually(
      async () => {
        const e = (await status('llama')).endpoints?.find((x) => x.pod === impostor);
        expect(e).toMatchObject({ ready: true, verified: false, reason: 'IdentityMismatch' });
      },
      { timeoutMs: 60_000 },
    );
    await eventually(() => expect(kubelet.sims.has(impostor)).toBe(true), { timeoutMs: 30_000 });
    for (let i = 0; i < 12; i++) {
      const r = await gateway.app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        payload: { model: 'llama-8b', messages: [{ role: 'user', content: `request ${i}` }], max_tokens: 2 },
      });
      expect(r.statusCode).toBe(200);
      expect(r.headers['x-cacheroute-endpoint']).toBe(`${NS}/${keep}`);
    }
    expect(requestsOf(impostor)).toBe(0);
  });

  // Issue 14 item 4: warm-up keeps its promise. The operator prefills the policy's document on
  // each verified replica as a chat system message (off its reconcile loop), records it per
  // container instance, the gateway routes once the mark is there, and the first user chat
  // that starts with the same system message finds it cached on the replica that serves it.
  it('warms each replica before traffic: the first chat through the gateway reports the system message cached', async () => {
    const handbook = `Shared knowledge. ${'Every replica starts with this prefix in its cache. '.repeat(8)}`;
    await k(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'knowledge' },
        data: { 'handbook.md': handbook },
      }),
    );
    await k(
      ['apply', '-f', '-'],
      JSON.stringify(
        buildCachePolicyManifest('team-a', ['llama'], {
          warmup: { documents: [{ name: 'knowledge', key: 'handbook.md' }], routeAfterSeconds: 600 },
        }),
      ),
    );
    const serving = ((await status('llama')).endpoints ?? []).filter((e) => e.ready && e.verified);
    expect(serving.length).toBeGreaterThan(0);
    await eventually(
      async () => {
        const p = JSON.parse(await k(['get', 'cachepolicies.cacheroute.dev', 'team-a', '-o', 'json'])) as {
          status?: CachePolicyStatus;
        };
        const warmed = (p.status?.targets?.[0]?.warmup ?? []).filter((e) => e.state === 'Warmed');
        expect(warmed.map((e) => `${e.pod}#${e.restartCount}`).sort()).toEqual(
          serving.map((e) => `${e.pod}#${e.restartCount ?? 0}`).sort(),
        );
        expect(p.status?.conditions?.find((c) => c.type === 'Warmed')).toMatchObject({
          status: 'True',
          reason: 'AllEndpointsWarmed',
        });
      },
      { timeoutMs: 60_000 },
    );
    // The gateway reads the mark: every serving replica is warmed, none held.
    await eventually(
      () => {
        const route = gateway.watcher.table.lookup('llama-8b');
        expect(route?.endpoints.map((e) => e.warmup?.state)).toEqual(serving.map(() => 'warmed'));
      },
      { timeoutMs: 30_000 },
    );
    const r = await chatWithSystem(handbook, 'What is in every cache?');
    expect(r.statusCode).toBe(200);
    const usage = r.json<{
      usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
    }>().usage;
    // The system message as the runtime's template renders it, in whole pages (16 tokens):
    // only the last partial page, the user's turn and the cue are new.
    expect(usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(50);
    expect(usage.prompt_tokens - usage.prompt_tokens_details.cached_tokens).toBeLessThan(16 + 20);
  });

  // Issue 14 item 3: cache health in status. The operator reads the runtimes' own counters and
  // the gateway's predictions; the Deployment says what it found, the CachePolicy shows the rate.
  it('publishes the cache hit rate beside what routing predicted, as CacheHealthy and in kubectl get', async () => {
    const manual = `Operations manual. ${'A long shared preamble every request of this team starts with. '.repeat(30)}`;
    for (let i = 0; i < 12; i++) {
      const r = await chatWithSystem(manual, `Question ${i}: what does the manual say?`);
      expect(r.statusCode).toBe(200);
    }
    await eventually(
      async () => {
        const s = await status('llama');
        expect(s.conditions?.find((c) => c.type === 'CacheHealthy')).toMatchObject({
          status: 'True',
          reason: 'Healthy',
          message: expect.stringContaining('routing expected') as unknown,
        });
        expect(s.cache?.promptTokens).toBeGreaterThan(1_000);
        expect(s.cache?.hitRate).toBeGreaterThan(0.5);
        expect(s.cache?.predictedHitRate).toBeGreaterThan(0.5);
      },
      { timeoutMs: 30_000 },
    );
    const hitRate = (await status('llama')).cache?.hitRate;
    await eventually(
      async () => {
        const p = JSON.parse(await k(['get', 'cachepolicies.cacheroute.dev', 'team-a', '-o', 'json'])) as {
          status?: CachePolicyStatus;
        };
        expect(p.status?.targets?.[0]?.hitRate).toBe(hitRate);
      },
      { timeoutMs: 30_000 },
    );
    const table = await k(['get', 'sgd', 'llama', '-o', 'wide']);
    expect(table.split('\n')[0]).toMatch(/HIT-RATE .*CACHE/);
    expect(table).toContain('Healthy');
  });

  // Issue 31: spec.serving.priorityScheduling, from the spec to the runtime's argv, its verified
  // status, and the gateway's stamp, which goes only to the endpoints that order by it.
  it('renders priority scheduling into the runtime, verifies it, and stamps only those runtimes', async () => {
    const m = buildDeploymentManifest({ name: 'ordered', replicas: 1 });
    m.spec['model'] = { ...(m.spec['model'] as object), servedName: 'ordered-8b' };
    m.spec['serving'] = { ...(m.spec['serving'] as object), priorityScheduling: true };
    await k(['apply', '-f', '-'], JSON.stringify(m));
    await k(['apply', '-f', '-'], JSON.stringify(buildCachePolicyManifest('team-b', ['ordered'])));
    await eventually(async () => expect((await status('ordered')).verifiedReplicas).toBe(1), {
      timeoutMs: 60_000,
    });
    const [endpoint] = (await status('ordered')).endpoints ?? [];
    expect(endpoint?.reported?.priorityScheduling).toBe(true);
    const sim = kubelet.sims.get(endpoint?.pod ?? '');
    expect(sim?.argv).toEqual(
      expect.arrayContaining(['--enable-priority-scheduling', '--disable-priority-preemption']),
    );
    const at = sim?.argv.indexOf('--default-priority-value') ?? -1;
    expect(sim?.argv.slice(at, at + 2)).toEqual(['--default-priority-value', '0']);
    const prioritized = (pod: string): number =>
      kubelet.sims.get(pod)?.server.engine.snapshot().counters.prioritized ?? -1;
    await chatUntilServed('ordered-8b', 'In order, please', 1);
    expect(prioritized(endpoint?.pod ?? '')).toBeGreaterThan(0);
    // llama's runtimes run FCFS: the requests of the tests above went without a stamp.
    const llama = ((await status('llama')).endpoints ?? []).map((e) => e.pod);
    expect(llama.length).toBeGreaterThan(0);
    expect(llama.map(prioritized)).toEqual(llama.map(() => 0));
    expect(llama.map(requestsOf).some((n) => n > 0)).toBe(true);
  });
});
