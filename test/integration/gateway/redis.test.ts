// The Redis result store against a real redis-server: two gateway replicas
// share results and generate a concurrent identical request once; TTL; the
// LRU bound; claims taken over when their owner dies or lets go; a Redis that
// is down degrades to generating.

import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { build } from '../../../gateway/src/app.ts';
import {
  DEFAULT_REDIS_PREFIX,
  RedisResultStore,
  type RedisStoreOptions,
} from '../../../gateway/src/reuse/redis-store.ts';
import type { StoredResult } from '../../../gateway/src/reuse/store.ts';
import { StaticRoutingTable, type ModelRoute } from '../../../gateway/src/routing/table.ts';
import { postJson, startSim, type RunningSim } from '../../support/sim/testing.ts';
import { eventually } from '../../support/kubectl.ts';
import { startRedis, type RunningRedis } from '../../support/redis.ts';

let redis: RunningRedis;
let raw: Redis;

beforeAll(async () => {
  redis = await startRedis();
  raw = new Redis(redis.url);
});
afterAll(async () => {
  await raw?.quit();
  await redis?.stop();
});
beforeEach(async () => {
  await raw.flushall();
});

const result = (body: string): StoredResult => ({ status: 200, contentType: 'application/json', body });
const hmacKeys = { current: Buffer.from('test-hmac-key-'.repeat(4)) };

function newStore(opts: Partial<RedisStoreOptions> = {}): RedisResultStore {
  const store = new RedisResultStore({ url: redis.url, hmacKeys, ...opts });
  onTestFinished(() => store.close());
  return store;
}

async function simRequests(sim: RunningSim): Promise<number> {
  const text = await (await fetch(`${sim.url}/metrics`)).text();
  const m = /sglang:num_requests_total\{[^}]*\} (\d+)/.exec(text);
  return Number(m?.[1] ?? 0);
}

