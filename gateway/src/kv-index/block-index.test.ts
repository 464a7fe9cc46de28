import { describe, expect, it } from 'vitest';
import type { KvCacheEvent, StorageMedium } from '#sglang/kv-events.ts';
import { createRng, pickInt } from '../../../test/support/gateway/rng.ts';
import { KvBlockIndex, type PagesByMedium } from './block-index.ts';
import { decodeEventBatch } from './decode.ts';
import { computeRequestBlockHashes } from './request-hashes.ts';
import { SGLANG_BATCHES } from './sglang-batches.testdata.ts';
import { SimCache } from '../../../test/support/gateway/sim-stream.ts';

const seq = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);
const stored = (hashes: bigint[], parent: bigint | null, medium: StorageMedium = 'GPU'): KvCacheEvent => ({
  type: 'BlockStored',
  blockHashes: hashes,
  parentBlockHash: parent,
  tokenIds: [],
  blockSize: 4,
  loraId: null,
  medium,
  cacheSalt: null,
});
const removed = (hashes: bigint[], medium: StorageMedium = 'GPU'): KvCacheEvent => ({
  type: 'BlockRemoved',
  blockHashes: hashes,
  medium,
});
const by = (o: Partial<PagesByMedium>): PagesByMedium => ({
  GPU: 0,
  CPU_PINNED: 0,
  DISK: 0,
  EXTERNAL: 0,
  ...o,
});

