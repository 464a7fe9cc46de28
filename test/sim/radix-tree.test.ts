import { describe, expect, it } from 'vitest';
import { RadixTree, type RadixTreeOptions } from './radix-tree.ts';

const opts = (o: Partial<RadixTreeOptions> = {}): RadixTreeOptions => ({
  pageSize: 1,
  hostCapacity: 0,
  writePolicy: 'write_through',
  ...o,
});
const seq = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

function expectSound(tree: RadixTree): void {
  expect(tree.checkInvariants()).toEqual([]);
  expect(tree.recountSizes()).toEqual(tree.sizes());
}

/** Tiny deterministic PRNG for property tests. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('RadixTree', () => {
  it('matches an inserted prefix and nothing in another namespace (salts never share)', () => {
    const t = new RadixTree(opts());
    t.insert('', seq(0, 10), 0);
    expect(t.match('', seq(0, 6), 1).deviceTokens).toBe(6);
    expect(t.match('salt-a', seq(0, 6), 1).deviceTokens).toBe(0);
    t.insert('salt-a', seq(0, 10), 2);
    expect(t.sizes().deviceSize).toBe(20);
    expectSound(t);
  });

  it.each([
    ['first token', 1],
    ['middle', 5],
    ['last token', 9],
  ])('splits at the %s', (_name, at) => {
    const t = new RadixTree(opts());
    t.insert('', seq(0, 10), 0);
    const other = [...seq(0, at), 99, 98];
    t.insert('', other, 1);
    expect(t.sizes().nodeCount).toBe(3);
    expect(t.match('', seq(0, 10), 2).deviceTokens).toBe(10);
    expect(t.match('', other, 2).deviceTokens).toBe(other.length);
    expect(t.sequences('').sort()).toEqual([seq(0, 10), other].sort());
    expectSound(t);
  });

  it('peeks what match() finds, by tier, without splitting a node or touching the LRU', () => {
    const t = new RadixTree(opts({ pageSize: 2, hostCapacity: 100 }));
    t.insert('', seq(0, 10), 0);
    t.insert('', seq(100, 4), 1);
    const before = t.sizes();
    expect(t.peek('', [...seq(0, 7), 99])).toEqual({ deviceTokens: 6, hostTokens: 0 });
    expect(t.peek('other', seq(0, 7))).toEqual({ deviceTokens: 0, hostTokens: 0 });
    expect(t.sizes()).toEqual(before); // no split
    // seq(0, 10) is still the least recently used: it goes first (to the host tier).
    t.evictDevice(2, 2);
    expect(t.peek('', seq(0, 10))).toEqual({ deviceTokens: 0, hostTokens: 10 });
    expect(t.peek('', seq(100, 4))).toEqual({
      deviceTokens: t.match('', seq(100, 4), 3).deviceTokens,
      hostTokens: 0,
    });
    expectSound(t);
  });

  it('matches and inserts whole pages only', () => {
    const t = new RadixTree(opts({ pageSize: 4 }));
    t.insert('', seq(0, 10), 0); // 8 tokens kept
    expect(t.sizes().deviceSize).toBe(8);
    expect(t.match('', seq(0, 7), 1).deviceTokens).toBe(4);
    // A divergence inside the second page splits at the page boundary.
    t.insert('', [...seq(0, 6), 50, 51], 2);
    expect(t.match('', [...seq(0, 6), 50, 51], 3).deviceTokens).toBe(8);
    expectSound(t);
    for (const s of t.sequences('')) expect(s.length % 4).toBe(0);
  });

  it('evicts unlocked leaves in LRU order and never locked ones', () => {
    const t = new RadixTree(opts());
    t.insert('', seq(0, 10), 0);
    t.insert('', seq(100, 10), 1);
    const locked = t.match('', seq(200, 0), 2);
    void locked;
    const m = t.match('', seq(100, 10), 3);
    t.lock(m.node);
    expect(t.evictDevice(5, 4)).toBe(10); // a whole leaf
    expect(t.match('', seq(0, 10), 5).deviceTokens).toBe(0);
    expect(t.evictDevice(10, 6)).toBe(0); // the rest is locked
    t.unlock(m.node);
    expect(t.evictDevice(10, 7)).toBe(10);
    expect(t.sizes().deviceSize).toBe(0);
    expectSound(t);
  });

  it('keeps evicted KV on the host tier and loads it back (write_through)', () => {
    const t = new RadixTree(opts({ hostCapacity: 100 }));
    t.insert('', seq(0, 10), 0);
    expect(t.sizes().hostSize).toBe(10);
    t.evictDevice(10, 1);
    const m = t.match('', seq(0, 10), 2);
    expect([m.deviceTokens, m.hostTokens]).toEqual([0, 10]);
    t.lock(m.node);
    expect(t.loadBack(m)).toBe(10);
    expect(t.match('', seq(0, 10), 3).deviceTokens).toBe(10);
    t.unlock(m.node);
    expectSound(t);
  });

  it('writes back to the host only on eviction (write_back)', () => {
    const t = new RadixTree(opts({ hostCapacity: 100, writePolicy: 'write_back' }));
    t.insert('', seq(0, 10), 0);
    expect(t.sizes().hostSize).toBe(0);
    t.evictDevice(10, 1);
    expect(t.sizes().hostSize).toBe(10);
    expect(t.match('', seq(0, 10), 2).hostTokens).toBe(10);
    expectSound(t);
  });

  it('evicts host-only leaves when the host tier is full', () => {
    const t = new RadixTree(opts({ hostCapacity: 10 }));
    t.insert('', seq(0, 10), 0);
    t.evictDevice(10, 1);
    t.insert('', seq(100, 10), 2); // write-through needs the host room
    expect(t.sizes().hostSize).toBe(10);
    expect(t.match('', seq(0, 10), 3).hostTokens).toBe(0);
    expectSound(t);
  });

  it('refuses to reset while locked', () => {
    const t = new RadixTree(opts());
    const { node } = t.insert('', seq(0, 4), 0);
    t.lock(node);
    expect(t.reset()).toBe(false);
    t.unlock(node);
    expect(t.reset()).toBe(true);
    expect(t.sizes()).toEqual({ deviceSize: 0, hostSize: 0, lockedSize: 0, nodeCount: 0 });
  });

  it.each([
    [1, 0, 'write_through'],
    [4, 0, 'write_through'],
    [2, 64, 'write_through'],
    [4, 64, 'write_back'],
    [1, 48, 'write_through_selective'],
  ] as const)(
    'keeps incremental sizes equal to a recount under random operations (page %i, host %i, %s)',
    (pageSize, hostCapacity, writePolicy) => {
      const t = new RadixTree({ pageSize, hostCapacity, writePolicy });
      const rand = rng(pageSize * 1000 + hostCapacity);
      const locks: ReturnType<RadixTree['match']>['node'][] = [];
      for (let step = 0; step < 2000; step++) {
        const ns = rand() < 0.2 ? 'salt' : '';
        const len = 1 + Math.floor(rand() * 24);
        const base = Math.floor(rand() * 4) * 3;
        const tokens = Array.from({ length: len }, (_, i) =>
          i < 8 ? base + (i % 3) : Math.floor(rand() * 5),
        );
        const r = rand();
        if (r < 0.4) t.insert(ns, tokens, step);
        else if (r < 0.6) {
          const m = t.match(ns, tokens, step);
          t.lock(m.node);
          if (t.hasHostTier) t.loadBack(m);
          locks.push(m.node);
        } else if (r < 0.75 && locks.length > 0)
          t.unlock(locks.splice(Math.floor(rand() * locks.length), 1)[0]!);
        else t.evictDevice(1 + Math.floor(rand() * 16), step);
        expect(t.recountSizes()).toEqual(t.sizes());
        if (step % 50 === 0) expect(t.checkInvariants()).toEqual([]);
        expect(t.sizes().hostSize).toBeLessThanOrEqual(hostCapacity);
      }
      expectSound(t);
    },
  );
});
