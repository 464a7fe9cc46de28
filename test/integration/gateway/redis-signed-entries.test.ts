// What a writer to Redis can do to reuse, against a real redis-server and a
// gateway in front of a simulator: an answer planted without the tier's HMAC
// key is not served, nor one moved from another request's key, nor one larger
// than any the gateway writes; each is counted and treated as a miss, whose
// genuine result then replaces it. An entry signed with the tier's key is
// served, and one signed with the previous key while it is still accepted.

import { Redis } from 'ioredis';
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { build } from '../../../gateway/src/app.ts';
import {
  DEFAULT_REDIS_PREFIX,
  RedisResultStore,
  type RedisStoreOptions,
} from '../../../gateway/src/reuse/redis-store.ts';
import type { HmacKeys } from '../../../gateway/src/reuse/signed-entry.ts';
import { StaticRoutingTable, type ModelRoute } from '../../../gateway/src/routing/table.ts';
import { startSim, type RunningSim } from '../../support/sim/testing.ts';
import { startRedis, type RunningRedis } from '../../support/redis.ts';

const KEY_A = Buffer.from('tier-key-a-'.repeat(4));
const KEY_B = Buffer.from('tier-key-b-'.repeat(4));

let redis: RunningRedis;
let raw: Redis;
let sim: RunningSim;
let apps: FastifyInstance[] = [];

beforeAll(async () => {
  redis = await startRedis();
  raw = new Redis(redis.url);
  sim = await startSim(['--model-path', 'm', '--enable-metrics']);
});
afterAll(async () => {
  await raw?.quit();
  await sim?.close();
  await redis?.stop();
});
beforeEach(async () => {
  await raw.flushall();
});
afterEach(async () => {
  await Promise.all(apps.map((a) => a.close()));
  apps = [];
});

interface Warned {
  readonly obj: object;
  readonly msg: string;
}

function gateway(
  hmacKeys: HmacKeys,
  opts: Partial<RedisStoreOptions> = {},
): { app: FastifyInstance; store: RedisResultStore; warned: Warned[] } {
  const warned: Warned[] = [];
  const logger = { warn: (obj: object, msg: string) => void warned.push({ obj, msg }) };
  const store = new RedisResultStore({ url: redis.url, hmacKeys, logger, ...opts });
  onTestFinished(() => store.close());
  const route: ModelRoute = {
    model: 'm',
    deployment: 'ns/m',
    fingerprint: 'fp1',
    salt: 'tenant-a',
    routing: RoutingSettings.parse({}),
    admission: Admission.parse({}),
    reuse: ResultReuse.parse({ enabled: true }),
    endpoints: [
      { id: 'sim0', url: sim.url, role: 'standalone', fingerprint: 'fp1', verified: true, ready: true },
    ],
  };
  const app = build({ table: new StaticRoutingTable([route]), store });
  apps.push(app);
  return { app, store, warned };
}

const chat = (content: string) => ({
  model: 'm',
  messages: [{ role: 'user', content }],
  max_tokens: 8,
  temperature: 0,
});

async function ask(app: FastifyInstance, content: string) {
  const r = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat(content) });
  expect(r.statusCode).toBe(200);
  return { reused: r.headers['x-cacheroute-reused'], body: r.body };
}

/** The Redis keys of stored results (not the LRU index, its tick or claims). */
async function valueKeys(): Promise<string[]> {
  return (await raw.keys(`${DEFAULT_REDIS_PREFIX}*`)).filter((k) => /:[0-9a-f]{64}$/.test(k));
}

/** The key a request's result is stored under, from a first, genuine request. */
async function keyOf(app: FastifyInstance, content: string): Promise<string> {
  const before = new Set(await valueKeys());
  expect((await ask(app, content)).reused).toBeUndefined();
  const added = (await valueKeys()).filter((k) => !before.has(k));
  expect(added).toHaveLength(1);
  return added[0] as string;
}

async function refusedMetric(app: FastifyInstance, reason: string): Promise<number> {
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  const m = new RegExp(`cacheroute_gateway_reuse_store_refused_total\\{reason="${reason}"\\} (\\d+)`).exec(
    text,
  );
  return Number(m?.[1] ?? -1);
}

