// What one SGLang endpoint holds in its KV cache, exactly, per tier: the
// blocks its KV events said were stored and not since removed.
//
// - A block is keyed by the int64 hash SGLang publishes (kv-event-hash.ts).
//   Hashes chain from the page before (and from the cache_salt), so a hash
//   names the whole prefix up to its page: a request's pages are looked up
//   one by one, with no tree to walk.
// - Each block records the tiers that hold it (a bit per StorageMedium) and
//   its parent. BlockStored sets a tier, BlockRemoved clears one; a block on
//   no tier leaves the index. AllBlocksCleared empties it. Stores are
//   idempotent and removals of blocks not held are no-ops (counted: in an
//   index fed from the runtime's start there are none).
// - matchPrefix counts the leading pages of a request held on some tier; a
//   page counts once, for the fastest tier holding it (GPU, then CPU_PINNED,
//   DISK, EXTERNAL, the order of STORAGE_MEDIA). It ends at the deepest page
//   the index holds, not at the first one it lacks: SGLang's radix caches
//   evict leaves first on every tier (a node leaves the device only after
//   its children did; the host likewise), so a held page's ancestors are
//   held too, on a tier at least as fast. An index that started late (its
//   publisher's replay had rolled over) lacks old pages but learns, from
//   the first new page stored under one, that the whole prefix is there;
//   the pages it infers count for the tier of the nearest held page after
//   them. In a complete index the two rules agree.
// - A device BlockStored names its first page's parent: a page the runtime
//   holds on the device then (a radix child hangs under a cached parent,
//   and the device evicts leaves first). A late-started index that does not
//   hold it takes it as held there, without a parent of its own: so a request that ends
//   at or inside the old prefix above it matches too, not only one that
//   reaches the new page. Such an implied block is marked as implied until
//   a store of its own: its removal says nothing of what else is old
//   (feed.ts, convergence).
//
// Memory, measured on Node 24 (heap and array buffers after GC, 2^20 blocks
// stored in 128-page chains): ~31 bytes a block, in typed arrays the
// collector does not trace (block-table.ts, ADR 0045; the Map of bigints it
// replaced took 94-117). The runtime's own capacity bounds what a
// consistent stream can hold ((device + host tokens) / page size); maxBlocks
// (default 2^20, about 32 MB) bounds what a faulty one can: stores past it
// are dropped and counted, so the index under-reports, the safe direction
// for routing.
//
// A gateway-wide budget (block-budget.ts) bounds all the indexes together:
// past it, a new block evicts the oldest of the largest index.
//
// Pure: plain data in, plain data out.

import type { BudgetedIndex, KvBlockBudget } from './block-budget.ts';
import { BlockTable, NO_ENTRY } from './block-table.ts';
import { PackedBlockHashes, joinBlockHash, splitBlockHash, splitHi, splitLo } from './packed-hashes.ts';
import { STORAGE_MEDIA, type KvCacheEvent, type StorageMedium } from '#sglang/kv-events.ts';

export const DEFAULT_MAX_BLOCKS = 1 << 20;

/** Pages matched per tier: each page counts for the fastest tier holding it. */
export type PagesByMedium = Record<StorageMedium, number>;

export interface PrefixMatch {
  /** Leading request pages some tier holds. */
  readonly pages: number;
  readonly byMedium: PagesByMedium;
}

export interface ApplyStats {
  /** (block, tier) pairs newly held. */
  stored: number;
  /** (block, tier) pairs no longer held. */
  removed: number;
  /** Removals of a (block, tier) the index did not hold: the index had missed events. */
  unknownRemovals: number;
  /** Stores refused because the index was at maxBlocks. */
  droppedStores: number;
  /** Parents taken as held from a store under them (see above). */
  impliedParents: number;
  /** Tiers (bit per STORAGE_MEDIA) where a page was newly held by a store of its own. */
  storedMedia: number;
  /** Tiers where a page stored while the index ran (not an implied one) was removed. */
  removedMedia: number;
  cleared: boolean;
}

