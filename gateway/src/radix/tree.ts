// The approximate prefix tree: which endpoint probably holds which prefix.
//
// After SGLang's router (one radix tree, a tenant set with last-access time
// on every node) with three changes: edges are token blocks (see blocks.ts),
// each cache salt has its own root so tenants never look shared, and the
// tree can be corrected (`trim`) from what the runtime reported it had.
//
// Invariants (tree.test.ts recomputes them from scratch after random runs):
// - Every non-root node has a non-empty edge and at least one owner; a node
//   that loses its last owner is removed.
// - Ownership is closed upwards: an owner of a node owns its parent (insert
//   marks the whole path; evict only takes an owner's leaves; trim removes an
//   owner from a whole subtree).
// - lastAccess of an owner never increases going down a path (insert stamps
//   the whole path with one `now`, callers pass a monotonic clock), so the
//   owner's leaves are its least recently used nodes.
// - sizeOf(endpoint) = sum of edge lengths (blocks) of the nodes it owns,
//   kept incrementally.
//
// Pure: no clock, no I/O. `now` is any monotonic number from the caller.

import type { BlockKey } from './blocks.ts';

export type EndpointId = string;

export interface PrefixKey {
  /** Cache namespace; different salts never share a node. */
  readonly salt: string;
  readonly blocks: readonly BlockKey[];
}

export interface PrefixMatch {
  /** Owners of the deepest matched position (eligible ones only). Sorted. */
  readonly endpoints: readonly EndpointId[];
  /** Blocks matched for those endpoints. */
  readonly matched: number;
  /** Blocks in the query. */
  readonly total: number;
}

interface TreeNode {
  key: BlockKey[];
  /** NO_CHILDREN for a leaf (addChild / removeChild change it). */
  children: ReadonlyMap<BlockKey, TreeNode>;
  parent: TreeNode | undefined;
  /** owner → last access. Empty only on roots. */
  readonly owners: Map<EndpointId, number>;
}

/**
 * A leaf's children, shared and never written: every routed prompt ends in a leaf of its own (its
 * unique tail), and an empty Map of its own was ~140 bytes the tree kept a request, for as long
 * as the leaf lives (promoted by the scavenges, for mark-compacts to trace).
 */
const NO_CHILDREN: ReadonlyMap<BlockKey, TreeNode> = new Map();

function newNode(key: BlockKey[], parent: TreeNode | undefined): TreeNode {
  return { key, children: NO_CHILDREN, parent, owners: new Map() };
}

function addChild(node: TreeNode, child: TreeNode): void {
  const children =
    node.children === NO_CHILDREN
      ? new Map<BlockKey, TreeNode>()
      : (node.children as Map<BlockKey, TreeNode>);
  children.set(child.key[0] as BlockKey, child);
  node.children = children;
}

function removeChild(node: TreeNode, child: TreeNode): void {
  if (node.children === NO_CHILDREN) return;
  const children = node.children as Map<BlockKey, TreeNode>;
  children.delete(child.key[0] as BlockKey);
  if (children.size === 0) node.children = NO_CHILDREN;
}

/** Length of the common prefix of `edge` and `blocks[from..]`. */
function commonLength(edge: readonly BlockKey[], blocks: readonly BlockKey[], from: number): number {
  const n = Math.min(edge.length, blocks.length - from);
  let i = 0;
  while (i < n && edge[i] === blocks[from + i]) i++;
  return i;
}

interface Leaf {
  readonly node: TreeNode;
  readonly endpoint: EndpointId;
  readonly lastAccess: number;
}

export class PrefixTree {
  readonly #roots = new Map<string, TreeNode>();
  readonly #sizes = new Map<EndpointId, number>();
  #nodeCount = 0;

  /** Blocks the endpoint is believed to hold, over all salts. */
  sizeOf(endpoint: EndpointId): number {
    return this.#sizes.get(endpoint) ?? 0;
  }