const PLANTED = JSON.stringify({
  status: 200,
  contentType: 'application/json',
  body: JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'PLANTED' } }] }),
});

describe('a writer to Redis without the tier key', () => {
  it('cannot plant an answer under a real reuse key: not served, counted, logged once, replaced', async () => {
    const { app, store, warned } = gateway({ current: KEY_A });
    const key = await keyOf(app, 'What is the capital of France?');
    expect((await ask(app, 'What is the capital of France?')).reused).toBe('store'); // signed: served
    for (const planted of [
      PLANTED, // the unsigned JSON the store wrote before entries were signed
      `cr1.${Date.now() + 60_000}.${'A'.repeat(43)}.${PLANTED}`, // an envelope with a guessed MAC
    ]) {
      await raw.set(key, planted, 'PX', 60_000);
      const answer = await ask(app, 'What is the capital of France?');
      expect(answer.reused).toBeUndefined();
      expect(answer.body).not.toContain('PLANTED');
    }
    expect(store.stats.refused).toMatchObject({ malformed: 1, signature: 1 });
    expect(await refusedMetric(app, 'malformed')).toBe(1);
    expect(await refusedMetric(app, 'signature')).toBe(1);
    expect(warned.filter((w) => w.msg.includes('refused entries'))).toHaveLength(1);
    // The miss regenerated and overwrote the planted entry with a signed one.
    expect(await raw.get(key)).not.toContain('PLANTED');
    expect((await ask(app, 'What is the capital of France?')).reused).toBe('store');
  });

  it('cannot move a signed entry to another request’s key', async () => {
    const { app, store } = gateway({ current: KEY_A });
    const france = await keyOf(app, 'What is the capital of France?');
    const spain = await keyOf(app, 'What is the capital of Spain?');
    const franceAnswer = (await ask(app, 'What is the capital of France?')).body;
    await raw.set(spain, (await raw.get(france)) ?? '', 'PX', 60_000);
    const answer = await ask(app, 'What is the capital of Spain?');
    expect(answer.reused).toBeUndefined();
    expect(store.stats.refused.signature).toBe(1);
    expect(answer.body).not.toBe(franceAnswer);
  });

  it('cannot make the gateway read an entry larger than any it writes', async () => {
    const { app, store } = gateway({ current: KEY_A }, { maxValueBytes: 4096 });
    const key = await keyOf(app, 'What is the capital of France?');
    await raw.set(key, 'x'.repeat(1024 * 1024), 'PX', 60_000);
    expect((await ask(app, 'What is the capital of France?')).reused).toBeUndefined();
    expect(store.stats.refused.oversized).toBe(1);
  });
});

describe('the tier key', () => {
  it('an entry another replica signed with the same key is served; with another key it is not', async () => {
    const a = gateway({ current: KEY_A });
    await keyOf(a.app, 'What is the capital of France?');
    expect((await ask(gateway({ current: KEY_A }).app, 'What is the capital of France?')).reused).toBe(
      'store',
    );
    const other = gateway({ current: KEY_B });
    expect((await ask(other.app, 'What is the capital of France?')).reused).toBeUndefined();
    expect(other.store.stats.refused.signature).toBe(1);
  });

  it('rotation: the previous key is accepted for reading; entries are signed with the current one', async () => {
    const old = gateway({ current: KEY_A });
    await keyOf(old.app, 'What is the capital of France?');
    const rotated = gateway({ current: KEY_B, previous: KEY_A });
    expect((await ask(rotated.app, 'What is the capital of France?')).reused).toBe('store');
    await keyOf(rotated.app, 'What is the capital of Spain?');
    expect((await ask(gateway({ current: KEY_B }).app, 'What is the capital of Spain?')).reused).toBe(
      'store',
    );
    // A replica still on the old key alone refuses what the rotated one signed.
    expect((await ask(old.app, 'What is the capital of Spain?')).reused).toBeUndefined();
    expect(old.store.stats.refused.signature).toBe(1);
  });
});
