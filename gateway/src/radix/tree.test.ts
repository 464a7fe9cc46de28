import { describe, expect, it } from 'vitest';
import { createRng, pickInt } from '../../../test/support/gateway/rng.ts';
import { computeBlockKeys, computeTextTokens } from './blocks.ts';
import { PrefixTree, type PrefixKey } from './tree.ts';

const k = (blocks: number[], salt = ''): PrefixKey => ({ salt, blocks });

function expectSound(tree: PrefixTree): void {
  const audit = tree.audit();
  expect(audit.issues).toEqual([]);
  expect(audit.nodeCount).toBe(tree.nodeCount);
  for (const e of new Set([...audit.sizes.keys(), ...tree.endpoints()]))
    expect(tree.sizeOf(e), `size of ${e}`).toBe(audit.sizes.get(e) ?? 0);
}

describe('computeBlockKeys', () => {
  it('keys only complete blocks, equal blocks get equal keys', () => {
    const keys = computeBlockKeys([1, 2, 3, 4, 1, 2, 3, 4, 9], 4);
    expect(keys).toHaveLength(2);
    expect(keys[0]).toBe(keys[1]);
    expect(Number.isSafeInteger(keys[0])).toBe(true);
    expect(computeBlockKeys([1, 2, 3, 5], 4)[0]).not.toBe(keys[0]);
  });
  it('computeTextTokens groups characters', () => {
    expect(computeTextTokens('abcdefgh', 4)).toHaveLength(2);
    expect(computeTextTokens('abcdefghi', 4)).toHaveLength(3);
  });
});

