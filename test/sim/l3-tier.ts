// The radix tree's link to a shared L3 tier (l3-store.ts), after SGLang 0.5.23's
// mem_cache/unified_radix_cache.py:
// - Write-through: every page the host tier backs up is written to L3 (write_backup_storage
//   follows each host ack, whatever the write policy), under the request namespace's chain.
// - Prefetch: past the device and host match, the pages of the prompt's cacheable part
//   (page-aligned, the last token excluded) are looked up as a leading run. SGLang prefetches
//   only when that part is at least `prefetch_threshold` tokens (256, or the page size if
//   larger: cache_controller.py) and drops a hit below it ("below_threshold").
// Pages are keyed by hash chains (l3-store.ts); each tree node remembers the chain state at its
// end, so a backup hashes only the node's own pages. A split keeps the tail node's state (its
// last page is unchanged) and the new head computes its own.

import { pageKeys, seedL3Chain, type L3Store } from './l3-store.ts';
import type { RadixTree, TreeNode } from './radix-tree.ts';

/** SGLang's prefetch_threshold (unified_radix_cache.py, cache_controller.py). */
export const L3_PREFETCH_THRESHOLD = 256;

export interface L3TierConfig {
  readonly store: L3Store;
  /** Part of every key, as the served model name is part of HiCacheFile's file names. */
  readonly servedModel: string;
  /** Tokens a second an L3 page load costs (read from the tier into host memory, then loaded). */
  readonly loadTps: number;
  /** `storage_backend` in cached_tokens_details: the backend's class name (HiCacheFile). */
  readonly backendName: string;
}

export class L3Tier {
  readonly config: L3TierConfig;
  readonly #tree: RadixTree;
  readonly #endState = new WeakMap<TreeNode, Buffer>();
  /** Tokens written through to L3 by this server (new to the tier). */
  writtenTokens = 0;

  constructor(tree: RadixTree, config: L3TierConfig) {
    this.config = config;
    this.#tree = tree;
    tree.onBackedUp = (node) => this.#writeThrough(node);
  }

  /**
   * Tokens of `tokens` (the prompt's cacheable part) the tier would load past the first
   * `matched` (device + host), as a leading run of whole pages; 0 below the threshold.
   */
  lookup(namespace: string, tokens: readonly number[], matched: number): number {
    const page = this.#tree.pageSize;
    const threshold = Math.max(L3_PREFETCH_THRESHOLD, page);
    const limit = tokens.length - (tokens.length % page);
    if (limit - matched < threshold) return 0;
    const keys = pageKeys(this.#seed(namespace), tokens.slice(0, limit), page);
    const run = this.config.store.leadingRun(keys.slice(matched / page)) * page;
    return run < threshold ? 0 : run;
  }

  #seed(namespace: string): Buffer {
    return seedL3Chain(this.config.servedModel, namespace);
  }

  #writeThrough(node: TreeNode): void {
    this.writtenTokens += this.config.store.write(this.#pagesOf(node)) * this.#tree.pageSize;
  }

  /** The keys of `node`'s own pages, from its parent's chain state. */
  #pagesOf(node: TreeNode): Buffer[] {
    const parent = node.parent;
    const start = parent ? this.#stateAt(parent) : this.#seed(this.#tree.namespaceOf(node));
    const keys = pageKeys(start, node.key, this.#tree.pageSize);
    const last = keys.at(-1);
    if (last) this.#endState.set(node, last);
    return keys;
  }

  #stateAt(node: TreeNode): Buffer {
    const known = this.#endState.get(node);
    if (known) return known;
    if (!node.parent) return this.#seed(this.#tree.namespaceOf(node));
    const keys = this.#pagesOf(node);
    return keys.at(-1) ?? this.#stateAt(node.parent);
  }
}
