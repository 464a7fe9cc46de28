// The KV cache events a radix tree publishes, after SGLang 0.5.23's
// KVCacheEventRecorder (mem_cache/events.py) and the Rust tree core's
// equivalent, in the default (non-dynamo) format:
//
// - record a store: one BlockStored per page of the node, whose
//   parent_block_hash is the previous page's hash (for the first page, the
//   parent node's last page; null under a namespace root). block_size is the
//   page's token count, lora_id null, cache_salt the namespace's salt.
// - record a remove: one BlockRemoved with the node's page hashes.
// - record a clear: AllBlocksCleared.
// - enqueue coalesces an event into the queue's tail when they continue each
//   other: BlockRemoved of the same medium; BlockStored of the same medium,
//   block size and salt whose parent is the tail's last hash. So a request's
//   pages arrive as one BlockStored, and what a step evicts as one
//   BlockRemoved.
//
// - a write-through host copy completes after the step that started it:
//   deferStore keeps it aside until releaseDeferred(), which the owner calls
//   once it has taken the step's events (SGLang records it on the copy's
//   acknowledgement, at a later scheduler pass).
//
// Pure: the owner decides when to take() the queue (SGLang does after each
// prefill batch, every decode_log_interval decode batches and when idle).

import { computePageDigests, computeSaltSeed, toBlockHash, type Digest } from '#sglang/kv-event-hash.ts';
import type { KvCacheEvent, StorageMedium } from '#sglang/kv-events.ts';

/** What the recorder needs of a tree node: its tokens and its parent (null for a namespace root). */
export interface HashableNode<N> {
  readonly key: readonly number[];
  readonly parent: N | null;
}

export interface KvEventRecorderOptions<N> {
  readonly pageSize: number;
  /** The cache_salt of a namespace root's requests (null when unsalted). */
  readonly saltOf: (root: N) => string | null;
}

export class KvEventRecorder<N extends HashableNode<N>> {
  readonly #opts: KvEventRecorderOptions<N>;
  #queue: KvCacheEvent[] = [];
  #deferred: [N, StorageMedium][] = [];
  // Keyed by the key array, which the tree replaces (never mutates) when it
  // splits a node: a split node's pages are then rehashed from its new parent.
  readonly #digests = new WeakMap<readonly number[], Digest[]>();
  readonly #seeds = new WeakMap<N, Digest | null>();

  constructor(opts: KvEventRecorderOptions<N>) {
    this.#opts = opts;
  }

  recordStore(node: N, medium: StorageMedium): void {
    const digests = this.#digestsOf(node);
    const root = rootOf(node);
    const salt = this.#opts.saltOf(root);
    let parent = node.parent && node.parent !== root ? this.#lastHash(node.parent) : null;
    const p = this.#opts.pageSize;
    digests.forEach((digest, i) => {
      const tokenIds = node.key.slice(i * p, (i + 1) * p);
      const hash = toBlockHash(digest);
      this.#enqueue({
        type: 'BlockStored',
        blockHashes: [hash],
        parentBlockHash: parent,
        tokenIds,
        blockSize: tokenIds.length,
        loraId: null,
        medium,
        cacheSalt: salt,
      });
      parent = hash;
    });
  }

  /** A store recorded at the next releaseDeferred(). */
  deferStore(node: N, medium: StorageMedium): void {
    this.#deferred.push([node, medium]);
  }

  /** Record the deferred stores of nodes still in the tree (a node removed meanwhile has nothing to store). */
  releaseDeferred(): void {
    const deferred = this.#deferred;
    this.#deferred = [];
    for (const [node, medium] of deferred) if (node.parent) this.recordStore(node, medium);
  }

  recordRemove(node: N, medium: StorageMedium): void {
    const hashes = this.#digestsOf(node).map(toBlockHash);
    if (hashes.length > 0) this.#enqueue({ type: 'BlockRemoved', blockHashes: hashes, medium });
  }

  recordAllCleared(): void {
    this.#enqueue({ type: 'AllBlocksCleared' });
  }

  /** The events recorded since the last take, oldest first. */
  take(): KvCacheEvent[] {
    const out = this.#queue;
    this.#queue = [];
    return out;
  }

  get pending(): number {
    return this.#queue.length;
  }

  #lastHash(node: N): bigint | null {
    const d = this.#digestsOf(node).at(-1);
    return d ? toBlockHash(d) : null;
  }

  #digestsOf(node: N): Digest[] {
    const cached = this.#digests.get(node.key);
    if (cached) return cached;
    // Walk up to the nearest hashed ancestor (or the root), then hash down.
    const missing: N[] = [];
    let n: N | null = node;
    let prior: Digest | null = null;
    while (n?.parent) {
      const have = this.#digests.get(n.key);
      if (have) {
        prior = have.at(-1) ?? null;
        break;
      }
      missing.push(n);
      n = n.parent;
    }
    if (n && !n.parent) prior = this.#seedOf(n);
    let out: Digest[] = [];
    for (const m of missing.reverse()) {
      out = computePageDigests(prior, m.key, this.#opts.pageSize);
      this.#digests.set(m.key, out);
      prior = out.at(-1) ?? prior;
    }
    return out;
  }

  #seedOf(root: N): Digest | null {
    if (!this.#seeds.has(root)) this.#seeds.set(root, computeSaltSeed(this.#opts.saltOf(root)));
    return this.#seeds.get(root) ?? null;
  }

  #enqueue(event: KvCacheEvent): void {
    const tail = this.#queue.at(-1);
    if (tail?.type === 'BlockRemoved' && event.type === 'BlockRemoved' && tail.medium === event.medium) {
      tail.blockHashes.push(...event.blockHashes);
      return;
    }
    if (
      tail?.type === 'BlockStored' &&
      event.type === 'BlockStored' &&
      tail.medium === event.medium &&
      tail.blockSize === event.blockSize &&
      tail.cacheSalt === event.cacheSalt &&
      tail.blockHashes.length > 0 &&
      event.parentBlockHash === tail.blockHashes.at(-1)
    ) {
      tail.blockHashes.push(...event.blockHashes);
      tail.tokenIds.push(...event.tokenIds);
      return;
    }
    this.#queue.push(event);
  }
}

function rootOf<N extends HashableNode<N>>(node: N): N {
  let n = node;
  while (n.parent) n = n.parent;
  return n;
}
