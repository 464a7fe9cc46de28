// What a Deployment's shared L3 tier (HiCache's `file` storage, ADR 0029)
// holds, as the gateway can know it: SGLang 0.5.23 publishes KV events for the
// device and host tiers only (StorageMedium DISK and EXTERNAL are declared in
// disaggregation/kv_events.py, nothing emits them), and the file backend has
// no listing or query a gateway could ask (its files are on the replicas'
// volume; `batch_exists` is in-process). So the gateway models it from the
// members' own events.
//
// - One set of blocks per L3 directory: the operator mounts `kv/<fingerprint>`
//   of one claim per role (operator/.../l3/plan.ts), so the unit is
//   Deployment + role + identity fingerprint. Every member runtime of that
//   unit feeds it; every member is credited from it, whichever computed the
//   prefix.
// - Fed by host-tier stores: the wheel backs a page up to storage when its
//   host copy is acked (unified_radix_cache.py `_finish_write_through_ack`
//   records the CPU BlockStored, then `write_backup_storage`), under every
//   write policy: write_through (the operator's default, SGLang's too) at
//   the first store, write_through_selective at the second hit, write_back
//   when the device evicts. A device store alone is not in L3 yet: with the
//   host pool full, the wheel drops it unbacked. DISK/EXTERNAL stores count
//   directly, for an SGLang that publishes them.
// - Never emptied by the members' events: a host eviction leaves the file;
//   AllBlocksCleared (a /flush_cache: `_reset_full`) resets device and host
//   but not the storage backend, which only /clear_hicache_storage_backend
//   empties (`HiCacheFile.clear`), and that publishes nothing. DISK/EXTERNAL
//   removals remove.
// - A set lives while some endpoint of its unit is in the routing table: a
//   rollout's old fingerprint goes with its last replica (its directory
//   stays on the volume; a rollback starts with an empty model, the safe
//   direction). A set is bounded (maxBlocks, its oldest first, a re-stored
//   block counting as new) and its blocks count in the gateway's budget
//   (block-budget.ts), which may evict its oldest too.
// - A match is the leading run of held pages: SGLang's prefetch asks the
//   backend how many leading pages exist (`batch_exists`) and loads those,
//   so a page missing from the model (evicted from it) ends the match.
//
// Over-reporting is possible where the model cannot see: a
// /clear_hicache_storage_backend, an admin removing the directory, a capped
// LRUFileEvictor, a backup still in flight. Routing then sends a request to a
// replica that computes instead of loading; every member is credited alike,
// so it changes only how far a prefix spreads past its device holder.

import type { KvCacheEvent, StorageMedium } from '#sglang/kv-events.ts';
import type { BudgetedIndex, KvBlockBudget } from './block-budget.ts';
import { DEFAULT_MAX_BLOCKS } from './block-index.ts';

/** The tiers whose stores put a page in L3 (see above). */
const FEEDING_MEDIA: ReadonlySet<StorageMedium> = new Set(['CPU_PINNED', 'DISK', 'EXTERNAL']);
/** The tiers whose removals take a page out of L3: the storage tiers themselves. */
const STORAGE_MEDIA: ReadonlySet<StorageMedium> = new Set(['DISK', 'EXTERNAL']);

/** What /status shows of one modelled directory. */
export interface L3UnitStatus extends L3Unit {
  /** Blocks the model holds now. */
  readonly blocks: number;
  /** The endpoints bound to it (that feed it and are credited from it). */
  readonly endpoints: readonly string[];
}

/** The L3 directory one endpoint reads and writes: its Deployment, role and identity fingerprint. */
export interface L3Unit {
  readonly deployment: string;
  readonly role: string;
  readonly fingerprint: string;
  /** Tokens a block is hashed over (the runtime's page size; one per fingerprint). */
  readonly blockSize: number;
}

/** The blocks one L3 directory holds, oldest first. */
class L3BlockSet implements BudgetedIndex {
  readonly blockSize: number;
  readonly #blocks = new Set<bigint>();
  readonly #maxBlocks: number;
  readonly #budget: KvBlockBudget | undefined;

  constructor(blockSize: number, maxBlocks: number, budget: KvBlockBudget | undefined) {
    this.blockSize = blockSize;
    this.#maxBlocks = maxBlocks;
    this.#budget = budget;
    budget?.join(this);
  }

  get size(): number {
    return this.#blocks.size;
  }

