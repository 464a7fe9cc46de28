// A runtime image is the namespace user's: what it reports about itself must
// not take the shared gateway down. Two simulators behind one gateway, its
// table built by discovery from Deployment objects whose status carries what
// each runtime's /server_info advertised (as the operator copies it,
// lib/api/publishers.ts). One lies: its dp_size is 2^32, where its spec
// declares one data-parallel rank. The gateway leaves that endpoint out, says
// why on /status, and keeps routing the other Deployment. Another floods: each
// of its KV event batches stores thousands of blocks it never cached; the
// gateway's block budget evicts the flooder's own oldest blocks, counts them
// in a metric, and the honest runtime's index stays whole.

import { afterEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { KvEventsAdvert, toEndpointEvents } from '#api/publishers.ts';
import type { KubeObject } from '#kube/objects.ts';
import { eventually } from '../../test/support/gateway/fake-upstream.ts';
import { MemoryApi } from '../../test/support/gateway/memory-api.ts';
import { loadSample } from '../../test/support/samples.ts';
import { startSimWithKvEvents, type RunningSim } from '../../test/support/sim/testing.ts';
import { build } from './app.ts';
import { DiscoveryWatcher } from './discovery/watcher.ts';
import type { StatusView } from './status/view.ts';

const LIE = 2 ** 32;

let sims: RunningSim[] = [];
let app: FastifyInstance | undefined;
let watcher: DiscoveryWatcher | undefined;

afterEach(async () => {
  await app?.close();
  await watcher?.stop();
  await Promise.all(sims.map((s) => s.close()));
  [sims, app, watcher] = [[], undefined, undefined];
});

/** A simulator serving `model` with KV events on (and a replay); `hostile` flags are the simulator's lies. */
async function startRuntime(model: string, hostile: readonly string[]): Promise<RunningSim> {
  // The event sockets are bound on ports the kernel picks, and /server_info advertises those.
  const sim = await startSimWithKvEvents(['--model-path', model, '--page-size', '16', ...hostile]);
  sims.push(sim);
  return sim;
}

/** The Deployment object as the operator leaves it: a verified endpoint and the events it advertised. */
async function describeDeployment(name: string, sim: RunningSim): Promise<KubeObject> {
  const info = (await (await fetch(`${sim.url}/server_info`)).json()) as { kv_events: unknown };
  const events = toEndpointEvents(KvEventsAdvert.parse(info.kv_events));
  const doc = loadSample('deployment-dense.yaml') as unknown as KubeObject & { spec: { model: object } };
  doc.metadata = { name, namespace: 'team', creationTimestamp: '2026-01-01T00:00:00Z' };
  doc.spec.model = { ...doc.spec.model, servedName: name };
  doc['status'] = {
    identity: { deploymentId: `${name}-r1`, fingerprint: 'fp1' },
    endpoints: [
      {
        pod: `${name}-0`,
        ip: '127.0.0.1',
        port: Number(new URL(sim.url).port),
        role: 'standalone',
        ready: true,
        verified: true,
        fingerprint: 'fp1',
        ...(events ? { events } : {}),
      },
    ],
    routable: { value: true, reason: 'VerifiedEndpoints' },
  };
  return doc;
}

/** Discovery over the Deployments of `runtimes` (name → simulator), and the gateway it feeds. */
async function startGateway(
  runtimes: Record<string, RunningSim>,
  kvIndexMaxBlocks?: number,
): Promise<{ app: FastifyInstance; watcher: DiscoveryWatcher }> {
  const api = new MemoryApi();
  for (const [name, sim] of Object.entries(runtimes))
    api.put('deployments', await describeDeployment(name, sim));
  api.gate.open();
  const w = new DiscoveryWatcher({ client: api, coalesceMs: 0 });
  const a = build({
    table: w.table,
    discoveryIssues: () => w.issues,
    ...(kvIndexMaxBlocks ? { kvIndexMaxBlocks } : {}),
  });
  [app, watcher] = [a, w];
  w.start();
  await eventually(() => w.table.ready);
  return { app: a, watcher: w };
}

/** Polls (20 ms apart, 10 s at most) until `cond` holds: events cross ZMQ sockets between processes' threads. */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 20));
  expect(cond()).toBe(true);
}

const generate = (model: string, text: string) => ({
  method: 'POST' as const,
  url: '/generate',
  payload: { model, text, sampling_params: { max_new_tokens: 1 } },
});

describe('a hostile runtime', () => {
  it('is left out with its reason on /status while the other Deployment keeps routing', async () => {
    const honest = await startRuntime('honest', []);
    const liar = await startRuntime('liar', ['--sim-report-dp-size', String(LIE)]);
    const { app: a } = await startGateway({ honest, liar });

    expect((await a.inject(generate('honest', 'hello'))).statusCode).toBe(200);
    const refused = await a.inject(generate('liar', 'hello'));
    expect(refused.json<{ error: { code: string } }>().error.code).toBe('GW_NO_ENDPOINT');

    const status = (await a.inject({ url: '/status.json' })).json<StatusView>();
    expect(status.discoveryIssues).toEqual([
      {
        code: 'RuntimeOutOfBounds',
        path: 'Deployment team/liar',
        model: 'liar',
        message: `endpoint team/liar-0 reports ${LIE} data-parallel ranks; its spec declares 1 (parallelism.data): left out of routing`,
      },
    ]);
    expect(status.deployments.map((d) => [d.model, d.routableEndpoints])).toEqual([
      ['honest', 1],
      ['liar', 0],
    ]);
  });

  it('that floods KV events evicts its own blocks within the budget, and the honest index stays whole', async () => {
    const honest = await startRuntime('honest', []);
    const flood = await startRuntime('flood', ['--sim-flood-blocks', '3000']);
    const { app: a } = await startGateway({ honest, flood }, 2048);
    const fleet = a.gateway.kvIndex;
    const rankOf = (id: string) => fleet.status().find((s) => s.endpoint === id)?.ranks[0];
    const blocksOf = (id: string): number => rankOf(id)?.blocks ?? 0;
    await until(() => fleet.usability('team/honest-0').usable && fleet.usability('team/flood-0').usable);

    // 40 pages of 16 tokens in the honest runtime's cache, and in the gateway's index of it.
    expect((await a.inject(generate('honest', 'a b c d '.repeat(80)))).statusCode).toBe(200);
    await until(() => blocksOf('team/honest-0') > 0);
    const honestBlocks = blocksOf('team/honest-0');
    // Each request the flooder serves stores pages: its batch carries 3,000 blocks more.
    for (let i = 0; i < 3; i++)
      expect((await a.inject(generate('flood', `flood ${i} `.repeat(40)))).statusCode).toBe(200);
    await until(() => (rankOf('team/flood-0')?.counters.applied ?? 0) >= 4);

    expect(fleet.budget.total).toBeLessThanOrEqual(2048);
    expect(blocksOf('team/honest-0')).toBe(honestBlocks);
    expect(blocksOf('team/flood-0')).toBe(2048 - honestBlocks);
    expect(fleet.budget.evicted).toBeGreaterThan(3 * 3000);
    const metrics = (await a.inject({ url: '/metrics' })).body;
    expect(metrics).toMatch(/^cacheroute_gateway_kv_index_evicted_blocks_total [1-9]\d*$/m);
    expect((await a.inject(generate('honest', 'a b c d '.repeat(80)))).statusCode).toBe(200);
  }, 30_000);
});
