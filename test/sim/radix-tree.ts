// A two-tier radix prefix cache over token ids, after SGLang's RadixCache and
// HiRadixCache (python/sglang/srt/mem_cache/radix_cache.py, hiradix_cache.py).
//
// Invariants (checked by radix-tree.test.ts against a from-scratch recount):
// - Every node but a root holds a key whose length is a positive multiple of
//   pageSize; matching and insertion only use whole pages, so a split never
//   falls inside a page.
// - Each namespace (cache_salt + extra_key) has its own root: different
//   namespaces never share a node.
// - A node's KV is on the device tier, the host tier, or both; a node on
//   neither is removed. The device set is closed upwards (a device node's
//   parent is a device node or a root) because device eviction only takes
//   device leaves and insertion marks the whole path as device.
// - lockRef counts the running requests using a node (and, as in SGLang, each
//   lock walks up to the root). Locked nodes are never evicted.
// - deviceSize, hostSize and lockedSize (device tokens with lockRef > 0) are
//   maintained incrementally.
//
// Pure: the caller passes `now` (any monotonic number) for LRU ordering. An
// optional TreeObserver hears where KV lands and leaves, at the points
// SGLang's tree records its KV events (the simulator's event recorder).

import { MinHeap } from './min-heap.ts';

export const WritePolicy = {
  writeBack: 'write_back',
  writeThrough: 'write_through',
  writeThroughSelective: 'write_through_selective',
} as const;
export type WritePolicy = (typeof WritePolicy)[keyof typeof WritePolicy];

export interface RadixTreeOptions {
  readonly pageSize: number;
  /** Host tier capacity in tokens; 0 disables the host tier (no HiCache). */
  readonly hostCapacity: number;
  readonly writePolicy: WritePolicy;
}

export interface TreeNode {
  readonly id: number;
  key: number[];
  readonly children: Map<number | string, TreeNode>;
  parent: TreeNode | null;
  lockRef: number;
  lastAccess: number;
  hitCount: number;
  device: boolean;
  host: boolean;
}

export const Tier = { device: 'device', host: 'host' } as const;
export type Tier = (typeof Tier)[keyof typeof Tier];

/**
 * Told, synchronously and while the node is still linked to its parent,
 * when a node's KV becomes resident on a tier (a new leaf, a node brought
 * back to the device by an insert or a load-back, a host backup), when it
 * leaves one (device or host eviction), and when the whole cache is reset.
 */
export interface TreeObserver {
  /**
   * `copying`: a write-through backup, whose host copy SGLang's cache
   * controller completes (and records) only after the step that started it.
   */
  onStored(node: TreeNode, tier: Tier, copying?: boolean): void;
  onRemoved(node: TreeNode, tier: Tier): void;
  onCleared(): void;
}

export interface MatchResult {
  /** Deepest matched node (a root when nothing matched). */
  readonly node: TreeNode;
  /** Deepest node whose KV is on the device (a root when none). */
  readonly deviceNode: TreeNode;
  readonly deviceTokens: number;
  /** Matched tokens only on the host tier, below deviceNode. */
  readonly hostTokens: number;
}

export interface TreeSizes {
  readonly deviceSize: number;
  readonly hostSize: number;
  readonly lockedSize: number;
  readonly nodeCount: number;
}

function selectiveThreshold(policy: WritePolicy): number {
  return policy === 'write_through_selective' ? 2 : 1;
}

export class RadixTree {
  readonly #opts: RadixTreeOptions;
  readonly #roots = new Map<string, TreeNode>();
  readonly #rootNames = new Map<TreeNode, string>();
  observer: TreeObserver | null = null;
  /** Told after each host backup: where SGLang writes the pages through to its L3 tier (l3-tier.ts). */
  onBackedUp: ((node: TreeNode) => void) | null = null;
  #nextId = 0;
  #deviceSize = 0;
  #hostSize = 0;
  /** Tokens ever copied to the host tier, and dropped from it for room (SGLang's hicache counters). */
  #backedUp = 0;
  #droppedHost = 0;
  #lockedSize = 0;
  #nodeCount = 0;
  /**
   * Where each namespace's first-level node stands among all of them: SGLang keeps one root whose
   * children dict holds every namespace's first nodes in insertion order (a split's head takes the
   * place of the node it splits), an order its dfs-weight policy reads (topNodes).
   */
  readonly #topSeq = new WeakMap<TreeNode, number>();
  #nextTopSeq = 0;