export interface BlockEntry {
  readonly parent: bigint | null;
  /** Bit i set: STORAGE_MEDIA[i] holds the block. */
  readonly media: number;
}

const MEDIUM_BIT = new Map<StorageMedium, number>(STORAGE_MEDIA.map((m, i) => [m, 1 << i]));
const DEVICE_BIT = 1 << STORAGE_MEDIA.indexOf('GPU');

function bitOf(medium: StorageMedium): number {
  const bit = MEDIUM_BIT.get(medium);
  if (bit === undefined) throw new RangeError(`unknown storage medium ${medium}`);
  return bit;
}

export function buildEmptyPagesByMedium(): PagesByMedium {
  return Object.fromEntries(STORAGE_MEDIA.map((m) => [m, 0])) as PagesByMedium;
}

export function buildApplyStats(): ApplyStats {
  return {
    stored: 0,
    removed: 0,
    unknownRemovals: 0,
    droppedStores: 0,
    impliedParents: 0,
    storedMedia: 0,
    removedMedia: 0,
    cleared: false,
  };
}

/** Adds `more` into `total`. */
export function addApplyStats(total: ApplyStats, more: ApplyStats): void {
  total.stored += more.stored;
  total.removed += more.removed;
  total.unknownRemovals += more.unknownRemovals;
  total.droppedStores += more.droppedStores;
  total.impliedParents += more.impliedParents;
  total.storedMedia |= more.storedMedia;
  total.removedMedia |= more.removedMedia;
  total.cleared ||= more.cleared;
}

export interface KvBlockIndexOptions {
  readonly maxBlocks?: number;
  /** The gateway's budget over every index; none: this index's maxBlocks alone. */
  readonly budget?: KvBlockBudget;
}

export class KvBlockIndex implements BudgetedIndex {
  /** The blocks, first stored first (block-table.ts); implied ones flagged (see above). */
  readonly #table = new BlockTable();
  readonly #maxBlocks: number;
  readonly #budget: KvBlockBudget | undefined;

  constructor(opts: KvBlockIndexOptions = {}) {
    this.#maxBlocks = opts.maxBlocks ?? DEFAULT_MAX_BLOCKS;
    this.#budget = opts.budget;
    this.#budget?.join(this);
  }

  /** Blocks held on at least one tier. */
  get size(): number {
    return this.#table.size;
  }

  /** Apply one batch's events in order. */
  apply(events: readonly KvCacheEvent[]): ApplyStats {
    const stats = buildApplyStats();
    for (const e of events) {
      switch (e.type) {
        case 'BlockStored':
          this.#store(e.blockHashes, e.parentBlockHash, bitOf(e.medium), stats);
          break;
        case 'BlockRemoved':
          this.#remove(e.blockHashes, bitOf(e.medium), stats);
          break;
        case 'AllBlocksCleared':
          this.clear();
          stats.cleared = true;
          break;
      }
    }
    return stats;
  }

  clear(): void {
    this.#budget?.count(-this.#table.size);
    this.#table.clear();
  }

  /** The index is no longer used: its blocks leave the gateway's budget. */
  release(): void {
    this.#budget?.leave(this);
    this.#table.clear();
  }

  evictOldest(): boolean {
    const e = this.#table.oldest();
    if (e === NO_ENTRY) return false;
    this.#table.delete(e);
    this.#budget?.count(-1);
    return true;
  }

  get(hash: bigint): BlockEntry | undefined {
    const e = this.#find(hash);
    if (e === NO_ENTRY) return undefined;
    const t = this.#table;
    return {
      parent: t.hasParent(e) ? joinBlockHash(t.parentHiOf(e), t.parentLoOf(e)) : null,
      media: t.mediaOf(e),
    };
  }

  /** The tiers holding `hash`, fastest first. */
  mediaOf(hash: bigint): StorageMedium[] {
    const e = this.#find(hash);
    const media = e === NO_ENTRY ? 0 : this.#table.mediaOf(e);
    return STORAGE_MEDIA.filter((_, i) => (media & (1 << i)) !== 0);
  }

