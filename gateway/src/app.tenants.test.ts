// The gateway with API keys: who may call, which models, how often, and in
// which cache namespace; and the open mode, loudly reported.
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { digestApiKey, type ApiKeyDigests } from '#api/gateway-keys.ts';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { build } from './app.ts';
import { ManualClock } from '../../test/support/manual-clock.ts';
import { StaticRoutingTable, type ModelRoute } from './routing/table.ts';
import { buildTenantDirectory } from './tenancy/build-directory.ts';
import { KeyDirectory } from './tenancy/tenant.ts';
import { startFakeUpstream, type FakeUpstream } from '../../test/support/gateway/fake-upstream.ts';

const KEY_A = 'a'.repeat(40);
const KEY_B = 'b'.repeat(40);

let up: FakeUpstream;
let app: FastifyInstance;
let clock: ManualClock;

function route(model: string, over: Partial<ModelRoute> = {}): ModelRoute {
  return {
    model,
    deployment: `ns/${model}`,
    fingerprint: 'fp1',
    salt: 'policy-salt',
    routing: RoutingSettings.parse({ policy: 'round-robin' }),
    admission: Admission.parse({ adaptive: false }),
    reuse: ResultReuse.parse({}),
    endpoints: [
      { id: 'e', url: up.url, role: 'standalone', fingerprint: 'fp1', verified: true, ready: true },
    ],
    ...over,
  };
}

function tenantObject(name: string, models: string[], spec: object = {}): object {
  return {
    apiVersion: 'cacheroute.dev/v1alpha1',
    kind: 'Tenant',
    metadata: { namespace: 'ns', name },
    spec: { apiKeys: { secretRef: { name: `${name}-keys` } }, models, ...spec },
  };
}

function keySecret(name: string, key: string): ApiKeyDigests {
  return { [`ns/${name}-keys`]: { k: digestApiKey(key) } };
}

function directory(): KeyDirectory {
  const dir = new KeyDirectory();
  dir.replace(
    buildTenantDirectory({
      tenants: [
        tenantObject('a', ['m', 'shared'], { limits: { requestsPerMinute: 3 } }),
        tenantObject('b', ['m', 'shared']),
      ],
      keyDigests: { ...keySecret('a', KEY_A), ...keySecret('b', KEY_B) },
    }),
  );
  dir.ready = true;
  return dir;
}

const chat = (model = 'm') => ({
  method: 'POST' as const,
  url: '/v1/chat/completions',
  payload: { model, messages: [{ role: 'user', content: 'hello there' }] },
});
const as = (key: string) => ({ authorization: `Bearer ${key}` });

beforeEach(async () => {
  up = await startFakeUpstream();
  clock = new ManualClock();
  const table = new StaticRoutingTable([
    route('m'),
    route('other'),
    route('shared', { sharePrefixesAcrossTenants: true }),
  ]);
  app = build({ table, clock, tenants: directory() });
});

afterEach(async () => {
  await app.close();
  await up.close();
});