describe('PrefixTree', () => {
  it.each([
    ['split after the first block', [1, 9], { e1: 1, e2: 2 }],
    ['split before the last block', [1, 2, 3, 5], { e1: 3, e2: 4 }],
    ['extension below a leaf', [1, 2, 3, 4, 5], { e1: 4, e2: 5 }],
    ['a prefix of an edge', [1], { e1: 1, e2: 1 }],
    ['a disjoint branch', [7, 8], { e2: 2 }],
  ])('insert with %s', (_name, second, expected) => {
    const tree = new PrefixTree();
    tree.insert(k([1, 2, 3, 4]), 'e1', 1);
    tree.insert(k(second), 'e2', 2);
    expectSound(tree);
    expect(Object.fromEntries(tree.matchByEndpoint(k(second)))).toEqual(expected);
    expect(tree.sizeOf('e1')).toBe(4);
    expect(tree.sizeOf('e2')).toBe(second.length);
  });

  it('match returns the owners of the deepest eligible position', () => {
    const tree = new PrefixTree();
    tree.insert(k([1, 2, 3, 4]), 'a', 1);
    tree.insert(k([1, 2]), 'b', 2);
    tree.insert(k([1, 2, 3]), 'c', 3);
    expect(tree.match(k([1, 2, 3, 4, 5]))).toEqual({ endpoints: ['a'], matched: 4, total: 5 });
    expect(tree.match(k([1, 2, 3, 9]))).toEqual({ endpoints: ['a', 'c'], matched: 3, total: 4 });
    expect(tree.match(k([1, 2, 3, 4]), (e) => e !== 'a')).toEqual({ endpoints: ['c'], matched: 3, total: 4 });
    expect(tree.match(k([9]))).toEqual({ endpoints: [], matched: 0, total: 1 });
    expect(tree.match(k([]))).toEqual({ endpoints: [], matched: 0, total: 0 });
  });

  it('separates salts: one tenant never matches another', () => {
    const tree = new PrefixTree();
    tree.insert(k([1, 2, 3], 'tenant-a'), 'e1', 1);
    expect(tree.match(k([1, 2, 3], 'tenant-b')).matched).toBe(0);
    expect(tree.match(k([1, 2, 3], 'tenant-a')).matched).toBe(3);
    tree.insert(k([1, 2, 3], 'tenant-b'), 'e1', 2);
    expect(tree.sizeOf('e1')).toBe(6);
    expectSound(tree);
  });

  it('evicts least recently used leaves first, per endpoint', () => {
    const tree = new PrefixTree();
    tree.insert(k([1, 2, 3]), 'e1', 1); // oldest
    tree.insert(k([1, 5, 6]), 'e1', 2);
    tree.insert(k([1, 2, 3]), 'e2', 3); // other endpoint, under its bound
    tree.evict(4, 10);
    expectSound(tree);
    expect(tree.sizeOf('e1')).toBe(3);
    expect(tree.matchByEndpoint(k([1, 2, 3])).get('e1')).toBe(1);
    expect(tree.matchByEndpoint(k([1, 5, 6])).get('e1')).toBe(3);
    expect(tree.sizeOf('e2')).toBe(3);
  });

  it('evicts what has been idle longer than maxIdle', () => {
    const tree = new PrefixTree();
    tree.insert(k([1, 2]), 'e1', 1);
    tree.insert(k([3, 4]), 'e1', 50);
    tree.evict(100, 60, 20);
    expect(tree.sizeOf('e1')).toBe(2);
    expect(tree.match(k([3, 4])).matched).toBe(2);
    expectSound(tree);
  });

  it.each([
    ['keeps the first blocks, mid-edge', 2, { a: 2, b: 4 }],
    ['keeps nothing', 0, { b: 4 }],
    ['keeps everything', 4, { a: 4, b: 4 }],
  ])('trim %s', (_name, keep, expected) => {
    const tree = new PrefixTree();
    tree.insert(k([1, 2, 3, 4]), 'a', 1);
    tree.insert(k([1, 2, 3, 4]), 'b', 1);
    tree.insert(k([1, 2, 7]), 'a', 2); // a sibling branch below the cut point
    tree.trim('a', k([1, 2, 3, 4]), keep);
    expectSound(tree);
    expect(Object.fromEntries(tree.matchByEndpoint(k([1, 2, 3, 4])))).toEqual(expected);
    expect(tree.matchByEndpoint(k([1, 2, 7])).get('a')).toBe(keep >= 2 ? 3 : undefined);
  });

  it('removeEndpoint and reset drop ownership and empty nodes', () => {
    const tree = new PrefixTree();
    tree.insert(k([1, 2]), 'a', 1);
    tree.insert(k([1, 3], 's'), 'b', 1);
    tree.removeEndpoint('a');
    expectSound(tree);
    expect(tree.sizeOf('a')).toBe(0);
    expect(tree.nodeCount).toBe(1);
    tree.reset();
    expect(tree.nodeCount).toBe(0);
    expect(tree.sizeOf('b')).toBe(0);
  });

  // Model: each endpoint owns a set of prefixes ("salt|b1,b2"); a tree size is
  // the number of prefixes owned, a match the longest owned prefix.
  it.each([1, 2, 3, 4, 5, 6, 7, 8])('agrees with a set model after random operations (seed %i)', (seed) => {
    const rng = createRng(seed);
    const tree = new PrefixTree();
    const model = new Map<string, Set<string>>();
    const endpoints = ['e0', 'e1', 'e2'];
    const salts = ['', 's1'];
    const prefixes = (key: PrefixKey) =>
      key.blocks.map((_, i) => `${key.salt}|${key.blocks.slice(0, i + 1).join(',')}`);
    const randomKey = (): PrefixKey => ({
      salt: salts[pickInt(rng, 0, 1)] as string,
      blocks: Array.from({ length: pickInt(rng, 0, 8) }, () => pickInt(rng, 0, 2)),
    });
    const held = (e: string) => model.get(e) ?? new Set<string>();
    let now = 0;
    for (let step = 0; step < 400; step++) {
      now += pickInt(rng, 0, 2);
      const e = endpoints[pickInt(rng, 0, 2)] as string;
      const op = rng();
      if (op < 0.6) {
        const key = randomKey();
        tree.insert(key, e, now);
        model.set(e, new Set([...held(e), ...prefixes(key)]));
      } else if (op < 0.8) {
        const key = randomKey();
        const keep = pickInt(rng, 0, key.blocks.length);
        tree.trim(e, key, keep);
        if (keep < key.blocks.length) {
          const cut = `${key.salt}|${key.blocks.slice(0, keep + 1).join(',')}`;
          model.set(e, new Set([...held(e)].filter((p) => p !== cut && !p.startsWith(`${cut},`))));
        }
      } else if (op < 0.97) {
        const max = pickInt(rng, 0, 12);
        tree.evict(max, now);
        for (const [ep, set] of model) {
          const kept = [...set].filter((p) => {
            const [salt, body] = p.split('|') as [string, string];
            const blocks = body.split(',').map(Number);
            return tree.matchByEndpoint({ salt, blocks }).get(ep) === blocks.length;
          });
          expect(tree.sizeOf(ep)).toBeLessThanOrEqual(max);
          expect(kept.length, 'evicted only owned prefixes').toBe(tree.sizeOf(ep));
          model.set(ep, new Set(kept));
        }
      } else {
        tree.removeEndpoint(e);
        model.delete(e);
      }
      expectSound(tree);
      for (const ep of endpoints) expect(tree.sizeOf(ep), `${ep} at step ${step}`).toBe(held(ep).size);
      const probe = randomKey();
      const got = tree.matchByEndpoint(probe);
      for (const ep of endpoints) {
        const owned = prefixes(probe).filter((p) => held(ep).has(p)).length;
        expect(got.get(ep) ?? 0, `match of ${ep} at step ${step}`).toBe(owned);
      }
    }
  });
});
