// What reaches the gateway before authentication costs it nothing that stays:
// an unknown path is answered before its body is read, and no metric series
// is made from a name a client sent. Counts, not timings.

import { afterEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { build } from './app.ts';
import { StaticRoutingTable, type ModelRoute } from './routing/table.ts';
import { KeyDirectory, OPEN_DIRECTORY, type TenantDirectory } from './tenancy/tenant.ts';
import { createRng } from '../../test/support/gateway/rng.ts';

const ROUTE: ModelRoute = {
  model: 'm',
  deployment: 'ns/m',
  fingerprint: 'fp1',
  salt: 's',
  routing: RoutingSettings.parse({ policy: 'round-robin' }),
  admission: Admission.parse({}),
  reuse: ResultReuse.parse({}),
  endpoints: [],
};

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

function start(tenants: TenantDirectory): FastifyInstance {
  if (tenants instanceof KeyDirectory) tenants.ready = true;
  app = build({ table: new StaticRoutingTable([ROUTE]), tenants });
  return app;
}

/** Series in the exposition: lines that are neither comments nor blank. */
async function countSeries(a: FastifyInstance): Promise<number> {
  const text = (await a.inject({ url: '/metrics' })).body;
  return text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length;
}

/** Unauthenticated requests with made-up paths and model names. */
async function sendRandom(a: FastifyInstance, n: number, seed: number): Promise<void> {
  const rng = createRng(seed);
  const name = (): string => Math.floor(rng() * 2 ** 48).toString(36);
  for (let i = 0; i < n; i++) {
    const model = name();
    const paths = [`/${name()}`, '/v1/chat/completions', '/generate'];
    const url = paths[i % paths.length] ?? '/';
    await a.inject({ method: 'POST', url, payload: { model, text: 'x', messages: [] } });
  }
}

describe('before authentication', () => {
  it('an unknown path answers 404 without reading its body', async () => {
    const a = start(new KeyDirectory());
    const r = await a.inject({
      method: 'POST',
      url: '/no/such/path',
      headers: { 'content-type': 'application/json' },
      payload: '{"model": "m", "not json',
    });
    expect(r.statusCode).toBe(404);
    expect(r.json<{ error: { code: string } }>().error.code).toBe('GW_NOT_FOUND');
  });

  it.each([
    ['keys', (): TenantDirectory => new KeyDirectory()],
    ['open', (): TenantDirectory => OPEN_DIRECTORY],
  ])('/metrics does not grow with random model names and paths (%s mode)', async (_mode, tenants) => {
    const a = start(tenants());
    await sendRandom(a, 30, 1);
    // A scrape counts itself (route /metrics) from the second one on.
    await countSeries(a);
    const before = await countSeries(a);
    await sendRandom(a, 300, 2);
    expect(await countSeries(a)).toBe(before);
  });
});
