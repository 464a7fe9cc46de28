import { describe, expect, it } from 'vitest';
import type { KvCacheEvent } from '#sglang/kv-events.ts';
import { KvBlockBudget } from './block-budget.ts';
import { KvBlockIndex } from './block-index.ts';

const stored = (from: number, n: number): KvCacheEvent => ({
  type: 'BlockStored',
  blockHashes: Array.from({ length: n }, (_, i) => BigInt(from + i)),
  parentBlockHash: null,
  tokenIds: [],
  blockSize: 16,
  loraId: null,
  medium: 'GPU',
  cacheSalt: null,
});

describe('KvBlockBudget', () => {
  it('a flooding index evicts its own oldest blocks; a small one stays whole', () => {
    const budget = new KvBlockBudget(10);
    const honest = new KvBlockIndex({ budget });
    const flood = new KvBlockIndex({ budget });
    honest.apply([stored(1, 3)]);
    flood.apply([stored(1000, 100)]);
    expect(honest.size).toBe(3);
    expect(flood.size).toBe(7);
    expect(budget.total).toBe(10);
    expect(budget.evicted).toBe(93);
    // The newest pages of the flood are the ones held: its oldest went first.
    expect(flood.get(1099n)).toBeDefined();
    expect(flood.get(1000n)).toBeUndefined();
    expect(honest.matchPrefix([1n, 2n, 3n]).pages).toBe(3);
  });

  it('counts removals, clears and an index that is released', () => {
    const budget = new KvBlockBudget(100);
    const a = new KvBlockIndex({ budget });
    const b = new KvBlockIndex({ budget });
    a.apply([stored(1, 5), { type: 'BlockRemoved', blockHashes: [1n, 2n], medium: 'GPU' }]);
    b.apply([stored(100, 4), { type: 'AllBlocksCleared' }, stored(200, 2)]);
    expect(budget.total).toBe(5);
    a.release();
    expect(budget.total).toBe(2);
  });
});