  constructor(opts: RadixTreeOptions) {
    if (!Number.isInteger(opts.pageSize) || opts.pageSize < 1)
      throw new RangeError('pageSize must be a positive integer');
    this.#opts = opts;
  }

  get pageSize(): number {
    return this.#opts.pageSize;
  }

  get hasHostTier(): boolean {
    return this.#opts.hostCapacity > 0;
  }

  sizes(): TreeSizes {
    return {
      deviceSize: this.#deviceSize,
      hostSize: this.#hostSize,
      lockedSize: this.#lockedSize,
      nodeCount: this.#nodeCount,
    };
  }

  get backedUpTokens(): number {
    return this.#backedUp;
  }

  get droppedHostTokens(): number {
    return this.#droppedHost;
  }

  get evictableDeviceSize(): number {
    return this.#deviceSize - this.#lockedSize;
  }

  #newNode(key: number[], parent: TreeNode | null, now: number): TreeNode {
    return {
      id: this.#nextId++,
      key,
      children: new Map(),
      parent,
      lockRef: 0,
      lastAccess: now,
      hitCount: 0,
      device: false,
      host: false,
    };
  }

  #root(namespace: string, now: number): TreeNode {
    let root = this.#roots.get(namespace);
    if (!root) {
      root = this.#newNode([], null, now);
      root.device = true;
      root.lockRef = 1; // roots are never evicted
      this.#roots.set(namespace, root);
      this.#rootNames.set(root, namespace);
    }
    return root;
  }

  /** The namespace of the root `node` hangs under ('' if detached). */
  namespaceOf(node: TreeNode): string {
    let n = node;
    while (n.parent) n = n.parent;
    return this.#rootNames.get(n) ?? '';
  }

  #childKey(tokens: readonly number[], at: number): number | string {
    const p = this.#opts.pageSize;
    if (p === 1) return tokens[at] ?? -1;
    return tokens.slice(at, at + p).join(',');
  }

  /** Whole pages of `tokens[at..]` equal to `key`, counted in tokens. */
  #matchLength(key: readonly number[], tokens: readonly number[], at: number, limit: number): number {
    const p = this.#opts.pageSize;
    const max = Math.min(key.length, limit - at);
    let i = 0;
    while (i < max && key[i] === tokens[at + i]) i++;
    return i - (i % p);
  }

  /** Split `node` so that its first `at` tokens become a new parent; returns that parent. */
  #split(node: TreeNode, at: number): TreeNode {
    const parent = node.parent;
    if (!parent) throw new Error('cannot split a root');
    const head = this.#newNode(node.key.slice(0, at), parent, node.lastAccess);
    head.lockRef = node.lockRef;
    head.hitCount = node.hitCount;
    head.device = node.device;
    head.host = node.host;
    parent.children.set(this.#childKey(node.key, 0), head);
    if (!parent.parent) this.#topSeq.set(head, this.#topSeq.get(node) ?? this.#nextTopSeq++);
    node.key = node.key.slice(at);
    node.parent = head;
    head.children.set(this.#childKey(node.key, 0), node);
    this.#nodeCount++;
    return head;
  }

  #pageFloor(n: number): number {
    return n - (n % this.#opts.pageSize);
  }

  /**
   * Longest page-aligned cached prefix of `tokens` in `namespace`. Splits a
   * node the match ends inside (as SGLang does) and touches the path for LRU.
   */
  match(namespace: string, tokens: readonly number[], now: number): MatchResult {
    return this.#match(namespace, tokens, now, true);
  }

  /**
   * `match` as a scheduling policy's pass makes it (SchedulePolicy._compute_prefix_matches): it
   * splits and touches the path as SGLang's match_prefix does, but counts no hit, since SGLang
   * counts a node's hits when a request inserts through it, not when a queue is ordered.
   */
  probe(namespace: string, tokens: readonly number[], now: number): MatchResult {
    return this.#match(namespace, tokens, now, false);
  }

  /** Every namespace's first-level nodes, in the order of SGLang's one root's children. */
  topNodes(): TreeNode[] {
    const nodes = [...this.#roots.values()].flatMap((r) => [...r.children.values()]);
    const seq = (n: TreeNode): number => this.#topSeq.get(n) ?? 0;
    return nodes.sort((a, b) => seq(a) - seq(b));
  }

  #match(namespace: string, tokens: readonly number[], now: number, countHit: boolean): MatchResult {
    const root = this.#root(namespace, now);
    const limit = this.#pageFloor(tokens.length);
    let node = root;
    let deviceNode = root;
    let deviceTokens = 0;
    let hostTokens = 0;
    let at = 0;
    while (at < limit) {
      const child = node.children.get(this.#childKey(tokens, at));
      if (!child) break;
      const m = this.#matchLength(child.key, tokens, at, limit);
      if (m === 0) break;
      const next = m < child.key.length ? this.#split(child, m) : child;
      next.lastAccess = now;
      if (countHit) next.hitCount++;
      if (next.device) {
        deviceNode = next;
        deviceTokens += m;
      } else {
        hostTokens += m;
      }
      node = next;
      at += m;
      if (m < child.key.length) break;
    }
    return { node, deviceNode, deviceTokens, hostTokens };
  }

  /**
   * What `match` would find, by tier, without splitting a node or touching the LRU: what a
   * router's index built from this tree's KV events answers (the virtual-time bench's KV index).
   */
  peek(namespace: string, tokens: readonly number[]): { deviceTokens: number; hostTokens: number } {
    let node = this.#roots.get(namespace);
    const limit = this.#pageFloor(tokens.length);
    let deviceTokens = 0;
    let hostTokens = 0;
    let at = 0;
    while (node && at < limit) {
      const child: TreeNode | undefined = node.children.get(this.#childKey(tokens, at));
      if (!child) break;
      const m = this.#matchLength(child.key, tokens, at, limit);
      if (m === 0) break;
      if (child.device) deviceTokens += m;
      else hostTokens += m;
      if (m < child.key.length) break;
      node = child;
      at += m;
    }
    return { deviceTokens, hostTokens };
  }

  /**
   * Insert `tokens` (rounded down to whole pages) with their KV on the device.
   * Nodes on the path come back to the device (their KV was just computed).
   * Returns the deepest node and how many tokens became newly device-resident.
   */
  insert(
    namespace: string,
    tokens: readonly number[],
    now: number,
  ): { node: TreeNode; newDeviceTokens: number } {
    const root = this.#root(namespace, now);
    const limit = this.#pageFloor(tokens.length);
    let node = root;
    let at = 0;
    let added = 0;
    while (at < limit) {
      const child = node.children.get(this.#childKey(tokens, at));
      if (!child) {
        const leaf = this.#newNode(tokens.slice(at, limit), node, now);
        node.children.set(this.#childKey(tokens, at), leaf);
        if (!node.parent) this.#topSeq.set(leaf, this.#nextTopSeq++);
        this.#nodeCount++;
        leaf.device = true;
        this.#deviceSize += leaf.key.length;
        added += leaf.key.length;
        this.observer?.onStored(leaf, 'device');
        this.#maybeWriteThrough(leaf, now);
        return { node: leaf, newDeviceTokens: added };
      }
      const m = this.#matchLength(child.key, tokens, at, limit);
      const next = m < child.key.length ? this.#split(child, m) : child;
      next.lastAccess = now;
      if (!next.device) {
        next.device = true;
        this.#deviceSize += next.key.length;
        if (next.lockRef > 0) this.#lockedSize += next.key.length;
        added += next.key.length;
        this.observer?.onStored(next, 'device');
      }
      this.#maybeWriteThrough(next, now);
      node = next;
      at += m;
    }
    return { node, newDeviceTokens: added };
  }

  #maybeWriteThrough(node: TreeNode, now: number): void {
    if (!this.hasHostTier || node.host || this.#opts.writePolicy === 'write_back') return;
    if (node.hitCount + 1 < selectiveThreshold(this.#opts.writePolicy)) return;
    this.#backup(node, now, true);
  }

  /** Copy a node's KV to the host tier, evicting host-only leaves for room; false when it does not fit. */
  #backup(node: TreeNode, now: number, writeThrough = false): boolean {
    const len = node.key.length;
    const free = this.#opts.hostCapacity - this.#hostSize;
    if (free < len) this.evictHost(len - free, now, node);
    if (this.#opts.hostCapacity - this.#hostSize < len) return false;
    node.host = true;
    this.#hostSize += len;
    this.#backedUp += len;
    this.observer?.onStored(node, 'host', writeThrough);
    this.onBackedUp?.(node);
    return true;
  }

  /** Pin the path from `node` to its root. */
  lock(node: TreeNode): void {
    for (let n: TreeNode | null = node; n?.parent; n = n.parent) {
      if (n.lockRef === 0 && n.device) this.#lockedSize += n.key.length;
      n.lockRef++;
    }
  }

  unlock(node: TreeNode): void {
    for (let n: TreeNode | null = node; n?.parent; n = n.parent) {
      if (n.lockRef <= 0) throw new Error(`unlock of unlocked node ${n.id}`);
      n.lockRef--;
      if (n.lockRef === 0 && n.device) this.#lockedSize -= n.key.length;
    }
  }

  /**
   * Bring the host-only nodes between `deviceNode` and `node` back to the
   * device (the caller has made room). Returns the tokens loaded.
   */
  loadBack(match: MatchResult): number {
    const path: TreeNode[] = [];
    for (let n: TreeNode | null = match.node; n && n !== match.deviceNode; n = n.parent) path.push(n);
    let loaded = 0;
    // Top-down, so each store event's parent is already on the device.
    for (const n of path.reverse()) {
      if (n.device) continue;
      n.device = true;
      this.#deviceSize += n.key.length;
      if (n.lockRef > 0) this.#lockedSize += n.key.length;
      loaded += n.key.length;
      this.observer?.onStored(n, 'device');
    }
    return loaded;
  }

  #isDeviceLeaf(n: TreeNode): boolean {
    if (!n.parent || !n.device || n.lockRef > 0) return false;
    for (const c of n.children.values()) if (c.device) return false;
    return true;
  }

  #allNodes(): TreeNode[] {
    const out: TreeNode[] = [];
    const stack = [...this.#roots.values()];
    for (let n = stack.pop(); n; n = stack.pop()) {
      if (n.parent) out.push(n);
      for (const c of n.children.values()) stack.push(c);
    }
    return out;
  }

  #remove(n: TreeNode): void {
    const parent = n.parent;
    if (!parent) return;
    parent.children.delete(this.#childKey(n.key, 0));
    n.parent = null;
    this.#nodeCount--;
  }

  /**
   * Free at least `tokens` device tokens from unlocked device leaves, least
   * recently used first. With a host tier, evicted KV is kept on the host
   * (written back now under write_back); without one the node goes away.
   * Returns the device tokens freed.
   */
  evictDevice(tokens: number, now: number): number {
    if (tokens <= 0) return 0;
    const heap = new MinHeap<TreeNode>((a, b) => a.lastAccess - b.lastAccess || a.id - b.id);
    for (const n of this.#allNodes()) if (this.#isDeviceLeaf(n)) heap.push(n);
    let freed = 0;
    while (freed < tokens) {
      const n = heap.pop();
      if (!n) break;
      if (!this.#isDeviceLeaf(n)) continue;
      const len = n.key.length;
      if (this.hasHostTier && !n.host) this.#backup(n, now);
      n.device = false;
      this.#deviceSize -= len;
      freed += len;
      const parent = n.parent;
      // KV on no tier: the node goes, with any host-only descendants (unreachable without it).
      if (n.host) this.observer?.onRemoved(n, 'device');
      else this.#dropSubtree(n);
      if (parent && this.#isDeviceLeaf(parent)) heap.push(parent);
    }
    return freed;
  }

  #dropSubtree(n: TreeNode): void {
    const descendants: TreeNode[] = [];
    const stack = [...n.children.values()];
    for (let c = stack.pop(); c; c = stack.pop()) {
      descendants.push(c);
      stack.push(...c.children.values());
    }
    // As SGLang's drop of an unbacked device leaf: host-only descendants deepest first, then the node.
    for (const c of descendants.reverse()) {
      this.observer?.onRemoved(c, 'host');
      if (c.host) this.#hostSize -= c.key.length;
      this.#nodeCount--;
    }
    this.observer?.onRemoved(n, 'device');
    n.children.clear();
    this.#remove(n);
  }

  /** Free at least `tokens` host tokens from host-only leaves (LRU); `keep` is never taken. */
  evictHost(tokens: number, _now: number, keep?: TreeNode): number {
    const isHostLeaf = (n: TreeNode): boolean =>
      n.parent !== null && n.host && !n.device && n.children.size === 0 && n.lockRef === 0 && n !== keep;
    const heap = new MinHeap<TreeNode>((a, b) => a.lastAccess - b.lastAccess || a.id - b.id);
    for (const n of this.#allNodes()) if (isHostLeaf(n)) heap.push(n);
    let freed = 0;
    while (freed < tokens) {
      const n = heap.pop();
      if (!n) break;
      const parent = n.parent;
      this.observer?.onRemoved(n, 'host');
      n.host = false;
      this.#hostSize -= n.key.length;
      this.#droppedHost += n.key.length;
      freed += n.key.length;
      this.#remove(n);
      if (parent && isHostLeaf(parent)) heap.push(parent);
    }
    return freed;
  }

  /** Drop everything; refused (false) while any request holds a lock. */
  reset(): boolean {
    if (this.#lockedSize > 0 || this.#allNodes().some((n) => n.lockRef > 0)) return false;
    this.#roots.clear();
    this.#rootNames.clear();
    this.observer?.onCleared();
    this.#deviceSize = 0;
    this.#hostSize = 0;
    this.#nodeCount = 0;
    return true;
  }

  /** Sizes recounted by walking the tree (for invariant tests). */
  recountSizes(): TreeSizes {
    let deviceSize = 0;
    let hostSize = 0;
    let lockedSize = 0;
    const nodes = this.#allNodes();
    for (const n of nodes) {
      if (n.device) deviceSize += n.key.length;
      if (n.host) hostSize += n.key.length;
      if (n.device && n.lockRef > 0) lockedSize += n.key.length;
    }
    return { deviceSize, hostSize, lockedSize, nodeCount: nodes.length };
  }

  /** Structural invariant violations, empty when the tree is sound (for tests). */
  checkInvariants(): string[] {
    const problems: string[] = [];
    const p = this.#opts.pageSize;
    for (const n of this.#allNodes()) {
      const parent = n.parent;
      if (n.key.length === 0 || n.key.length % p !== 0)
        problems.push(`node ${n.id}: key length ${n.key.length}`);
      if (!n.device && !n.host) problems.push(`node ${n.id}: on no tier`);
      if (n.device && parent?.parent && !parent.device)
        problems.push(`node ${n.id}: device under host-only parent`);
      if (parent && parent.children.get(this.#childKey(n.key, 0)) !== n)
        problems.push(`node ${n.id}: wrong child key`);
      if (n.lockRef < 0) problems.push(`node ${n.id}: negative lockRef`);
    }
    return problems;
  }

  /** All cached sequences of a namespace, for tests. */
  sequences(namespace: string): number[][] {
    const root = this.#roots.get(namespace);
    if (!root) return [];
    const out: number[][] = [];
    const walk = (n: TreeNode, prefix: number[]): void => {
      const seq = [...prefix, ...n.key];
      if (n.children.size === 0 && n.parent) out.push(seq);
      for (const c of n.children.values()) walk(c, seq);
    };
    walk(root, []);
    return out;
  }
}