  matchPrefix(blockHashes: readonly bigint[] | PackedBlockHashes): PrefixMatch {
    const halves = (
      blockHashes instanceof PackedBlockHashes ? blockHashes : PackedBlockHashes.from(blockHashes)
    ).halves;
    const t = this.#table;
    const counts = new Uint32Array(STORAGE_MEDIA.length);
    let pages = 0;
    // From the last page back: the deepest held page sets the length, unheld ancestors take the tier after them.
    let tier = -1;
    for (let i = halves.length / 2 - 1; i >= 0; i--) {
      const e = t.find(halves[2 * i] ?? 0, halves[2 * i + 1] ?? 0);
      const media = e === NO_ENTRY ? 0 : t.mediaOf(e);
      // The lowest set bit: the fastest tier holding the page.
      if (media !== 0) tier = 31 - Math.clz32(media & -media);
      if (tier < 0) continue;
      if (pages === 0) pages = i + 1;
      counts[tier] = (counts[tier] ?? 0) + 1;
    }
    const byMedium = buildEmptyPagesByMedium();
    STORAGE_MEDIA.forEach((m, i) => (byMedium[m] = counts[i] ?? 0));
    return { pages, byMedium };
  }

  #find(hash: bigint): number {
    splitBlockHash(hash);
    return this.#table.find(splitHi(), splitLo());
  }

  #store(hashes: readonly bigint[], parent: bigint | null, bit: number, stats: ApplyStats): void {
    const t = this.#table;
    // The block before the next one stored: its parent (within a chain, the block before it).
    let hasPrior = parent !== null;
    let priorHi = 0;
    let priorLo = 0;
    if (parent !== null) {
      splitBlockHash(parent);
      priorHi = splitHi();
      priorLo = splitLo();
    }
    // Only under a device page: a host copy's parent may be on the device alone, and its removal from there
    // would leave a host bit set here that no event clears.
    if (hasPrior && bit === DEVICE_BIT && t.find(priorHi, priorLo) === NO_ENTRY) {
      const implied = this.#add(priorHi, priorLo, bit, stats);
      if (implied !== NO_ENTRY) {
        t.setImplied(implied, true);
        stats.impliedParents++;
      }
    }
    for (const h of hashes) {
      splitBlockHash(h);
      const hi = splitHi();
      const lo = splitLo();
      let e = t.find(hi, lo);
      if (e !== NO_ENTRY) {
        t.setImplied(e, false);
        const media = t.mediaOf(e);
        if ((media & bit) === 0) {
          stats.stored++;
          stats.storedMedia |= bit;
        }
        t.setMedia(e, media | bit);
      } else {
        e = this.#add(hi, lo, bit, stats);
        if (e !== NO_ENTRY) {
          stats.stored++;
          stats.storedMedia |= bit;
        }
      }
      if (e !== NO_ENTRY) {
        if (hasPrior) t.setParent(e, priorHi, priorLo);
        else t.clearParent(e);
      }
      hasPrior = true;
      priorHi = hi;
      priorLo = lo;
    }
  }

  /** A new entry holding `bit`, without a parent, unless the index is at maxBlocks (counted: NO_ENTRY). */
  #add(hi: number, lo: number, bit: number, stats: ApplyStats): number {
    if (this.#table.size >= this.#maxBlocks) {
      stats.droppedStores++;
      return NO_ENTRY;
    }
    this.#budget?.makeRoom();
    const e = this.#table.insert(hi, lo);
    this.#table.setMedia(e, bit);
    this.#budget?.count(1);
    return e;
  }

  #remove(hashes: readonly bigint[], bit: number, stats: ApplyStats): void {
    const t = this.#table;
    for (const h of hashes) {
      const e = this.#find(h);
      const media = e === NO_ENTRY ? 0 : t.mediaOf(e);
      if ((media & bit) === 0) {
        stats.unknownRemovals++;
        continue;
      }
      t.setMedia(e, media & ~bit);
      stats.removed++;
      if (!t.isImplied(e)) stats.removedMedia |= bit;
      if ((media & ~bit) === 0) {
        t.delete(e);
        this.#budget?.count(-1);
      }
    }
  }
}
