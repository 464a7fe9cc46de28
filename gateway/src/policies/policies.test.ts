import { describe, expect, it } from 'vitest';
import { buildPolicy } from './factory.ts';
import { LeastLoadPolicy } from './least-load.ts';
import { PrefixHashPolicy, type PrefixHashConfig } from './prefix-hash.ts';
import { RoundRobinPolicy } from './round-robin.ts';
import {
  buildEndpoint as ep,
  buildInput as input,
  range,
  route,
} from '../../../test/support/gateway/policies.ts';
import { createRng, pickInt } from '../../../test/support/gateway/rng.ts';
import { RoutingSettings } from '#api';

const ph: PrefixHashConfig = { prefixBlocks: 2, blockTokens: 4, loadFactor: 1.25 };
const four = ['a', 'b', 'c', 'd'].map((id) => ep(id));

describe('PrefixHashPolicy', () => {
  it('sends a shared leading prefix to one endpoint, whatever follows', () => {
    const p = new PrefixHashPolicy(ph);
    const first = p.select(four, input('1', [...range(0, 8), 1, 2, 3]));
    expect(p.select(four, input('2', [...range(0, 8), 9, 9, 9, 9, 9]))).toBe(first);
  });

  it('separates salts', () => {
    const p = new PrefixHashPolicy(ph);
    const picks = new Set(
      range(0, 32).map((s) => p.select(four, input('r', range(0, 8), { salt: `t${s}` }))),
    );
    expect(picks.size).toBeGreaterThan(1);
  });

  it('spreads distinct prefixes over all endpoints', () => {
    const p = new PrefixHashPolicy(ph);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 400; i++) counts[p.select(four, input('r', range(i * 100, 8))) as number]!++;
    for (const c of counts) expect(c).toBeGreaterThan(50);
  });

  it.each([
    [1.25, 10],
    [2, 10],
    [1.5, 3],
  ])('bounded load: with loadFactor %f over %i requests no endpoint exceeds the cap', (loadFactor, n) => {
    const p = new PrefixHashPolicy({ ...ph, loadFactor });
    const loads = [0, 0, 0, 0];
    for (let i = 0; i < n * 4; i++) {
      const eps = loads.map((inFlight, j) => ep(String(j), { inFlight }));
      const total = loads.reduce((a, b) => a + b, 0);
      const cap = Math.ceil((loadFactor * (total + 1)) / 4);
      const chosen = p.select(eps, input('r', range(0, 8))) as number; // one hot prefix
      expect(loads[chosen]! + 1).toBeLessThanOrEqual(cap);
      loads[chosen]!++;
    }
    expect(Math.max(...loads)).toBeLessThanOrEqual(Math.ceil(loadFactor * n));
  });

  it('moves only keys of a removed endpoint (consistency)', () => {
    const p = new PrefixHashPolicy(ph);
    const three = four.slice(0, 3);
    let moved = 0;
    for (let i = 0; i < 200; i++) {
      const req = input('r', range(i * 100, 8));
      const before = four[p.select(four, req) as number]!.id;
      const after = three[p.select(three, req) as number]!.id;
      if (before !== 'd' && before !== after) moved++;
    }
    expect(moved).toBe(0);
  });
});

describe('LeastLoadPolicy', () => {
  it.each([
    ['in-flight', [ep('a', { inFlight: 3 }), ep('b', { inFlight: 1 })], 'b'],
    ['runtime queue', [ep('a', { inFlight: 1, queued: 5 }), ep('b', { inFlight: 3 })], 'b'],
    [
      'predicted prefill backlog',
      [
        ep('a', { inFlight: 2, pendingPrefillTokens: 40_000, prefillTokensPerSecond: 10_000 }), // 2 + 40
        ep('b', { inFlight: 4, pendingPrefillTokens: 1_000, prefillTokensPerSecond: 10_000 }), // 4 + 1
      ],
      'b',
    ],
    [
      'unknown rate → no backlog',
      [ep('a', { inFlight: 1, pendingPrefillTokens: 1e9 }), ep('b', { inFlight: 2 })],
      'a',
    ],
  ])('%s', (_name, eps, expected) => {
    expect(route(new LeastLoadPolicy(), eps, input('r', [1]))).toBe(expected);
  });

  it('rotates among equals', () => {
    const p = new LeastLoadPolicy();
    const picks = range(0, 4).map((i) => route(p, four, input(String(i), [1])));
    expect(picks).toEqual(['a', 'b', 'c', 'd']);
  });
});

describe('RoundRobinPolicy', () => {
  it('takes endpoints in turn; select alone does not advance', () => {
    const p = new RoundRobinPolicy();
    expect(p.select(four)).toBe(0);
    expect(p.select(four)).toBe(0);
    const picks = range(0, 5).map((i) => route(p, four, input(String(i), [])));
    expect(picks).toEqual(['a', 'b', 'c', 'd', 'a']);
    expect(p.select([])).toBeUndefined();
  });
});

describe('buildPolicy', () => {
  it.each(['cache-aware', 'prefix-hash', 'least-load', 'round-robin'] as const)(
    'builds %s from CachePolicy settings',
    (policy) => {
      const settings = RoutingSettings.parse({ policy });
      expect(buildPolicy(settings).name).toBe(policy);
    },
  );

  it('every policy picks an eligible index on random inputs', () => {
    const rng = createRng(7);
    for (const policy of ['cache-aware', 'prefix-hash', 'least-load', 'round-robin'] as const) {
      const p = buildPolicy(RoutingSettings.parse({ policy }));
      for (let i = 0; i < 200; i++) {
        const eps = range(0, pickInt(rng, 1, 5)).map((j) => ep(`e${j}`, { inFlight: pickInt(rng, 0, 100) }));
        const tokens = range(pickInt(rng, 0, 3) * 1000, pickInt(rng, 0, 300));
        const chosen = route(p, eps, input(String(i), tokens, { now: i }));
        expect(eps.some((e) => e.id === chosen)).toBe(true);
      }
    }
  });
});
