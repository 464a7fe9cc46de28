import { describe, expect, it } from 'vitest';
import { computePageDigests, computeSaltSeed, toBlockHash } from '#sglang/kv-event-hash.ts';
import { recordTreeEvents } from './kv-events-service.ts';
import { buildNamespace } from './generation.ts';
import { RadixTree, type WritePolicy } from './radix-tree.ts';

const seq = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);
const PLAIN = buildNamespace(null, null);
// Hashes of pages [1..4], [5..8], [9..12] as SGLang publishes them (kv-event-hash.test.ts).
const H1 = -3488128144981237669n;
const H2 = 5674439469042975057n;
const H3 = -1307369107475853156n;

function setup(opts: { hostCapacity?: number; writePolicy?: WritePolicy } = {}) {
  const tree = new RadixTree({
    pageSize: 4,
    hostCapacity: opts.hostCapacity ?? 0,
    writePolicy: opts.writePolicy ?? 'write_through',
  });
  return { tree, recorder: recordTreeEvents(tree, 4) };
}

const stored = (
  blockHashes: bigint[],
  parent: bigint | null,
  tokenIds: number[],
  medium = 'GPU',
  salt = null,
) => ({
  type: 'BlockStored',
  blockHashes,
  parentBlockHash: parent,
  tokenIds,
  blockSize: 4,
  loraId: null,
  medium,
  cacheSalt: salt,
});

describe('KV event recorder on the radix tree', () => {
  it('coalesces a chain of stores into one BlockStored, as SGLang enqueues them', () => {
    const { tree, recorder } = setup();
    tree.insert(PLAIN, seq(1, 8), 0);
    tree.insert(PLAIN, seq(1, 12), 1);
    expect(recorder.take()).toEqual([stored([H1, H2, H3], null, seq(1, 12))]);
  });

  it('links a later node to its parent node last block; partial pages are never stored', () => {
    const { tree, recorder } = setup();
    tree.insert(PLAIN, seq(1, 10), 0);
    expect(recorder.take()).toEqual([stored([H1, H2], null, seq(1, 8))]);
    tree.insert(PLAIN, seq(1, 12), 1);
    expect(recorder.take()).toEqual([stored([H3], H2, seq(9, 4))]);
  });

  it('hashes a salted namespace from its salt and names the salt; an extra_key alone hashes as unsalted', () => {
    const { tree, recorder } = setup();
    tree.insert(buildNamespace('s', null), seq(1, 8), 0);
    tree.insert(buildNamespace(null, 'x'), seq(1, 8), 1);
    const salted = computePageDigests(computeSaltSeed('s'), seq(1, 8), 4).map(toBlockHash);
    expect(recorder.take()).toEqual([
      { ...stored(salted, null, seq(1, 8)), cacheSalt: 's' },
      stored([H1, H2], null, seq(1, 8)),
    ]);
  });

  it('removes a split node by the hashes its pages were stored under', () => {
    const { tree, recorder } = setup();
    tree.insert(PLAIN, seq(1, 12), 0);
    tree.insert(PLAIN, [...seq(1, 4), 99, 98, 97, 96], 1); // splits after the first page
    recorder.take();
    expect(tree.evictDevice(4, 2)).toBe(8); // the older leaf: pages 2-3 of the first chain
    expect(recorder.take()).toEqual([{ type: 'BlockRemoved', blockHashes: [H2, H3], medium: 'GPU' }]);
  });

  it('clears everything on reset', () => {
    const { tree, recorder } = setup();
    tree.insert(PLAIN, seq(1, 8), 0);
    recorder.take();
    expect(tree.reset()).toBe(true);
    expect(recorder.take()).toEqual([{ type: 'AllBlocksCleared' }]);
  });

  it('HiCache write_through: host copy stored as CPU_PINNED once released (the copy completes after its step); device eviction removes GPU only; load-back stores GPU; host eviction removes CPU_PINNED', () => {
    const { tree, recorder } = setup({ hostCapacity: 64 });
    tree.insert(PLAIN, seq(1, 8), 0);
    expect(recorder.take()).toEqual([stored([H1, H2], null, seq(1, 8))]);
    recorder.releaseDeferred();
    expect(recorder.take()).toEqual([stored([H1, H2], null, seq(1, 8), 'CPU_PINNED')]);
    tree.evictDevice(8, 1);
    expect(recorder.take()).toEqual([{ type: 'BlockRemoved', blockHashes: [H1, H2], medium: 'GPU' }]);
    const m = tree.match(PLAIN, seq(1, 8), 2);
    expect(tree.loadBack(m)).toBe(8);
    expect(recorder.take()).toEqual([stored([H1, H2], null, seq(1, 8))]);
    tree.evictDevice(8, 3);
    tree.evictHost(8, 4);
    expect(recorder.take()).toEqual([
      { type: 'BlockRemoved', blockHashes: [H1, H2], medium: 'GPU' },
      { type: 'BlockRemoved', blockHashes: [H1, H2], medium: 'CPU_PINNED' },
    ]);
  });

  it('HiCache write_back: the host copy is stored when the device copy is evicted', () => {
    const { tree, recorder } = setup({ hostCapacity: 64, writePolicy: 'write_back' });
    tree.insert(PLAIN, seq(1, 8), 0);
    recorder.take();
    tree.evictDevice(8, 1);
    expect(recorder.take()).toEqual([
      stored([H1, H2], null, seq(1, 8), 'CPU_PINNED'),
      { type: 'BlockRemoved', blockHashes: [H1, H2], medium: 'GPU' },
    ]);
  });
});
