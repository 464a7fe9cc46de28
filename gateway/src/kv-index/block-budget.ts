// One block budget for every KV index of a gateway. Each index is bounded on
// its own (block-index.ts maxBlocks), but a gateway follows every runtime of
// every namespace: a hundred runtimes that each fill their bound, or one that
// floods BlockStored events for pages it never cached (a runtime image is the
// namespace user's), would hold gigabytes. With a budget, a new block past the
// gateway's total evicts the oldest block of the largest index: the flooder
// pays first, and an index that is small stays whole.
//
// Evicting is safe for routing: it drops only our record, the runtime still
// holds the page. matchPrefix counts up to the deepest page an index holds, so
// evicting an ancestor (the oldest goes first) leaves a match whole while a
// page below it stays; a match shortens only once every page past a point is
// gone, and never counts a page past the deepest one seen stored (the index
// may under-report, never over-report). Evictions are counted for the metric.

/** What the budget needs of an index. */
export interface BudgetedIndex {
  readonly size: number;
  /** Drops its oldest block (Map order: first stored); false when it holds none. */
  evictOldest(): boolean;
}

export const DEFAULT_GATEWAY_MAX_BLOCKS = 1 << 22;

export class KvBlockBudget {
  readonly maxBlocks: number;
  readonly #members = new Set<BudgetedIndex>();
  #total = 0;
  #evicted = 0;

  constructor(maxBlocks: number = DEFAULT_GATEWAY_MAX_BLOCKS) {
    if (!Number.isSafeInteger(maxBlocks) || maxBlocks < 1)
      throw new RangeError(`a block budget is a positive integer, not ${maxBlocks}`);
    this.maxBlocks = maxBlocks;
  }

  /** Blocks held by every index now. */
  get total(): number {
    return this.#total;
  }

  /** Blocks evicted to stay within the budget since the start. */
  get evicted(): number {
    return this.#evicted;
  }

  join(index: BudgetedIndex): void {
    this.#members.add(index);
  }

  /** The index is gone: its blocks no longer count. */
  leave(index: BudgetedIndex): void {
    if (this.#members.delete(index)) this.#total -= index.size;
  }

  /** An index is about to store one new block: evicts one somewhere first when the budget is full. */
  makeRoom(): void {
    if (this.#total < this.maxBlocks) return;
    let largest: BudgetedIndex | undefined;
    for (const m of this.#members) if (!largest || m.size > largest.size) largest = m;
    if (largest?.evictOldest()) this.#evicted++;
  }

  /** An index's block count changed by `delta` (stores positive, removals negative). */
  count(delta: number): void {
    this.#total += delta;
  }
}