  add(hash: bigint): void {
    if (this.#blocks.delete(hash)) {
      this.#blocks.add(hash); // stored again: the newest now
      return;
    }
    if (this.#blocks.size >= this.#maxBlocks) this.evictOldest();
    this.#budget?.makeRoom();
    this.#blocks.add(hash);
    this.#budget?.count(1);
  }

  remove(hash: bigint): void {
    if (this.#blocks.delete(hash)) this.#budget?.count(-1);
  }

  has(hash: bigint): boolean {
    return this.#blocks.has(hash);
  }

  evictOldest(): boolean {
    for (const h of this.#blocks) {
      this.remove(h);
      return true;
    }
    return false;
  }

  release(): void {
    this.#budget?.leave(this);
    this.#blocks.clear();
  }
}

export interface SharedL3IndexOptions {
  /** The gateway's budget over every index. */
  readonly budget?: KvBlockBudget;
  /** Blocks one directory's model holds at most (default as a runtime's index). */
  readonly maxBlocks?: number;
}

export class SharedL3Index {
  readonly #sets = new Map<string, L3BlockSet>();
  /** Each bound endpoint's unit key. */
  readonly #unitOf = new Map<string, string>();
  readonly #opts: SharedL3IndexOptions;

  constructor(opts: SharedL3IndexOptions = {}) {
    this.#opts = opts;
  }

  /** Directories modelled now. */
  get units(): number {
    return this.#sets.size;
  }

  /** Blocks modelled over every directory. */
  get blocks(): number {
    let n = 0;
    for (const s of this.#sets.values()) n += s.size;
    return n;
  }

  /** `endpointId` reads and writes `unit`'s directory (null: it has no reachable L3 tier). */
  bind(endpointId: string, unit: L3Unit | null): void {
    if (!unit) {
      this.unbind(endpointId);
      return;
    }
    const key = JSON.stringify([unit.deployment, unit.role, unit.fingerprint, unit.blockSize]);
    this.#unitOf.set(endpointId, key);
    if (!this.#sets.has(key))
      this.#sets.set(
        key,
        new L3BlockSet(unit.blockSize, this.#opts.maxBlocks ?? DEFAULT_MAX_BLOCKS, this.#opts.budget),
      );
  }

  /** Endpoints bound to a directory now. */
  boundEndpoints(): string[] {
    return [...this.#unitOf.keys()];
  }

  unbind(endpointId: string): void {
    this.#unitOf.delete(endpointId);
  }

  /** Drops the model of every directory no endpoint is bound to. */
  prune(): void {
    const bound = new Set(this.#unitOf.values());
    for (const [key, set] of this.#sets)
      if (!bound.has(key)) {
        set.release();
        this.#sets.delete(key);
      }
  }

  /** One batch of `endpointId`'s KV events (see above for what each does to L3). */
  record(endpointId: string, events: readonly KvCacheEvent[]): void {
    const key = this.#unitOf.get(endpointId);
    const set = key === undefined ? undefined : this.#sets.get(key);
    if (!set) return;
    for (const e of events) {
      if (e.type === 'BlockStored' && FEEDING_MEDIA.has(e.medium)) for (const h of e.blockHashes) set.add(h);
      else if (e.type === 'BlockRemoved' && STORAGE_MEDIA.has(e.medium))
        for (const h of e.blockHashes) set.remove(h);
    }
  }

  /** The block size `endpointId`'s directory hashes over; undefined when it has none. */
  blockSizeOf(endpointId: string): number | undefined {
    const key = this.#unitOf.get(endpointId);
    return key === undefined ? undefined : this.#sets.get(key)?.blockSize;
  }

  /** Each modelled directory: its unit, the blocks it holds and the endpoints bound to it (for /status). */
  list(): L3UnitStatus[] {
    const members = new Map<string, string[]>();
    for (const [endpoint, key] of this.#unitOf) members.set(key, [...(members.get(key) ?? []), endpoint]);
    return [...this.#sets].map(([key, set]) => {
      const [deployment = '', role = '', fingerprint = ''] = JSON.parse(key) as [
        string,
        string,
        string,
        number,
      ];
      return {
        deployment,
        role,
        fingerprint,
        blockSize: set.blockSize,
        blocks: set.size,
        endpoints: (members.get(key) ?? []).sort(),
      };
    });
  }

  /** Leading pages of `blockHashes` (hashed at blockSizeOf) the endpoint's directory holds. */
  matchPages(endpointId: string, blockHashes: readonly bigint[]): number {
    const key = this.#unitOf.get(endpointId);
    const set = key === undefined ? undefined : this.#sets.get(key);
    if (!set) return 0;
    let pages = 0;
    while (pages < blockHashes.length && set.has(blockHashes[pages] as bigint)) pages++;
    return pages;
  }
}
