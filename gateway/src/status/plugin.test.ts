// The status routes and hooks through the app, against scriptable fake upstreams.

import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { build } from '../app.ts';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { StaticRoutingTable, type ModelRoute } from '../routing/table.ts';
import { startFakeUpstream, type FakeUpstream } from '../../../test/support/gateway/fake-upstream.ts';
import { buildTestEndpoint, buildTestRoute } from '../../../test/support/gateway/routes.ts';
import { StatusView, type EndpointStatus } from './view.ts';

let up: FakeUpstream;
let app: FastifyInstance;

function route(over: Partial<ModelRoute> = {}): ModelRoute {
  return buildTestRoute(
    [buildTestEndpoint('a', up.url), buildTestEndpoint('u', up.url, { verified: false })],
    {},
    over,
  );
}

beforeEach(async () => {
  up = await startFakeUpstream();
  app = build({ table: new StaticRoutingTable([route()]), clock: new ManualClock() });
});
afterEach(async () => {
  await app.close();
  await up.close();
});

const statusOf = async (id: string): Promise<EndpointStatus | undefined> => {
  const r = await app.inject({ method: 'GET', url: '/status.json' });
  expect(r.statusCode).toBe(200);
  const v = StatusView.parse(r.json());
  return v.deployments[0]?.endpoints.find((e) => e.id === id);
};
const chat = (over: object = {}) => ({
  method: 'POST' as const,
  url: '/v1/chat/completions',
  payload: { model: 'm', messages: [{ role: 'user', content: 'hi' }], ...over },
});

describe('/status and /status.json', () => {
  it('serves the page with a strict CSP', async () => {
    const r = await app.inject({ method: 'GET', url: '/status' });
    expect(r.statusCode).toBe(200);
    expect(r.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(r.headers['content-security-policy']).toContain("default-src 'none'");
    expect(r.body).toContain('<tr data-endpoint="a">');
    expect(r.body).toContain('unverified');
    const part = await app.inject({ method: 'GET', url: '/status?part=main' });
    expect(part.body).not.toContain('<html');
    expect(part.body).toContain('<tr data-endpoint="a">');
  });

  it('counts served answers and the runtime-reported cache hits; reused answers are not served twice', async () => {
    up.cachedTokens = 12; // of 16 prompt tokens
    expect((await app.inject(chat())).statusCode).toBe(200);
    expect(await statusOf('a')).toMatchObject({
      served: 1,
      routed: 1,
      promptTokens: 16,
      cachedTokens: 12,
      cacheHitRate: 0.75,
    });
    // Greedy: reusable; the second answer comes from the store, not from the endpoint.
    await app.inject(chat({ temperature: 0 }));
    const reused = await app.inject(chat({ temperature: 0 }));
    expect(reused.headers['x-cacheroute-reused']).toBe('store');
    expect(await statusOf('a')).toMatchObject({ served: 2 });
    expect(await statusOf('u')).toMatchObject({ served: 0, routable: false, cacheHitRate: null });
  });

  it('counts streamed answers (written past fastify) by their endpoint header', async () => {
    const base = await app
      .listen({ port: 0, host: '127.0.0.1' })
      .then(() => `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    expect(res.headers.get('x-cacheroute-endpoint')).toBe('a');
    await res.text();
    await expect.poll(async () => (await statusOf('a'))?.served).toBe(1);
  });

  it('records the last error per deployment when the gateway answers itself', async () => {
    up.mode = 'fail';
    const r = await app.inject(chat());
    expect(r.statusCode).toBe(502);
    const v = StatusView.parse((await app.inject({ method: 'GET', url: '/status.json' })).json());
    expect(v.deployments[0]?.lastError).toMatchObject({ status: 502, code: 'GW_UPSTREAM_ERROR' });
    expect(v.deployments[0]?.lastError?.message).not.toContain('secret upstream detail');
    // The endpoint's own row counts the failed attempt with its reason.
    expect((await statusOf('a'))?.failedAttempts).toEqual({
      connect: 0,
      timeout: 0,
      status: 1,
      interrupted: 0,
    });
  });
});