describe('API keys', () => {
  it('401 with a JSON error, and nothing reaches a runtime, without a key or with an unknown one', async () => {
    for (const headers of [{}, as('z'.repeat(40)), { authorization: `Basic ${KEY_A}` }]) {
      const res = await app.inject({ ...chat(), headers });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toMatchObject({ error: { code: 'GW_UNAUTHORIZED', type: 'authentication_error' } });
    }
    expect((await app.inject({ url: '/v1/models' })).statusCode).toBe(401);
    expect(up.received).toHaveLength(0);
    expect((await app.inject({ url: '/metrics' })).body).toContain(
      'cacheroute_gateway_tenant_requests_total{tenant="",code="401"} 4',
    );
  });

  it("a tenant's key: served, and /v1/models lists only its models", async () => {
    expect((await app.inject({ ...chat(), headers: as(KEY_A) })).statusCode).toBe(200);
    const models = (await app.inject({ url: '/v1/models', headers: as(KEY_A) })).json<{
      data: { id: string }[];
    }>();
    expect(models.data.map((m) => m.id).sort()).toEqual(['m', 'shared']);
  });

  it('403 for a model the tenant may not use, before any runtime sees it', async () => {
    const res = await app.inject({ ...chat('other'), headers: as(KEY_A) });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ error: { code: 'GW_MODEL_FORBIDDEN', type: 'permission_error' } });
    expect(res.json<{ error: { message: string } }>().error.message).toContain("Tenant 'ns/a'");
    expect(up.received).toHaveLength(0);
  });

  it('tenants never share a cache salt, unless the CachePolicy says they may', async () => {
    await app.inject({ ...chat(), headers: as(KEY_A) });
    await app.inject({ ...chat(), headers: as(KEY_A) });
    await app.inject({ ...chat(), headers: as(KEY_B) });
    await app.inject({ ...chat('shared'), headers: as(KEY_A) });
    await app.inject({ ...chat('shared'), headers: as(KEY_B) });
    const salts = up.received.map((r) => r.body['cache_salt']);
    expect(salts[0]).toBe(salts[1]);
    expect(salts[0]).not.toBe(salts[2]);
    expect(String(salts[0]).startsWith('policy-salt.')).toBe(true);
    expect(salts[3]).toBe('policy-salt');
    expect(salts[4]).toBe('policy-salt');
  });

  it('429 over requestsPerMinute, with Retry-After and headers that name the limit', async () => {
    for (let i = 0; i < 3; i++) {
      const ok = await app.inject({ ...chat(), headers: as(KEY_A) });
      expect(ok.statusCode).toBe(200);
      expect(ok.headers['x-ratelimit-limit-requests']).toBe('3');
      expect(ok.headers['x-ratelimit-remaining-requests']).toBe(String(2 - i));
    }
    const res = await app.inject({ ...chat(), headers: as(KEY_A) });
    expect(res.statusCode).toBe(429);
    expect(res.json()).toMatchObject({ error: { code: 'GW_RATE_LIMITED', type: 'rate_limit_error' } });
    expect(res.headers['x-ratelimit-limited']).toBe('requests');
    expect(res.headers['x-ratelimit-remaining-requests']).toBe('0');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(up.received).toHaveLength(3);
    // Another tenant is not limited by a's traffic; a is let in again once the minute has slid by.
    expect((await app.inject({ ...chat(), headers: as(KEY_B) })).statusCode).toBe(200);
    clock.advance(Number(res.headers['retry-after']) * 1000);
    expect((await app.inject({ ...chat(), headers: as(KEY_A) })).statusCode).toBe(200);
  });

  it('a refused tenant is refused again before its next body is parsed, until its Retry-After', async () => {
    for (let i = 0; i < 4; i++) await app.inject({ ...chat(), headers: as(KEY_A) });
    const unparsable = {
      method: 'POST' as const,
      url: '/v1/chat/completions',
      headers: { ...as(KEY_A), 'content-type': 'application/json' },
      payload: '{"model": "m", "not json',
    };
    const early = await app.inject(unparsable);
    expect(early.statusCode).toBe(429);
    expect(early.headers['x-ratelimit-limited']).toBe('requests');
    clock.advance(Number(early.headers['retry-after']) * 1000);
    expect((await app.inject(unparsable)).statusCode).toBe(400);
  });

  it('says on /status who may call; the open-mode metric is 0', async () => {
    const status = (await app.inject({ url: '/status.json' })).json<{
      auth: { mode: string; tenants: unknown[] };
    }>();
    expect(status.auth.mode).toBe('keys');
    expect(status.auth.tenants).toHaveLength(2);
    expect((await app.inject({ url: '/metrics' })).body).toContain('cacheroute_gateway_auth_open 0');
  });
});

describe('open mode', () => {
  it('serves without a key, and reports it on /status and in a metric', async () => {
    const open = build({ table: new StaticRoutingTable([route('m')]), clock });
    try {
      expect((await open.inject(chat())).statusCode).toBe(200);
      expect(up.received.at(-1)?.body['cache_salt']).toBe('policy-salt');
      expect((await open.inject({ url: '/status.json' })).json()).toMatchObject({ auth: { mode: 'open' } });
      expect((await open.inject({ url: '/metrics' })).body).toContain('cacheroute_gateway_auth_open 1');
    } finally {
      await open.close();
    }
  });
});
