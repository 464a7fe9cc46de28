import { describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { hashToUnit } from '#kube/seeded-random.ts';
import { chooseWeighted } from './split.ts';
import type { ModelRoute } from './table.ts';

const route = (deployment: string, weight?: number): ModelRoute => ({
  model: 'm',
  deployment,
  fingerprint: deployment,
  salt: deployment,
  routing: RoutingSettings.parse({}),
  admission: Admission.parse({}),
  reuse: ResultReuse.parse({}),
  endpoints: [],
  ...(weight !== undefined ? { weight } : {}),
});

function seeded(seed: number): () => number {
  let s = seed;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 2 ** 32;
  };
}

describe('chooseWeighted', () => {
  it('a sole route serves; no route, none', () => {
    const only = route('ns/a');
    expect(chooseWeighted([only], undefined)).toBe(only);
    expect(chooseWeighted([], undefined)).toBeUndefined();
  });

  it('without a session key, requests split in proportion to the weights', () => {
    const [old, next] = [route('ns/r1', 90), route('ns/r2', 10)];
    const random = seeded(7);
    let toNext = 0;
    for (let i = 0; i < 10_000; i++) if (chooseWeighted([old, next], undefined, random) === next) toNext++;
    expect(toNext / 10_000).toBeGreaterThan(0.08);
    expect(toNext / 10_000).toBeLessThan(0.12);
    // 0 -> all on the other; all 0 -> the first (the oldest) rather than nobody.
    expect(chooseWeighted([route('ns/r1', 0), next], undefined, random)).toBe(next);
    expect(chooseWeighted([route('ns/r1', 0), route('ns/r2', 0)], undefined, random)?.deployment).toBe(
      'ns/r1',
    );
  });

  it('a session key keeps its identity, and moving a weight up moves no key off the gaining side', () => {
    const keys = Array.from({ length: 2000 }, (_, i) => `user-${i}`);
    const at = (w: number) => {
      const routes = [route('ns/r1', 100 - w), route('ns/r2', w)];
      return keys.map((k) => chooseWeighted(routes, k)?.deployment);
    };
    const [ten, twenty] = [at(10), at(20)];
    expect(ten).toEqual(at(10)); // the same key, the same identity
    const moved = keys.filter((_, i) => ten[i] === 'ns/r2' && twenty[i] !== 'ns/r2');
    expect(moved).toEqual([]);
    const share = twenty.filter((d) => d === 'ns/r2').length / keys.length;
    expect(share).toBeGreaterThan(0.16);
    expect(share).toBeLessThan(0.24);
  });

  it('hashToUnit is in [0, 1) and spreads', () => {
    const values = Array.from({ length: 1000 }, (_, i) => hashToUnit(`k${i}`));
    expect(values.every((v) => v >= 0 && v < 1)).toBe(true);
    expect(values.filter((v) => v < 0.5).length).toBeGreaterThan(400);
  });
});