describe('two gateway replicas with one Redis', () => {
  let sim: RunningSim;
  let apps: FastifyInstance[] = [];

  afterEach(async () => {
    await Promise.all(apps.map((a) => a.close()));
    apps = [];
    await sim?.close();
  });

  async function setup(reuse: object, stores: RedisResultStore[]): Promise<string[]> {
    sim = await startSim(['--model-path', 'm', '--enable-cache-report', '--enable-metrics']);
    const route: ModelRoute = {
      model: 'm',
      deployment: 'ns/m',
      fingerprint: 'fp1',
      salt: 'tenant-a',
      routing: RoutingSettings.parse({ policy: 'least-load' }),
      admission: Admission.parse({}),
      reuse: ResultReuse.parse({ enabled: true, ...reuse }),
      endpoints: [
        { id: 'sim0', url: sim.url, role: 'standalone', fingerprint: 'fp1', verified: true, ready: true },
      ],
    };
    apps = stores.map((store) => build({ table: new StaticRoutingTable([route]), store }));
    return Promise.all(
      apps.map(async (a) => {
        await a.listen({ port: 0, host: '127.0.0.1' });
        return `http://127.0.0.1:${(a.server.address() as AddressInfo).port}`;
      }),
    );
  }

  const chat = {
    model: 'm',
    messages: [{ role: 'user', content: 'What is the capital of France?' }],
    max_tokens: 8,
    temperature: 0,
  };

  it('concurrent identical requests across both replicas are generated once', async () => {
    const [a, b] = [newStore(), newStore()];
    const [gwA, gwB] = (await setup({}, [a, b])) as [string, string];
    sim.clock.hold(); // the first generation waits in the simulator until release()
    const first = postJson(`${gwA}/v1/chat/completions`, chat);
    await sim.untilWaiting(1);
    const others = [gwB, gwA, gwB].map((gw) => postJson(`${gw}/v1/chat/completions`, chat));
    // B's leader waits on A's claim in Redis; a second request on each replica waits for its own leader.
    await eventually(() => {
      expect(b.waitingCount).toBe(1);
      expect(apps.map((x) => x.gateway.reuseWaiting)).toEqual([1, 1]);
    });
    expect(a.claimCount).toBe(1);
    sim.clock.release();
    const answers = await Promise.all([first, ...others]);
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const reused = answers.map((r) => r.headers.get('x-cacheroute-reused'));
    // A generated; A's second shared it in flight; on B one found it in Redis, the other shared that.
    expect([reused[0], reused[2]]).toEqual([null, 'inflight']);
    expect([reused[1], reused[3]].sort()).toEqual(['inflight', 'store']);
    const choices = answers.map((r) => (r.json as { choices: unknown }).choices);
    for (const c of choices) expect(c).toEqual(choices[0]);
    expect(await simRequests(sim)).toBe(1);
    expect(b.stats).toMatchObject({ waits: 1, shared: 1, takeovers: 0 });
    expect(await raw.keys(`${DEFAULT_REDIS_PREFIX}*:lock`)).toEqual([]);
  });

  it('a result expires after its TTL and is generated again', async () => {
    const [gwA, gwB] = (await setup({ ttlSeconds: 1 }, [newStore(), newStore()])) as [string, string];
    const fresh = await postJson(`${gwA}/v1/chat/completions`, chat);
    expect(fresh.headers.get('x-cacheroute-reused')).toBeNull();
    const hit = await postJson(`${gwB}/v1/chat/completions`, chat);
    expect(hit.headers.get('x-cacheroute-reused')).toBe('store');
    const [valueKey] = (await raw.keys(`${DEFAULT_REDIS_PREFIX}*`)).filter((k) => /:[0-9a-f]{64}$/.test(k));
    expect(await raw.pttl(valueKey ?? '')).toBeGreaterThan(0);
    expect(await raw.pttl(valueKey ?? '')).toBeLessThanOrEqual(1000);
    await eventually(async () => expect(await raw.exists(valueKey ?? '')).toBe(0), { intervalMs: 100 });
    const again = await postJson(`${gwB}/v1/chat/completions`, chat);
    expect(again.headers.get('x-cacheroute-reused')).toBeNull();
    expect(await simRequests(sim)).toBe(2);
  });

  it('build({ redis }) (the --redis-url flag) makes and closes its own store', async () => {
    sim = await startSim(['--model-path', 'm', '--enable-metrics']);
    const route: ModelRoute = {
      model: 'm',
      deployment: 'ns/m',
      fingerprint: 'fp1',
      salt: 's',
      routing: RoutingSettings.parse({}),
      admission: Admission.parse({}),
      reuse: ResultReuse.parse({ enabled: true }),
      endpoints: [
        { id: 'sim0', url: sim.url, role: 'standalone', fingerprint: 'fp1', verified: true, ready: true },
      ],
    };
    const clients = async () =>
      String(await raw.call('CLIENT', 'LIST'))
        .split('\n')
        .filter(Boolean).length;
    const before = await clients();
    const app = build({ table: new StaticRoutingTable([route]), redis: { url: redis.url, hmacKeys } });
    apps = [app];
    for (const expected of [undefined, 'store']) {
      const r = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat });
      expect(r.statusCode).toBe(200);
      expect(r.headers['x-cacheroute-reused']).toBe(expected);
    }
    expect(await clients()).toBe(before + 2); // commands + pub/sub
    await app.close();
    apps = [];
    await eventually(async () => expect(await clients()).toBe(before), { intervalMs: 50 });
  });

  it('a Redis that is down degrades to generating, never to an error', async () => {
    const down = new RedisResultStore({ url: 'redis://127.0.0.1:1', hmacKeys, commandTimeoutMs: 500 });
    onTestFinished(() => down.close());
    const [gw] = (await setup({}, [down])) as [string];
    for (let i = 0; i < 2; i++) {
      const r = await postJson(`${gw}/v1/chat/completions`, chat);
      expect(r.status).toBe(200);
      expect(r.headers.get('x-cacheroute-reused')).toBeNull();
    }
    expect(await simRequests(sim)).toBe(2);
    expect(down.stats.errors).toBeGreaterThan(0);
  });
});