  endpoints(): EndpointId[] {
    return [...this.#sizes.keys()].sort();
  }

  get nodeCount(): number {
    return this.#nodeCount;
  }

  insert(key: PrefixKey, endpoint: EndpointId, now: number): void {
    const { blocks } = key;
    if (blocks.length === 0) return;
    let root = this.#roots.get(key.salt);
    if (!root) {
      root = newNode([], undefined);
      this.#roots.set(key.salt, root);
    }
    let node = root;
    let pos = 0;
    while (pos < blocks.length) {
      const first = blocks[pos] as BlockKey;
      let child = node.children.get(first);
      if (!child) {
        child = newNode(blocks.slice(pos), node);
        addChild(node, child);
        this.#nodeCount++;
      } else {
        const common = commonLength(child.key, blocks, pos);
        if (common < child.key.length) child = this.#split(child, common);
      }
      this.#own(child, endpoint, now);
      pos += child.key.length;
      node = child;
    }
  }

  /**
   * The deepest position of `key` owned by an eligible endpoint. Read-only:
   * a routing decision must not change the tree (the caller inserts after).
   */
  match(key: PrefixKey, isEligible: (endpoint: EndpointId) => boolean = () => true): PrefixMatch {
    const total = key.blocks.length;
    let best: PrefixMatch = { endpoints: [], matched: 0, total };
    this.#walk(key, (node, matchedEnd) => {
      const owners = [...node.owners.keys()].filter(isEligible);
      if (owners.length === 0) return false;
      best = { endpoints: owners.sort(), matched: matchedEnd, total };
      return true;
    });
    return best;
  }

  /** Blocks of `key` each endpoint holds (endpoints holding none are absent). */
  matchByEndpoint(key: PrefixKey): Map<EndpointId, number> {
    const out = new Map<EndpointId, number>();
    this.#walk(key, (node, matchedEnd) => {
      for (const owner of node.owners.keys()) out.set(owner, matchedEnd);
      return true;
    });
    return out;
  }

  /**
   * The endpoint holds only the first `keepBlocks` blocks of `key`: the
   * runtime reported fewer cached tokens than predicted, so it evicted the
   * tail. Removes the endpoint from the rest of this path and everything
   * below it (ownership is closed upwards); other branches are kept.
   */
  trim(endpoint: EndpointId, key: PrefixKey, keepBlocks: number): void {
    const root = this.#roots.get(key.salt);
    if (!root) return;
    const keep = Math.max(0, Math.floor(keepBlocks));
    const { blocks } = key;
    let node = root;
    let pos = 0;
    while (pos < blocks.length) {
      const child = node.children.get(blocks[pos] as BlockKey);
      if (!child || !child.owners.has(endpoint)) return;
      const common = commonLength(child.key, blocks, pos);
      if (common === 0) return;
      if (pos + child.key.length > keep) {
        // The kept part ends inside or at the start of this edge.
        const inEdge = keep - pos;
        if (inEdge > 0) {
          if (inEdge >= common) return; // the query diverged before the cut
          this.#split(child, inEdge); // `child` is now the part below the cut
        }
        this.#disownSubtree(child, endpoint);
        this.#pruneRoot(key.salt);
        return;
      }
      if (common < child.key.length) return;
      pos += child.key.length;
      node = child;
    }
  }

  /**
   * Bounds every endpoint to `maxSize` blocks, dropping its least recently
   * used leaves first; also drops anything idle since before `now - maxIdle`.
   */
  evict(maxSize: number, now: number, maxIdle = Infinity): void {
    const cutoff = now - maxIdle;
    const needsWork = (e: EndpointId) => this.sizeOf(e) > maxSize || Number.isFinite(maxIdle);
    const heap = new LeafHeap();
    for (const root of this.#roots.values())
      for (const child of root.children.values()) this.#collectLeaves(child, heap, needsWork);
    for (let leaf = heap.pop(); leaf; leaf = heap.pop()) {
      const { node, endpoint, lastAccess } = leaf;
      if (this.sizeOf(endpoint) <= maxSize && lastAccess >= cutoff) continue;
      const parent = node.parent as TreeNode;
      this.#disown(node, endpoint);
      if (parent.parent && this.#isLeafOf(parent, endpoint))
        heap.push({ node: parent, endpoint, lastAccess: parent.owners.get(endpoint) as number });
    }
    for (const salt of [...this.#roots.keys()]) this.#pruneRoot(salt);
  }

  removeEndpoint(endpoint: EndpointId): void {
    for (const [salt, root] of this.#roots) {
      for (const child of [...root.children.values()]) this.#disownSubtree(child, endpoint);
      this.#pruneRoot(salt);
    }
    this.#sizes.delete(endpoint);
  }

  reset(): void {
    this.#roots.clear();
    this.#sizes.clear();
    this.#nodeCount = 0;
  }

  /** From-scratch recount and structural check, for tests and debugging. */
  audit(): { sizes: Map<EndpointId, number>; nodeCount: number; issues: string[] } {
    const sizes = new Map<EndpointId, number>();
    const issues: string[] = [];
    let nodeCount = 0;
    const visit = (node: TreeNode, path: string) => {
      for (const [first, child] of node.children) {
        nodeCount++;
        const at = `${path}/${child.key.length}`;
        if (child.key.length === 0) issues.push(`${at}: empty edge`);
        if (child.key[0] !== first) issues.push(`${at}: child keyed by ${first} starts ${child.key[0]}`);
        if (child.parent !== node) issues.push(`${at}: wrong parent`);
        if (child.owners.size === 0) issues.push(`${at}: no owner`);
        for (const [owner, t] of child.owners) {
          sizes.set(owner, (sizes.get(owner) ?? 0) + child.key.length);
          const up = node.owners.get(owner);
          if (node.parent && up === undefined) issues.push(`${at}: ${owner} owns child, not parent`);
          if (up !== undefined && up < t) issues.push(`${at}: ${owner} child newer than parent`);
        }
        visit(child, at);
      }
    };
    for (const [salt, root] of this.#roots) {
      if (root.children.size === 0) issues.push(`${salt}: empty root kept`);
      visit(root, salt);
    }
    for (const [e, s] of this.#sizes) if (s !== 0 && sizes.get(e) !== s) issues.push(`size of ${e}`);
    return { sizes, nodeCount, issues };
  }

  /** Visits the nodes along `key`; `visit(node, blocksMatchedAtNode)` returns false to stop. */
  #walk(key: PrefixKey, visit: (node: TreeNode, matchedEnd: number) => boolean): void {
    const root = this.#roots.get(key.salt);
    if (!root) return;
    const { blocks } = key;
    let node = root;
    let pos = 0;
    while (pos < blocks.length) {
      const child = node.children.get(blocks[pos] as BlockKey);
      if (!child) return;
      const common = commonLength(child.key, blocks, pos);
      if (!visit(child, pos + common) || common < child.key.length) return;
      pos += common;
      node = child;
    }
  }

  /** Splits `node` after `at` blocks; returns the new upper node. Sizes do not change. */
  #split(node: TreeNode, at: number): TreeNode {
    const parent = node.parent as TreeNode;
    const upper = newNode(node.key.slice(0, at), parent);
    for (const [owner, t] of node.owners) upper.owners.set(owner, t);
    node.key = node.key.slice(at);
    node.parent = upper;
    addChild(upper, node);
    addChild(parent, upper);
    this.#nodeCount++;
    return upper;
  }

  #own(node: TreeNode, endpoint: EndpointId, now: number): void {
    if (!node.owners.has(endpoint)) this.#sizes.set(endpoint, this.sizeOf(endpoint) + node.key.length);
    node.owners.set(endpoint, now);
  }

  /** Removes one owner from a node it owns as a leaf; removes the node when ownerless. */
  #disown(node: TreeNode, endpoint: EndpointId): void {
    if (!node.owners.delete(endpoint)) return;
    this.#sizes.set(endpoint, this.sizeOf(endpoint) - node.key.length);
    if (node.owners.size === 0) {
      removeChild(node.parent as TreeNode, node);
      this.#nodeCount--;
    }
  }

  #disownSubtree(node: TreeNode, endpoint: EndpointId): void {
    if (!node.owners.has(endpoint)) return;
    for (const child of [...node.children.values()]) this.#disownSubtree(child, endpoint);
    this.#disown(node, endpoint);
  }

  #isLeafOf(node: TreeNode, endpoint: EndpointId): boolean {
    if (!node.owners.has(endpoint)) return false;
    for (const child of node.children.values()) if (child.owners.has(endpoint)) return false;
    return true;
  }

  #collectLeaves(node: TreeNode, heap: LeafHeap, needsWork: (e: EndpointId) => boolean): void {
    for (const child of node.children.values()) this.#collectLeaves(child, heap, needsWork);
    for (const [endpoint, lastAccess] of node.owners)
      if (needsWork(endpoint) && this.#isLeafOf(node, endpoint)) heap.push({ node, endpoint, lastAccess });
  }

  #pruneRoot(salt: string): void {
    const root = this.#roots.get(salt);
    if (root && root.children.size === 0) this.#roots.delete(salt);
  }
}

/** Binary min-heap of leaves by last access. */
class LeafHeap {
  readonly #items: Leaf[] = [];

  push(leaf: Leaf): void {
    const a = this.#items;
    a.push(leaf);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if ((a[p] as Leaf).lastAccess <= leaf.lastAccess) break;
      a[i] = a[p] as Leaf;
      i = p;
    }
    a[i] = leaf;
  }

  pop(): Leaf | undefined {
    const a = this.#items;
    const top = a[0];
    const last = a.pop();
    if (a.length === 0 || !last) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= a.length) break;
      const r = l + 1;
      const c = r < a.length && (a[r] as Leaf).lastAccess < (a[l] as Leaf).lastAccess ? r : l;
      if ((a[c] as Leaf).lastAccess >= last.lastAccess) break;
      a[i] = a[c] as Leaf;
      i = c;
    }
    a[i] = last;
    return top;
  }
}
