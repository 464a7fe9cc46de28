// The runtimes' own API keys (SGLang's --api-key): a runtime started with one
// refuses whoever does not send it, the gateway included, and the gateway
// sends the key of the runtime's Deployment and fingerprint.

import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { postJson, startSim, type RunningSim } from '../../test/support/sim/testing.ts';
import { build } from './app.ts';
import { RuntimeKeys } from './discovery/runtime-keys.ts';
import { StaticRoutingTable, type ModelRoute } from './routing/table.ts';

const KEY = 'f'.repeat(64);
let sim: RunningSim | undefined;
let app: FastifyInstance | undefined;

afterEach(async () => {
  await app?.close();
  await sim?.close();
  app = undefined;
  sim = undefined;
});

function routeTo(url: string, fingerprint: string): ModelRoute {
  return {
    model: 'm',
    deployment: 'ns/m',
    fingerprint,
    salt: 's',
    routing: RoutingSettings.parse({ policy: 'round-robin' }),
    admission: Admission.parse({}),
    reuse: ResultReuse.parse({}),
    endpoints: [{ id: 'pod-0', url, role: 'standalone', fingerprint, verified: true, ready: true }],
  };
}

function keysOf(entries: Record<string, Record<string, string>>): RuntimeKeys {
  const keys = new RuntimeKeys();
  keys.replace({
    keys: new Map(Object.entries(entries).map(([d, m]) => [d, new Map(Object.entries(m))])),
    issues: [],
  });
  keys.ready = true;
  return keys;
}

const completion = { model: 'm', prompt: 'Say hello.', max_tokens: 2 };

describe('a runtime started with --api-key behind the gateway', () => {
  it('refuses a request without the key; the gateway sends the key and is answered', async () => {
    sim = await startSim(['--model-path', 'm', '--api-key', KEY]);
    const direct = await postJson(`${sim.url}/v1/completions`, completion);
    expect(direct).toMatchObject({ status: 401, json: { error: 'Unauthorized' } });

    app = build({
      table: new StaticRoutingTable([routeTo(sim.url, 'fp1')]),
      runtimeKeys: keysOf({ 'ns/m': { fp1: KEY } }),
    });
    const res = await app.inject({ method: 'POST', url: '/v1/completions', payload: completion });
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain(KEY);
  });

  it("sends the key of the endpoint's own fingerprint, and none for a runtime it has no key for", async () => {
    sim = await startSim(['--model-path', 'm', '--api-key', KEY]);
    // The key Secret holds another fingerprint's key only: nothing to send, and the runtime refuses.
    app = build({
      table: new StaticRoutingTable([routeTo(sim.url, 'fp2')]),
      runtimeKeys: keysOf({ 'ns/m': { fp1: KEY, fp2: 'x'.repeat(64) } }),
    });
    // The runtime's 401 is the gateway's failure (the client's key is the gateway's to check): a 502 that says why.
    const wrong = await app.inject({ method: 'POST', url: '/v1/completions', payload: completion });
    expect(wrong.statusCode).toBe(502);
    expect(wrong.json()).toMatchObject({
      error: {
        code: 'GW_UPSTREAM_ERROR',
        message: expect.stringContaining("refused the gateway's runtime API key"),
      },
    });
    await app.close();
    app = build({ table: new StaticRoutingTable([routeTo(sim.url, 'fp1')]) });
    const none = await app.inject({ method: 'POST', url: '/v1/completions', payload: completion });
    expect(none.statusCode).toBe(502);
  });
});