describe('RedisResultStore', () => {
  it('keeps at most maxEntries, evicting the least recently used', async () => {
    const store = newStore({ maxEntries: 3 });
    for (const k of ['k1', 'k2', 'k3']) await store.set(k, result(k), 60_000);
    expect(await store.get('k1')).toEqual(result('k1')); // k1 is now the most recently used
    await store.set('k4', result('k4'), 60_000);
    await store.set('k5', result('k5'), 60_000);
    const present = await Promise.all(
      ['k1', 'k2', 'k3', 'k4', 'k5'].map((k) => raw.exists(`${DEFAULT_REDIS_PREFIX}${k}`)),
    );
    expect(present).toEqual([1, 0, 0, 1, 1]);
    expect(await raw.zrange(`${DEFAULT_REDIS_PREFIX}lru`, 0, -1)).toEqual(['k1', 'k4', 'k5']);
    for (let i = 0; i < 20; i++) await store.set(`x${i}`, result('x'), 60_000);
    expect(await raw.zcard(`${DEFAULT_REDIS_PREFIX}lru`)).toBe(3);
    expect((await raw.keys(`${DEFAULT_REDIS_PREFIX}x*`)).length).toBe(3);
  });

  it('stores values as signed JSON under the prefix with a PX TTL, and a miss claims the key', async () => {
    const store = newStore();
    expect(await store.get('k')).toBeUndefined();
    expect(store.claimCount).toBe(1);
    expect(await raw.pttl(`${DEFAULT_REDIS_PREFIX}k:lock`)).toBeGreaterThan(0);
    await store.set('k', result('{"a":1}'), 5_000);
    expect(store.claimCount).toBe(0);
    expect(await raw.exists(`${DEFAULT_REDIS_PREFIX}k:lock`)).toBe(0);
    const stored = (await raw.get(`${DEFAULT_REDIS_PREFIX}k`)) ?? '';
    expect(stored).toMatch(/^cr1\.\d+\.[\w-]{43}\./);
    expect(JSON.parse(stored.slice(stored.indexOf('{')))).toEqual(result('{"a":1}'));
    const ttl = await raw.pttl(`${DEFAULT_REDIS_PREFIX}k`);
    expect(ttl).toBeGreaterThan(4_000);
    expect(ttl).toBeLessThanOrEqual(5_000);
  });

  it('a waiter gets the result the claim owner writes (published, not polled)', async () => {
    const [owner, waiter] = [newStore({ claimTtlMs: 30_000 }), newStore({ claimTtlMs: 30_000 })];
    expect(await owner.get('k')).toBeUndefined();
    const waited = waiter.get('k');
    await eventually(() => expect(waiter.waitingCount).toBe(1), { intervalMs: 20 });
    await owner.set('k', result('shared'), 60_000);
    expect(await waited).toEqual(result('shared'));
    expect(waiter.stats).toMatchObject({ waits: 1, shared: 1 });
  });

  it('an owner that lets go without a result hands the claim over at once', async () => {
    const [owner, waiter] = [
      newStore({ claimTtlMs: 30_000 }),
      newStore({ claimTtlMs: 30_000, waitTimeoutMs: 30_000 }),
    ];
    expect(await owner.get('k')).toBeUndefined();
    const waited = waiter.get('k');
    await eventually(() => expect(waiter.waitingCount).toBe(1), { intervalMs: 20 });
    await owner.release('k');
    expect(await waited).toBeUndefined();
    expect(waiter.stats).toMatchObject({ takeovers: 1, waitTimeouts: 0 });
    expect(waiter.claimCount).toBe(1);
  });

  it('a claim left by an earlier request of the same replica (nothing stored) does not block the next', async () => {
    const store = newStore({ waitTimeoutMs: 30_000 });
    expect(await store.get('k')).toBeUndefined(); // claimed; its generation then failed: no set()
    expect(await store.get('k')).toBeUndefined(); // the next request on this replica generates at once
    expect(store.stats).toMatchObject({ claims: 2, waits: 0, waitTimeouts: 0 });
  });

  it('when the owner dies its claim expires and the waiter generates itself', async () => {
    // What a dead replica leaves behind: a claim nobody renews.
    await raw.set(`${DEFAULT_REDIS_PREFIX}k:lock`, 'dead-replica', 'PX', 300);
    const waiter = newStore({ waitTimeoutMs: 30_000 });
    expect(await waiter.get('k')).toBeUndefined();
    expect(waiter.stats).toMatchObject({ waits: 1, takeovers: 1, waitTimeouts: 0 });
    expect(await raw.get(`${DEFAULT_REDIS_PREFIX}k:lock`)).not.toBe('dead-replica');
  });

  it('a live owner renews its claim past claimTtlMs', async () => {
    const owner = newStore({ claimTtlMs: 300 });
    expect(await owner.get('k')).toBeUndefined();
    const lock = `${DEFAULT_REDIS_PREFIX}k:lock`;
    const claimed = await raw.get(lock);
    // Renewed, read from Redis rather than timed: the claim's time to live goes back up,
    // again and again, and it stays the owner's. Unrenewed it would be gone in 300 ms.
    let rises = 0;
    let lastTtlMs = Number.POSITIVE_INFINITY;
    await eventually(
      async () => {
        const ttlMs = await raw.pttl(lock);
        expect(await raw.get(lock)).toBe(claimed);
        if (ttlMs > lastTtlMs) rises++;
        lastTtlMs = ttlMs;
        expect(rises).toBeGreaterThanOrEqual(5);
      },
      { intervalMs: 50 },
    );
    await owner.close();
    expect(await raw.exists(`${DEFAULT_REDIS_PREFIX}k:lock`)).toBe(0); // close lets claims go
  });

  it('a waiter gives up after waitTimeoutMs and generates without a claim', async () => {
    await raw.set(`${DEFAULT_REDIS_PREFIX}k:lock`, 'slow-replica', 'PX', 30_000);
    const waiter = newStore({ waitTimeoutMs: 200 });
    expect(await waiter.get('k')).toBeUndefined();
    expect(waiter.stats).toMatchObject({ waitTimeouts: 1, takeovers: 0 });
    expect(waiter.claimCount).toBe(0);
  });
});
