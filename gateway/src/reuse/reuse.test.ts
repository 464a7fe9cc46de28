import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { canonicalJson, computeDeterminism, computeReuseKey, markReused } from './key.ts';
import { ResultReuser, type Produced } from './reuse.ts';
import { MemoryResultStore, type StoredResult } from './store.ts';

const result = (body: string): StoredResult => ({ status: 200, contentType: 'application/json', body });
const keyInput = { fingerprint: 'fp1', salt: 's1', route: '/v1/chat/completions' };
const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }], temperature: 0 };

describe('computeDeterminism', () => {
  it.each([
    ['temperature 0 (OpenAI)', { temperature: 0 }, ['temperatureZero'], 'temperatureZero'],
    [
      'temperature 0 (native)',
      { sampling_params: { temperature: 0 } },
      ['temperatureZero'],
      'temperatureZero',
    ],
    ['default temperature is 1', {}, ['temperatureZero'], undefined],
    ['temperature 0.7', { temperature: 0.7 }, ['temperatureZero', 'fixedSeed'], undefined],
    ['seed allowed', { temperature: 0.7, seed: 42 }, ['fixedSeed'], 'fixedSeed'],
    [
      'native sampling_seed',
      { sampling_params: { temperature: 1, sampling_seed: 3 } },
      ['fixedSeed'],
      'fixedSeed',
    ],
    ['seed not allowed', { temperature: 0.7, seed: 42 }, ['temperatureZero'], undefined],
    ['greedy but not allowed', { temperature: 0 }, ['fixedSeed'], undefined],
    ['streaming is not reused', { temperature: 0, stream: true }, ['temperatureZero'], undefined],
  ] as const)('%s', (_name, body, allowed, expected) => {
    expect(computeDeterminism(body, allowed)).toBe(expected);
  });
});

describe('computeReuseKey', () => {
  const base = computeReuseKey({ ...keyInput, body: chat });
  it.each([
    ['field order', { temperature: 0, messages: [{ content: 'hi', role: 'user' }], model: 'm' }, true],
    ['ignored fields', { ...chat, user: 'u1', rid: 'x', priority: 3, stream: false }, true],
    ['a different prompt', { ...chat, messages: [{ role: 'user', content: 'ho' }] }, false],
    ['a different max_tokens', { ...chat, max_tokens: 5 }, false],
  ])('%s → same key: %s', (_name, body, same) => {
    expect(computeReuseKey({ ...keyInput, body }) === base).toBe(same);
  });
  it.each([
    ['fingerprint', { ...keyInput, fingerprint: 'fp2' }],
    ['salt', { ...keyInput, salt: 's2' }],
    ['route', { ...keyInput, route: '/generate' }],
  ])('a different %s changes the key', (_name, input) => {
    expect(computeReuseKey({ ...input, body: chat })).not.toBe(base);
  });
  it('canonical JSON sorts keys at every depth and drops undefined', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: undefined, x: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[1,{"x":2,"z":1}]},"b":1}',
    );
  });
});

describe('markReused', () => {
  it('zeroes usage and keeps the original counts', () => {
    expect(
      markReused({ id: 'x', usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } }),
    ).toEqual({
      id: 'x',
      usage: {
        prompt_tokens: 0,
        completion_tokens: 0,
        total_tokens: 0,
        reused_usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
      },
    });
    expect(
      markReused({ text: 't', meta_info: { prompt_tokens: 5, completion_tokens: 2, cached_tokens: 1 } }),
    ).toEqual({
      text: 't',
      meta_info: { prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, reused: true },
    });
  });
});

