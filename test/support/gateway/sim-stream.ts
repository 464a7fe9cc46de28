// Test kit: random request streams through the simulator's two-tier radix
// tree and its KV event recorder (test/sim), the same producer the simulator
// publishes from. The tree is the oracle: what it says is cached is what the
// index, fed with the recorded events, must say.

import type { KvCacheEvent } from '#sglang/kv-events.ts';
import { buildNamespace } from '../../sim/generation.ts';
import type { KvEventRecorder } from '../../sim/kv-event-recorder.ts';
import { recordTreeEvents } from '../../sim/kv-events-service.ts';
import { RadixTree, type TreeNode, type WritePolicy } from '../../sim/radix-tree.ts';
import { pickInt } from './rng.ts';

export interface SimCacheOptions {
  readonly pageSize: number;
  /** Host tier tokens (0: no HiCache). */
  readonly hostCapacity: number;
  readonly writePolicy: WritePolicy;
  /** Device tokens kept; past it the tree evicts, as the scheduler does for room. */
  readonly deviceCapacity: number;
}

export interface SimRequest {
  readonly salt: string | null;
  readonly tokens: number[];
}

const SALTS: readonly (string | null)[] = [null, null, 'tenant-a', 'tenant-b'];

export class SimCache {
  readonly tree: RadixTree;
  readonly recorder: KvEventRecorder<TreeNode>;
  readonly opts: SimCacheOptions;
  readonly #prefixes: number[][];
  #now = 0;

  constructor(opts: SimCacheOptions, rng: () => number) {
    this.opts = opts;
    this.tree = new RadixTree(opts);
    this.recorder = recordTreeEvents(this.tree, opts.pageSize);
    this.recorder.recordAllCleared(); // the cache's construction, as SGLang's
    // A few shared prefixes (system prompts), so requests share pages.
    this.#prefixes = Array.from({ length: 6 }, () => randomTokens(rng, pickInt(rng, 0, 40)));
  }

  randomRequest(rng: () => number): SimRequest {
    const prefix = this.#prefixes[pickInt(rng, 0, this.#prefixes.length - 1)] ?? [];
    return {
      salt: SALTS[pickInt(rng, 0, SALTS.length - 1)] ?? null,
      tokens: [...prefix, ...randomTokens(rng, pickInt(rng, 0, 30))],
    };
  }

  /** One scheduler-ish step: serve a request (loading back what the host holds), evict, or flush. */
  step(rng: () => number): void {
    const now = ++this.#now;
    const r = rng();
    const tree = this.tree;
    if (r < 0.6) {
      const req = this.randomRequest(rng);
      const ns = buildNamespace(req.salt, null);
      if (tree.hasHostTier) tree.loadBack(tree.match(ns, req.tokens, now));
      tree.insert(ns, req.tokens, now);
    } else if (r < 0.8) {
      tree.evictDevice(pickInt(rng, 1, 48), now);
    } else if (r < 0.98) {
      if (tree.hasHostTier) tree.evictHost(pickInt(rng, 1, 48), now);
    } else {
      tree.reset();
    }
    const over = tree.sizes().deviceSize - this.opts.deviceCapacity;
    if (over > 0) tree.evictDevice(over, now);
  }

  /** Every event recorded so far, write-through copies included (their acknowledgement, a pass later). */
  drain(): KvCacheEvent[] {
    const events = this.recorder.take();
    this.recorder.releaseDeferred();
    return [...events, ...this.recorder.take()];
  }

  /** Pages of `req` the tree holds: on the device, and only on the host below them. */
  cachedPages(req: SimRequest): { gpu: number; host: number } {
    const m = this.tree.match(buildNamespace(req.salt, null), req.tokens, ++this.#now);
    return { gpu: m.deviceTokens / this.opts.pageSize, host: m.hostTokens / this.opts.pageSize };
  }
}

function randomTokens(rng: () => number, n: number): number[] {
  // A small alphabet: random requests run into each other's pages.
  return Array.from({ length: n }, () => pickInt(rng, 1, 6));
}

/** A GPU BlockStored of page size 1 without token ids: what the sequencing tests feed. */
export const stored = (hashes: bigint[], parent: bigint | null = null): KvCacheEvent => ({
  type: 'BlockStored',
  blockHashes: hashes,
  parentBlockHash: parent,
  tokenIds: [],
  blockSize: 1,
  loraId: null,
  medium: 'GPU',
  cacheSalt: null,
});
export const CLEARED: KvCacheEvent = { type: 'AllBlocksCleared' };
