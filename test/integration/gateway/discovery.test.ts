// Gateway discovery against a real kube-apiserver: Deployment and CachePolicy
// status written through the status subresource (as the operator would) reach
// the gateway's routing table, and real requests through build() reach only
// verified endpoints (in-process simulators on 127.0.0.1, where the status
// endpoints point), with the policy's cache salt stamped.
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { postJson, startSim, type RunningSim } from '../../support/sim/testing.ts';
import { startInProcessGateway, type InProcessGateway } from '../../support/gateway.ts';
import { createTestNamespace, eventually, kubectlOk, patchCacherouteStatus } from '../../support/kubectl.ts';
import { loadSample, REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');
const CRD_DIR = join(REPO_ROOT, 'crds');
const MODEL = 'llama-8b'; // servedName of examples/deployment-dense.yaml
const POLICY_SALT = 'team-a-salt-from-status';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

beforeAll(async () => {
  await kubectlOk(['apply', '--server-side', '-f', CRD_DIR], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', CRD_DIR], { kubeconfig });
});

async function startGateway(namespaces: string[]): Promise<InProcessGateway> {
  const gateway = await startInProcessGateway(kubeconfig, namespaces);
  cleanups.push(() => gateway.stop());
  return gateway;
}

async function startSims(n: number): Promise<RunningSim[]> {
  const sims = await Promise.all(
    Array.from({ length: n }, () => startSim(['--model-path', 'm', '--enable-cache-report'])),
  );
  cleanups.push(async () => void (await Promise.all(sims.map((s) => s.close()))));
  return sims;
}

const portOf = (sim: RunningSim): number => Number(new URL(sim.url).port);
const requestsOf = (sim: RunningSim): number => sim.server.engine.snapshot().counters.requests;

async function apply(ns: string, doc: unknown): Promise<void> {
  await kubectlOk(['apply', '-n', ns, '-f', '-'], { kubeconfig, input: JSON.stringify(doc) });
}

const patchStatus = (ns: string, resource: string, name: string, status: unknown) =>
  patchCacherouteStatus(kubeconfig, ns, resource, name, status);

/** Deployment status as the operator writes it: one endpoint per simulator, `verified` per pod. */
function deploymentStatus(sims: readonly RunningSim[], verified: readonly boolean[]) {
  const endpoints = sims.map((s, i) => ({
    pod: `llama-8b-${i}`,
    ip: '127.0.0.1',
    port: portOf(s),
    role: 'standalone',
    ready: true,
    verified: verified[i] ?? false,
    fingerprint: 'fp1',
    restartCount: 0,
  }));
  const routable = verified.some(Boolean);
  return {
    identity: { deploymentId: 'llama-3-1-8b-instruct-r1', fingerprint: 'fp1' },
    endpoints,
    routable: routable
      ? { value: true, reason: 'VerifiedEndpoints' }
      : { value: false, reason: 'NoVerifiedEndpoints', message: 'no endpoint is ready and verified' },
  };
}

async function createDeployment(ns: string): Promise<void> {
  await apply(ns, loadSample('deployment-dense.yaml'));
}

async function createPolicy(ns: string): Promise<void> {
  await apply(ns, loadSample('cachepolicy.yaml'));
  await patchStatus(ns, 'cachepolicies', 'team-a', {
    targets: [
      {
        name: 'llama-8b',
        accepted: true,
        reason: 'Accepted',
        deploymentId: 'llama-3-1-8b-instruct-r1',
        cacheSalt: POLICY_SALT,
      },
      { name: 'qwen-32b', accepted: false, reason: 'TargetNotFound' },
    ],
  });
}

const prompt = (seed: number, n = 400): number[] =>
  Array.from({ length: n }, (_, i) => 100 + ((seed * 7919 + i) % 30000));

async function generate(app: FastifyInstance, seed: number, headers: Record<string, string> = {}) {
  const res = await app.inject({
    method: 'POST',
    url: '/generate',
    headers,
    payload: { model: MODEL, input_ids: prompt(seed), sampling_params: { max_new_tokens: 1 } },
  });
  return {
    status: res.statusCode,
    endpoint: res.headers['x-cacheroute-endpoint'],
    body: res.json<Record<string, unknown>>(),
  };
}

describe('gateway discovery from Kubernetes status', () => {
  it('routes only to verified endpoints with the policy salt, follows verification, and drops a deleted Deployment', async () => {
    const ns = await createTestNamespace(kubeconfig, 'gw-disc');
    const sims = await startSims(2);
    const [sim0, sim1] = sims as [RunningSim, RunningSim];
    await createDeployment(ns);
    await patchStatus(ns, 'deployments', 'llama-8b', deploymentStatus(sims, [true, false]));
    await createPolicy(ns);

    const { watcher, app } = await startGateway([ns]);
    expect((await app.inject({ url: '/readyz' })).statusCode).toBe(503); // nothing listed yet
    await eventually(async () => expect((await app.inject({ url: '/readyz' })).statusCode).toBe(200));

    // The table: only the verified pod, the policy's salt and settings.
    const route = await eventually(() => {
      const r = watcher.table.lookup(MODEL);
      expect(r?.salt).toBe(POLICY_SALT);
      return r;
    });
    expect(route).toMatchObject({
      deployment: `${ns}/llama-8b`,
      fingerprint: 'fp1',
      routing: { policy: 'cache-aware', cacheAware: { balanceAbsThreshold: 32 } },
      admission: { maxConcurrency: 128, maxQueue: 512 },
      reuse: { enabled: true },
    });
    expect(route?.endpoints.map((e) => e.id)).toEqual([`${ns}/llama-8b-0`]);
    const models = (await app.inject({ url: '/v1/models' })).json<{ data: { id: string }[] }>();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);

    // Requests: every one to the verified pod, none to the unverified one.
    for (let i = 0; i < 6; i++) {
      const r = await generate(app, i);
      expect(r.status).toBe(200);
      expect(r.endpoint).toBe(`${ns}/llama-8b-0`);
    }
    expect(requestsOf(sim0)).toBe(6);
    expect(requestsOf(sim1)).toBe(0);

    // The salt was stamped: the runtime holds the prompt under the policy's salt only.
    const direct = (salt?: string) =>
      postJson(`${sim0.url}/generate`, {
        input_ids: prompt(0),
        sampling_params: { max_new_tokens: 1 },
        ...(salt ? { cache_salt: salt } : {}),
      }).then((r) => (r.json as { meta_info: { cached_tokens: number } }).meta_info.cached_tokens);
    expect(await direct()).toBe(0);
    expect(await direct(POLICY_SALT)).toBeGreaterThan(0);

    // Verification moves to the other pod: traffic follows, the unverified pod gets nothing.
    await patchStatus(ns, 'deployments', 'llama-8b', deploymentStatus(sims, [false, true]));
    await eventually(() =>
      expect(watcher.table.lookup(MODEL)?.endpoints.map((e) => e.id)).toEqual([`${ns}/llama-8b-1`]),
    );
    const before0 = requestsOf(sim0);
    for (let i = 10; i < 14; i++) expect((await generate(app, i)).endpoint).toBe(`${ns}/llama-8b-1`);
    expect(requestsOf(sim0)).toBe(before0);
    expect(requestsOf(sim1)).toBe(4);

    // Nothing verified: the model is still listed, and a request gets a 503 that says why.
    await patchStatus(ns, 'deployments', 'llama-8b', deploymentStatus(sims, [false, false]));
    await eventually(() => expect(watcher.table.lookup(MODEL)?.endpoints).toEqual([]));
    const none = await generate(app, 20);
    expect(none.status).toBe(503);
    expect(none.body).toMatchObject({ error: { code: 'GW_NO_ENDPOINT' } });

    // Deleting the Deployment removes the model: 404 with a JSON error.
    await kubectlOk(['delete', 'deployments.cacheroute.dev', 'llama-8b', '-n', ns], { kubeconfig });
    await eventually(() => expect(watcher.table.lookup(MODEL)).toBeUndefined());
    const gone = await generate(app, 21);
    expect(gone.status).toBe(404);
    expect(gone.body).toMatchObject({ error: { code: 'GW_MODEL_NOT_FOUND' } });
  });

  it('without an accepted CachePolicy: the namespace default salt and zod defaults', async () => {
    const ns = await createTestNamespace(kubeconfig, 'gw-disc');
    const sims = await startSims(1);
    await createDeployment(ns);
    await patchStatus(ns, 'deployments', 'llama-8b', deploymentStatus(sims, [true]));
    const { watcher } = await startGateway([ns]);
    const route = await eventually(() => {
      const r = watcher.table.lookup(MODEL);
      expect(r?.endpoints).toHaveLength(1);
      return r;
    });
    expect(route?.salt).toMatch(/^[0-9a-f]{32}$/);
    expect(route).toMatchObject({ routing: { policy: 'cache-aware' }, admission: { maxConcurrency: 64 } });

    // The policy arrives and the operator accepts it: the table picks up its salt.
    await createPolicy(ns);
    await eventually(() => expect(watcher.table.lookup(MODEL)?.salt).toBe(POLICY_SALT));
  });

  it('one served name in two namespaces: each keeps its claim, the younger is reported, an open client names the namespace', async () => {
    const older = await createTestNamespace(kubeconfig, 'gw-disc');
    const sims = await startSims(2);
    await createDeployment(older);
    await patchStatus(older, 'deployments', 'llama-8b', deploymentStatus(sims.slice(0, 1), [true]));
    // creationTimestamp has a resolution of one second: make the second one visibly newer.
    const createdOlder = await kubectlOk(
      [
        'get',
        'deployments.cacheroute.dev',
        'llama-8b',
        '-n',
        older,
        '-o',
        'jsonpath={.metadata.creationTimestamp}',
      ],
      { kubeconfig },
    );
    await eventually(() => expect(new Date().toISOString().slice(0, 19)).not.toBe(createdOlder.slice(0, 19)));
    const newer = await createTestNamespace(kubeconfig, 'gw-disc');
    await createDeployment(newer);
    await patchStatus(newer, 'deployments', 'llama-8b', deploymentStatus(sims.slice(1), [true]));

    const { watcher, app } = await startGateway([newer, older]);
    await eventually(() => expect(watcher.table.ready).toBe(true));
    await eventually(() => expect(watcher.table.candidates(MODEL)).toHaveLength(2));
    expect(watcher.issues).toContainEqual({
      code: 'SharedModelName',
      path: `Deployment ${newer}/llama-8b`,
      model: MODEL,
      firstClaimedBy: `${older}/llama-8b`,
      message: expect.stringContaining(`namespace ${older} served`),
    });
    // An open gateway knows no caller: it never picks a namespace for the client.
    const unnamed = await generate(app, 1);
    expect(unnamed.status).toBe(409);
    expect(unnamed.body).toMatchObject({ error: { code: 'GW_MODEL_AMBIGUOUS' } });
    const ns = (n: string) => ({ 'x-cacheroute-namespace': n });
    expect((await generate(app, 2, ns(newer))).endpoint).toBe(`${newer}/llama-8b-0`);
    expect((await generate(app, 3, ns(older))).endpoint).toBe(`${older}/llama-8b-0`);

    // The older one goes away: the newer serves the name alone, no header needed.
    await kubectlOk(['delete', 'deployments.cacheroute.dev', 'llama-8b', '-n', older], { kubeconfig });
    await eventually(() => expect(watcher.table.candidates(MODEL)).toHaveLength(1));
    expect((await generate(app, 4)).endpoint).toBe(`${newer}/llama-8b-0`);
  });

  it('a weighted split moves traffic 0 -> 10 -> 100% to a new identity under load and loses no request', async () => {
    const ns = await createTestNamespace(kubeconfig, 'gw-split');
    const sims = await startSims(2);
    const [simOld, simNew] = sims as [RunningSim, RunningSim];
    const deployment = (name: string, deploymentId: string, weight: number) => {
      const doc = loadSample('deployment-dense.yaml') as {
        metadata: { name: string };
        spec: Record<string, unknown>;
      };
      doc.metadata.name = name;
      doc.spec['deploymentId'] = deploymentId;
      doc.spec['traffic'] = { weight };
      return doc;
    };
    const statusOf = (sim: RunningSim, deploymentId: string, pod: string) => ({
      identity: { deploymentId, fingerprint: deploymentId },
      endpoints: [
        {
          pod,
          ip: '127.0.0.1',
          port: portOf(sim),
          role: 'standalone',
          ready: true,
          verified: true,
          fingerprint: deploymentId,
          restartCount: 0,
        },
      ],
      routable: { value: true, reason: 'VerifiedEndpoints' },
    });
    const weigh = async (oldWeight: number, newWeight: number) => {
      await apply(ns, deployment('llama-8b', 'llama-r1', oldWeight));
      await apply(ns, deployment('llama-8b-r2', 'llama-r2', newWeight));
    };
    await weigh(100, 0);
    await patchStatus(ns, 'deployments', 'llama-8b', statusOf(simOld, 'llama-r1', 'old-0'));
    await patchStatus(ns, 'deployments', 'llama-8b-r2', statusOf(simNew, 'llama-r2', 'new-0'));
    const { watcher, app } = await startGateway([ns]);
    await eventually(() => expect(watcher.table.candidates(MODEL).map((r) => r.weight)).toEqual([100, 0]));

    // Requests flow the whole time; each phase counts where they went.
    let phase = 'at 0%';
    const seen = new Map<string, { old: number; new: number }>();
    const statuses = new Map<number, number>();
    let stop = false;
    const load = (async () => {
      for (let i = 0; !stop; i++) {
        const r = await generate(app, i % 50);
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        const counts = seen.get(phase) ?? { old: 0, new: 0 };
        if (r.endpoint === `${ns}/old-0`) counts.old++;
        if (r.endpoint === `${ns}/new-0`) counts.new++;
        seen.set(phase, counts);
      }
    })();
    // From the first apply until the table shows both weights, requests count as moving.
    const move = async (oldWeight: number, newWeight: number) => {
      phase = 'moving';
      await weigh(oldWeight, newWeight);
    };
    const settle = async (weights: number[], name: string, requests: number) => {
      await eventually(() =>
        expect(
          watcher.table
            .candidates(MODEL)
            .map((r) => r.weight)
            .sort(),
        ).toEqual(weights),
      );
      phase = name;
      await eventually(
        () => expect((seen.get(name)?.old ?? 0) + (seen.get(name)?.new ?? 0)).toBeGreaterThan(requests),
        {
          timeoutMs: 60_000,
        },
      );
    };
    await settle([0, 100], 'at 0%', 100);
    await move(90, 10);
    await settle([10, 90], 'at 10%', 400);
    await move(0, 100);
    await settle([0, 100], 'at 100%', 100);
    stop = true;
    await load;

    expect([...statuses.keys()]).toEqual([200]);
    expect(seen.get('at 0%')?.new).toBe(0);
    const ten = seen.get('at 10%') ?? { old: 0, new: 0 };
    expect(ten.new / (ten.old + ten.new)).toBeGreaterThan(0.04);
    expect(ten.new / (ten.old + ten.new)).toBeLessThan(0.18);
    expect(seen.get('at 100%')?.old).toBe(0);
    // Identities never share cache: each runtime holds prompts under its own Deployment's salt.
    const [saltOld, saltNew] = ['llama-8b', 'llama-8b-r2'].map(
      (d) => watcher.table.candidates(MODEL).find((r) => r.deployment === `${ns}/${d}`)?.salt,
    );
    expect(saltOld).not.toBe(saltNew);
    expect(requestsOf(simNew)).toBeGreaterThan(0);
  }, 180_000);
});