describe('MemoryResultStore', () => {
  it('expires entries after their TTL', async () => {
    const clock = new ManualClock();
    const store = new MemoryResultStore({ maxEntries: 10 }, clock);
    await store.set('k', result('a'), 1000);
    clock.advance(999);
    expect(await store.get('k')).toEqual(result('a'));
    clock.advance(1);
    expect(await store.get('k')).toBeUndefined();
    expect(store.size).toBe(0);
  });

  it('evicts the least recently used beyond maxEntries', async () => {
    const store = new MemoryResultStore({ maxEntries: 2 }, new ManualClock());
    await store.set('a', result('a'), 1000);
    await store.set('b', result('b'), 1000);
    await store.get('a');
    await store.set('c', result('c'), 1000);
    expect(await store.get('b')).toBeUndefined();
    expect(await store.get('a')).toBeDefined();
    expect(await store.get('c')).toBeDefined();
  });

  it('bounds the summed body size', async () => {
    const store = new MemoryResultStore({ maxEntries: 100, maxBytes: 10 }, new ManualClock());
    await store.set('a', result('xxxx'), 1000);
    await store.set('b', result('yyyy'), 1000);
    await store.set('c', result('zzzz'), 1000);
    expect(store.bytes).toBeLessThanOrEqual(10);
    expect(await store.get('a')).toBeUndefined();
    await store.set('huge', result('x'.repeat(11)), 1000);
    expect(await store.get('huge')).toBeUndefined();
  });
});

describe('ResultReuser', () => {
  function deferred<T>() {
    let resolve!: (v: T) => void;
    let reject!: (e: unknown) => void;
    const promise = new Promise<T>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  }

  it('concurrent identical requests wait for the first; later ones hit the store', async () => {
    const reuser = new ResultReuser(new MemoryResultStore({ maxEntries: 10 }, new ManualClock()));
    const gate = deferred<Produced<string>>();
    let calls = 0;
    const produce = () => {
      calls++;
      return gate.promise;
    };
    const first = reuser.run('k', 1000, produce);
    const second = reuser.run('k', 1000, produce);
    gate.resolve({ value: 'fresh', stored: result('{"a":1}') });
    expect(await first).toEqual({ source: 'fresh', stored: result('{"a":1}'), produced: 'fresh' });
    expect(await second).toEqual({ source: 'inflight', stored: result('{"a":1}'), produced: undefined });
    expect(await reuser.run('k', 1000, produce)).toMatchObject({ source: 'store' });
    expect(calls).toBe(1);
    expect(reuser.inflightCount).toBe(0);
  });

  it('when the first fails, waiters produce their own', async () => {
    const reuser = new ResultReuser(new MemoryResultStore({ maxEntries: 10 }, new ManualClock()));
    const gate = deferred<Produced<string>>();
    const first = reuser.run('k', 1000, () => gate.promise);
    let ownCalls = 0;
    const second = reuser.run('k', 1000, () => {
      ownCalls++;
      return Promise.resolve({ value: 'own', stored: undefined });
    });
    gate.reject(new Error('upstream reset'));
    await expect(first).rejects.toThrow('upstream reset');
    expect(await second).toEqual({ source: 'fresh', stored: undefined, produced: 'own' });
    expect(ownCalls).toBe(1);
  });

  it.each([
    ['fails', () => Promise.reject(new Error('upstream reset'))],
    ['is not storable', () => Promise.resolve({ value: 'err', stored: undefined })],
  ])(
    'releases its claim at once when the generation %s, so other replicas need not wait',
    async (_what, produce) => {
      const released: string[] = [];
      class ReleasingStore extends MemoryResultStore {
        release(key: string): Promise<void> {
          released.push(key);
          return Promise.resolve();
        }
      }
      const store = new ReleasingStore({ maxEntries: 10 }, new ManualClock());
      await new ResultReuser(store)
        .run('k', 1000, produce as () => Promise<Produced<string>>)
        .catch(() => undefined);
      expect(released).toEqual(['k']);
    },
  );

  it('a non-reusable result is not stored', async () => {
    const store = new MemoryResultStore({ maxEntries: 10 }, new ManualClock());
    const reuser = new ResultReuser(store);
    await reuser.run('k', 1000, () => Promise.resolve({ value: 'err', stored: undefined }));
    expect(store.size).toBe(0);
  });
});
