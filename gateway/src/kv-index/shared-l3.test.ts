import { describe, expect, it } from 'vitest';
import type { KvCacheEvent, StorageMedium } from '#sglang/kv-events.ts';
import { CLEARED } from '../../../test/support/gateway/sim-stream.ts';
import { KvBlockBudget } from './block-budget.ts';
import { SharedL3Index, type L3Unit } from './shared-l3.ts';

const unit = (over: Partial<L3Unit> = {}): L3Unit => ({
  deployment: 'ns/chat',
  role: 'standalone',
  fingerprint: 'fp1',
  blockSize: 16,
  ...over,
});

const storedOn = (medium: StorageMedium, hashes: bigint[], parent: bigint | null = null): KvCacheEvent => ({
  type: 'BlockStored',
  blockHashes: hashes,
  parentBlockHash: parent,
  tokenIds: [],
  blockSize: 16,
  loraId: null,
  medium,
  cacheSalt: null,
});
const removedFrom = (medium: StorageMedium, hashes: bigint[]): KvCacheEvent => ({
  type: 'BlockRemoved',
  blockHashes: hashes,
  medium,
});

const PREFIX = [11n, 12n, 13n];

describe('SharedL3Index', () => {
  it('credits a prefix replica a wrote through on replica b of the same Deployment, role and fingerprint, and nowhere else', () => {
    const l3 = new SharedL3Index();
    l3.bind('a', unit());
    l3.bind('b', unit());
    l3.bind('other-fingerprint', unit({ fingerprint: 'fp2' }));
    l3.bind('other-deployment', unit({ deployment: 'ns/other' }));
    l3.bind('other-role', unit({ role: 'decode' }));
    l3.record('a', [storedOn('GPU', PREFIX), storedOn('CPU_PINNED', PREFIX)]);
    expect(l3.matchPages('b', PREFIX)).toBe(3);
    expect(l3.matchPages('a', PREFIX)).toBe(3);
    for (const id of ['other-fingerprint', 'other-deployment', 'other-role', 'unbound'])
      expect(l3.matchPages(id, PREFIX)).toBe(0);
    expect(l3.units).toBe(4);
  });

  it('is fed by host stores (each is backed up to storage once acked), not by device stores alone', () => {
    const l3 = new SharedL3Index();
    l3.bind('a', unit());
    l3.record('a', [storedOn('GPU', PREFIX)]);
    expect(l3.matchPages('a', PREFIX)).toBe(0);
    l3.record('a', [storedOn('CPU_PINNED', PREFIX.slice(0, 2))]);
    expect(l3.matchPages('a', PREFIX)).toBe(2);
    l3.record('a', [storedOn('DISK', PREFIX.slice(2), 12n)]);
    expect(l3.matchPages('a', PREFIX)).toBe(3);
  });

  it('keeps its blocks when a member evicts from host or flushes (the file store is not cleared); storage removals remove', () => {
    const l3 = new SharedL3Index();
    l3.bind('a', unit());
    l3.bind('b', unit());
    l3.record('a', [storedOn('CPU_PINNED', PREFIX)]);
    l3.record('a', [removedFrom('CPU_PINNED', PREFIX), removedFrom('GPU', PREFIX)]);
    l3.record('b', [CLEARED]);
    expect(l3.matchPages('b', PREFIX)).toBe(3);
    l3.record('a', [removedFrom('DISK', [12n])]);
    // The prefetch loads the leading pages the backend holds: a hole ends the match.
    expect(l3.matchPages('b', PREFIX)).toBe(1);
  });

  it('lives while an endpoint is bound to it: pruned with the last one, its blocks out of the budget', () => {
    const budget = new KvBlockBudget(100);
    const l3 = new SharedL3Index({ budget });
    l3.bind('a', unit());
    l3.bind('b', unit());
    l3.record('a', [storedOn('CPU_PINNED', PREFIX)]);
    l3.unbind('a');
    l3.prune();
    expect(l3.matchPages('b', PREFIX)).toBe(3); // b still reads it: a restart of a keeps it
    expect(budget.total).toBe(3);
    l3.bind('b', null);
    l3.prune();
    expect([l3.units, l3.blocks, budget.total]).toEqual([0, 0, 0]);
  });

  it("stays within the gateway's block budget and its own bound, the oldest blocks first", () => {
    const budget = new KvBlockBudget(4);
    const l3 = new SharedL3Index({ budget });
    l3.bind('a', unit());
    l3.record('a', [storedOn('CPU_PINNED', [1n, 2n, 3n, 4n])]);
    l3.record('a', [storedOn('CPU_PINNED', [2n])]); // stored again: newer than 3 and 4
    l3.record('a', [storedOn('CPU_PINNED', [5n, 6n])]);
    expect([l3.blocks, budget.total, budget.evicted]).toEqual([4, 4, 2]);
    expect([1n, 2n, 3n, 4n, 5n, 6n].filter((h) => l3.matchPages('a', [h]) === 1)).toEqual([2n, 4n, 5n, 6n]);
    const bounded = new SharedL3Index({ maxBlocks: 2 });
    bounded.bind('a', unit());
    bounded.record('a', [storedOn('CPU_PINNED', [1n, 2n, 3n])]);
    expect([1n, 2n, 3n].map((h) => bounded.matchPages('a', [h]))).toEqual([0, 1, 1]);
  });

  it('lists each modelled directory with its blocks and the endpoints sharing it (for /status)', () => {
    const l3 = new SharedL3Index();
    l3.bind('b', unit());
    l3.bind('a', unit());
    l3.bind('other', unit({ fingerprint: 'fp2' }));
    l3.record('a', [storedOn('CPU_PINNED', PREFIX)]);
    const listed = l3.list().sort((x, y) => x.fingerprint.localeCompare(y.fingerprint));
    expect(listed).toMatchObject([
      { fingerprint: unit().fingerprint, blocks: 3, endpoints: ['a', 'b'], blockSize: unit().blockSize },
      { fingerprint: 'fp2', blocks: 0, endpoints: ['other'] },
    ]);
  });
});
