// A runtime image is the namespace user's: what it reports about itself must
// not take the shared gateway down. Two simulators behind one gateway, its
// table built by discovery from Deployment objects whose status carries what
// each runtime's /server_info advertised (as the operator copies it,
// lib/api/publishers.ts). One lies: its dp_size is 2^32, where its spec
// declares one data-parallel rank. The gateway leaves that endpoint out, says
// why on /status, and keeps routing the other Deployment.

import { afterEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { KvEventsAdvert, toEndpointEvents } from '#api/publishers.ts';
import type { KubeObject } from '#kube/objects.ts';
import { eventually } from '../../test/support/gateway/fake-upstream.ts';
import { MemoryApi } from '../../test/support/gateway/memory-api.ts';
import { loadSample } from '../../test/support/samples.ts';
import { findFreePort, startSim, type RunningSim } from '../../test/support/sim/testing.ts';
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

/** A simulator serving `model` with KV events on; `hostile` flags are the simulator's lies. */
async function startRuntime(model: string, hostile: readonly string[]): Promise<RunningSim> {
  const config = { publisher: 'zmq', endpoint: `tcp://*:${await findFreePort()}`, topic: 'kv' };
  const sim = await startSim([
    '--model-path',
    model,
    '--page-size',
    '16',
    '--kv-events-config',
    JSON.stringify(config),
    ...hostile,
  ]);
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

describe('a hostile runtime', () => {
  it('is left out with its reason on /status while the other Deployment keeps routing', async () => {
    const honest = await startRuntime('honest', []);
    const liar = await startRuntime('liar', ['--sim-report-dp-size', String(LIE)]);
    const api = new MemoryApi();
    api.put('deployments', await describeDeployment('honest', honest));
    api.put('deployments', await describeDeployment('liar', liar));
    api.gate.open();
    watcher = new DiscoveryWatcher({ client: api, coalesceMs: 0 });
    const w = watcher;
    app = build({ table: w.table, discoveryIssues: () => w.issues });
    w.start();
    await eventually(() => w.table.ready);

    const served = await app.inject({
      method: 'POST',
      url: '/generate',
      payload: { model: 'honest', text: 'hello', sampling_params: { max_new_tokens: 2 } },
    });
    expect(served.statusCode).toBe(200);
    const refused = await app.inject({
      method: 'POST',
      url: '/generate',
      payload: { model: 'liar', text: 'hello', sampling_params: { max_new_tokens: 2 } },
    });
    expect(refused.json<{ error: { code: string } }>().error.code).toBe('GW_NO_ENDPOINT');

    const status = (await app.inject({ url: '/status.json' })).json<StatusView>();
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
});