describe('KvBlockIndex', () => {
  it("holds what SGLang's own radix cache published, keyed as the request hashes (salt included)", () => {
    const index = new KvBlockIndex();
    const match = (tokens: number[], salt: string | null = null) =>
      index.matchPrefix(computeRequestBlockHashes(tokens, 4, salt));
    const upTo = (note: string) => {
      for (const b of SGLANG_BATCHES) {
        const d = decodeEventBatch(Buffer.from(b.hex, 'hex'));
        if (!d.ok) throw new Error(d.error.message);
        if (b.note.startsWith('extra fields')) continue; // hand-made hashes, not a tree's
        index.apply(d.value.events);
        if (b.note === note) return;
      }
    };
    upTo('insert 1..8 salted tenant-a');
    expect(match(seq(1, 12))).toEqual({ pages: 3, byMedium: by({ GPU: 3 }) });
    expect(match(seq(1, 10))).toEqual({ pages: 2, byMedium: by({ GPU: 2 }) }); // whole pages only
    expect(match(seq(1, 8), 'tenant-a')).toEqual({ pages: 2, byMedium: by({ GPU: 2 }) });
    expect(match(seq(1, 12), 'tenant-b').pages).toBe(0);
    upTo('evict 8 tokens');
    expect(match([1, 2, 3, 4, 99, 98, 97, 96, 5])).toEqual({ pages: 2, byMedium: by({ GPU: 2 }) });
    expect(match(seq(1, 8), 'tenant-a').pages).toBe(0); // what SGLang evicted
    expect(match(seq(1, 12)).pages).toBe(3);
    upTo('reset');
    expect(index.size).toBe(0);
  });

  it('counts leading pages, each for its fastest tier, up to the last page some tier holds', () => {
    const index = new KvBlockIndex();
    index.apply([stored([1n, 2n, 3n], null), stored([2n, 3n, 4n], 1n, 'CPU_PINNED')]);
    expect(index.matchPrefix([1n, 2n, 3n, 4n, 5n, 6n])).toEqual({
      pages: 4,
      byMedium: by({ GPU: 3, CPU_PINNED: 1 }),
    });
    expect(index.matchPrefix([9n, 8n])).toEqual({ pages: 0, byMedium: by({}) });
    expect(index.matchPrefix([])).toEqual({ pages: 0, byMedium: by({}) });
    expect(index.mediaOf(3n)).toEqual(['GPU', 'CPU_PINNED']);
    expect(index.get(4n)).toEqual({ parent: 3n, media: 2 });
  });

  it('infers the ancestors of a held page (radix caches evict leaves first): a late-started index learns old prefixes', () => {
    const index = new KvBlockIndex();
    // Pages 1..3 were cached before the index started; a new request stored 4 and 5 under them.
    index.apply([stored([4n, 5n], 3n, 'CPU_PINNED')]);
    expect(index.matchPrefix([1n, 2n, 3n, 4n, 5n, 6n])).toEqual({
      pages: 5,
      byMedium: by({ CPU_PINNED: 5 }),
    });
    expect(index.matchPrefix([1n, 2n, 3n, 4n])).toEqual({ pages: 4, byMedium: by({ CPU_PINNED: 4 }) });
    // A held page on a faster tier sets the tier of the unheld pages before it.
    index.apply([stored([2n], 1n)]);
    expect(index.matchPrefix([1n, 2n, 3n, 4n, 5n])).toEqual({
      pages: 5,
      byMedium: by({ GPU: 2, CPU_PINNED: 3 }),
    });
    expect(index.matchPrefix([1n, 2n, 7n])).toEqual({ pages: 2, byMedium: by({ GPU: 2 }) });
  });

  it("takes a device store's parent as held when it lacks it (a late start), marked so its removal proves nothing new went", () => {
    const index = new KvBlockIndex();
    // Pages 1-3 were stored before the index started; a request stores 4 under them.
    const stats = index.apply([stored([4n], 3n)]);
    expect(stats).toMatchObject({ stored: 1, impliedParents: 1, storedMedia: 1 });
    // A request that ends inside the old prefix matches it, not only one that reaches page 4.
    expect(index.matchPrefix([1n, 2n, 3n]).byMedium).toEqual(by({ GPU: 3 }));
    expect(index.matchPrefix([1n, 2n]).pages).toBe(0);
    // A host copy's parent may be on the device alone: nothing is implied from it.
    expect(index.apply([stored([9n], 8n, 'CPU_PINNED')])).toMatchObject({ impliedParents: 0 });
    expect(index.get(8n)).toBeUndefined();
    // Evicting the implied page says nothing of the pages stored since; evicting page 4 does.
    expect(index.apply([removed([3n])])).toMatchObject({ removed: 1, removedMedia: 0 });
    expect(index.apply([removed([4n])])).toMatchObject({ removed: 1, removedMedia: 1 });
    expect(index.size).toBe(1);
  });

  it('moves a block between tiers: GPU eviction to the host copy, load-back to GPU, host eviction out', () => {
    const index = new KvBlockIndex();
    index.apply([stored([1n, 2n], null), stored([1n, 2n], null, 'CPU_PINNED')]);
    index.apply([removed([2n])]); // device eviction: the host copy stays
    expect(index.matchPrefix([1n, 2n])).toEqual({ pages: 2, byMedium: by({ GPU: 1, CPU_PINNED: 1 }) });
    index.apply([stored([2n], 1n)]); // loaded back
    expect(index.matchPrefix([1n, 2n]).byMedium).toEqual(by({ GPU: 2 }));
    const stats = index.apply([removed([2n]), removed([2n], 'CPU_PINNED')]);
    expect(stats).toMatchObject({ removed: 2, unknownRemovals: 0 });
    expect(index.get(2n)).toBeUndefined(); // on no tier: gone
    expect(index.size).toBe(1);
  });

  it('is idempotent on stores, counts removals of blocks it does not hold, and empties on AllBlocksCleared', () => {
    const index = new KvBlockIndex();
    expect(index.apply([stored([1n], null), stored([1n], null)])).toMatchObject({ stored: 1 });
    expect(index.apply([removed([7n]), removed([1n], 'DISK')])).toMatchObject({
      unknownRemovals: 2,
      removed: 0,
    });
    expect(index.size).toBe(1);
    expect(index.apply([{ type: 'AllBlocksCleared' }, stored([5n], null)])).toMatchObject({ cleared: true });
    expect(index.matchPrefix([1n]).pages).toBe(0);
    expect(index.matchPrefix([5n]).pages).toBe(1);
  });

  it('never holds more than maxBlocks; stores past it are dropped and counted', () => {
    const index = new KvBlockIndex({ maxBlocks: 3 });
    expect(index.apply([stored([1n, 2n, 3n, 4n, 5n], null)])).toMatchObject({ stored: 3, droppedStores: 2 });
    expect(index.size).toBe(3);
    expect(index.apply([stored([3n], 2n, 'CPU_PINNED')])).toMatchObject({ stored: 1, droppedStores: 0 });
    expect(index.matchPrefix([1n, 2n, 3n, 4n]).pages).toBe(3);
  });

  it('never shares a block between salts: the same tokens under another salt (or none) match nothing', () => {
    const index = new KvBlockIndex();
    const tokens = seq(1, 64);
    const hashes = computeRequestBlockHashes(tokens, 16, 'tenant-a');
    index.apply([stored(hashes, null)]);
    expect(index.matchPrefix(computeRequestBlockHashes(tokens, 16, 'tenant-a')).pages).toBe(4);
    for (const salt of [null, 'tenant-b', '', 'tenant-a ']) {
      expect(index.matchPrefix(computeRequestBlockHashes(tokens, 16, salt)).pages).toBe(0);
    }
  });

  it.each([
    { seed: 1, pageSize: 1, hostCapacity: 0, writePolicy: 'write_through' },
    { seed: 2, pageSize: 4, hostCapacity: 0, writePolicy: 'write_through' },
    { seed: 3, pageSize: 4, hostCapacity: 96, writePolicy: 'write_through' },
    { seed: 4, pageSize: 2, hostCapacity: 64, writePolicy: 'write_back' },
    { seed: 5, pageSize: 4, hostCapacity: 128, writePolicy: 'write_through_selective' },
    { seed: 6, pageSize: 1, hostCapacity: 48, writePolicy: 'write_through' },
  ] as const)(
    'matches what the simulator tree caches, per tier, over a random stream (seed $seed, page $pageSize, host $hostCapacity, $writePolicy)',
    ({ seed, pageSize, hostCapacity, writePolicy }) => {
      const rng = createRng(seed);
      const sim = new SimCache({ pageSize, hostCapacity, writePolicy, deviceCapacity: 160 }, rng);
      const index = new KvBlockIndex();
      let hostPagesSeen = 0;
      let gpuPagesSeen = 0;
      for (let step = 0; step < 400; step++) {
        sim.step(rng);
        const stats = index.apply(sim.drain());
        expect(stats.unknownRemovals).toBe(0);
        for (let q = 0; q < 4; q++) {
          const req = sim.randomRequest(rng);
          const got = index.matchPrefix(computeRequestBlockHashes(req.tokens, pageSize, req.salt));
          const want = sim.cachedPages(req);
          expect([step, got.byMedium.GPU, got.byMedium.CPU_PINNED]).toEqual([step, want.gpu, want.host]);
          expect(got.pages).toBe(want.gpu + want.host);
          gpuPagesSeen += want.gpu;
          hostPagesSeen += want.host;
        }
        if (pickInt(rng, 0, 50) === 0) expect(sim.tree.checkInvariants()).toEqual([]);
      }
      // The run exercised what it claims to: hits on the device, and on the host when there is one.
      expect(gpuPagesSeen).toBeGreaterThan(100);
      if (hostCapacity > 0) expect(hostPagesSeen).toBeGreaterThan(20);
      else expect(hostPagesSeen).toBe(0);
    },
  );
});
