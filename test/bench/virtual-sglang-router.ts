// An emulation of SGLang's router (sglang-router 0.3.2, `--policy cache_aware`
// with its defaults) for the virtual-time evaluator (bench-virtual.ts
// `--policy sglang-router`). Test-side only: it is the yardstick, not a policy
// the gateway offers.
//
// What was verified, and where:
// - Defaults: cache_threshold 0.3, balance_abs_threshold 64,
//   balance_rel_threshold 1.5, eviction_interval_secs 60, max_tree_size 2^26
//   — sglang_router/router_args.py of the installed sglang-router 0.3.2 wheel
//   (the bench's virtualenv); its binary reports "sgl-model-gateway 0.3.2
//   2026-01-15" and was built from src/policies/{cache_aware,tree}.rs.
// - Algorithm: sgl-project/sglang sgl-model-gateway/src/policies/cache_aware.rs
//   (read via the code index; several revisions around that release agree):
//     load(w)    = the router's own in-flight requests to w (Worker::load)
//     imbalanced = max - min > abs && max > rel * min   (over all workers)
//     imbalanced → min-load worker; the text is still inserted for it
//     balanced   → (matched, tenant) = tree.prefix_match(text);
//                  rate = matched chars / text chars;
//                  rate > threshold → tenant, else the min-load worker;
//                  insert text for the chosen worker.
//   The file's header comment says the low-match case goes to "the worker
//   with the smallest tree"; the code uses the min-load worker. Checked
//   against the real 0.3.2 binary (two simulators, 2026-11-30): with both
//   workers idle, one holding a 6,000-char tree and one empty, a no-match
//   request went to the first (big-tree) worker, and 20 unrelated requests
//   in a row all went to the first worker: min load, ties to the lowest
//   index (Rust `min_by_key`), not the smallest tree and not random.
// - Routing text for /v1/chat/completions: ChatCompletionRequest::
//   extract_text_for_routing joins the message contents (system, user,
//   assistant text parts) with " ", no role names or template. The bench
//   sends one user message, so the text is its content (buildPromptText).
// - Tree (tree.rs): one character radix tree for all workers (tenants); each
//   node has a tenant → last-access map; insert marks every node on the path
//   for the tenant; prefix_match walks full edges, a partial edge match still
//   counts its matched chars and selects that node; the tenant returned is
//   the node's cached `last_tenant` (the tenant that created the node; split
//   nodes inherit it) while it still owns the node, else the first tenant the
//   map yields. It is not load-aware. Eviction every interval: per tenant,
//   LRU leaves first, until the tenant's char count <= max_tree_size.
//   Timestamps: the leaf of an insert is stamped; intermediate nodes newly
//   owned get 0 (older revisions stamped the whole path; either way eviction
//   takes leaves only, and at 2^26 chars per tenant it rarely runs here).
// - Time: the wall-clock bench compresses model time 8x, so the router's 60 s
//   eviction interval is 480 s of the model time this evaluator runs in
//   (`evictionIntervalMs`).

import type { EndpointView, Policy, RouteInput, RouteOutcome } from '../../gateway/src/policies/index.ts';

export interface SglangRouterConfig {
  readonly cacheThreshold: number;
  readonly balanceAbsThreshold: number;
  readonly balanceRelThreshold: number;
  /** Chars per tenant kept at each eviction. */
  readonly maxTreeSize: number;
  /** Eviction period in the caller's time unit (model ms here). */
  readonly evictionIntervalMs: number;
}

export const SGLANG_ROUTER_0_3_2: SglangRouterConfig = {
  cacheThreshold: 0.3,
  balanceAbsThreshold: 64,
  balanceRelThreshold: 1.5,
  maxTreeSize: 2 ** 26,
  evictionIntervalMs: 60_000 * 8,
};

interface CharNode {
  text: string;
  readonly children: Map<string, CharNode>;
  parent: CharNode | undefined;
  /** tenant → last access; insertion order stands in for DashMap iteration order. */
  readonly owners: Map<string, number>;
  lastTenant: string | undefined;
}

function newNode(text: string, parent: CharNode | undefined, owners?: Map<string, number>): CharNode {
  return { text, children: new Map(), parent, owners: new Map(owners), lastTenant: undefined };
}

function sharedPrefix(a: string, aFrom: number, b: string): number {
  const n = Math.min(a.length - aFrom, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(aFrom + i) === b.charCodeAt(i)) i++;
  return i;
}

/** Inserts into a queue sorted by descending last access (popped from the end). */
function enqueue(
  entries: { t: number; tenant: string; node: CharNode }[],
  tenant: string,
  node: CharNode,
): void {
  const t = node.owners.get(tenant) ?? 0;
  let i = entries.length;
  while (i > 0 && (entries[i - 1]?.t ?? 0) < t) i--;
  entries.splice(i, 0, { t, tenant, node });
}

function isLeafOf(node: CharNode, tenant: string): boolean {
  if (!node.owners.has(tenant)) return false;
  for (const c of node.children.values()) if (c.owners.has(tenant)) return false;
  return true;
}

/** The approximate character tree of tree.rs (one per model; the bench has one model). */
export class CharTree {
  readonly root = newNode('', undefined);
  readonly #chars = new Map<string, number>();
  #epoch = 1;

  sizeOf(tenant: string): number {
    return this.#chars.get(tenant) ?? 0;
  }

  insert(text: string, tenant: string): void {
    if (!this.root.owners.has(tenant)) this.root.owners.set(tenant, 0);
    if (!this.#chars.has(tenant)) this.#chars.set(tenant, 0);
    let prev = this.root;
    let pos = 0;
    while (pos < text.length) {
      const first = text[pos] as string;
      const child = prev.children.get(first);
      if (!child) {
        const leaf = newNode(text.slice(pos), prev);
        leaf.lastTenant = tenant;
        leaf.owners.set(tenant, this.#epoch++);
        this.#chars.set(tenant, this.sizeOf(tenant) + leaf.text.length);
        prev.children.set(first, leaf);
        return;
      }
      const shared = sharedPrefix(text, pos, child.text);
      let next = child;
      if (shared < child.text.length) {
        // Split: the upper part inherits the owners and the cached tenant.
        const upper = newNode(child.text.slice(0, shared), prev, child.owners);
        upper.lastTenant = child.lastTenant;
        child.text = child.text.slice(shared);
        child.parent = upper;
        upper.children.set(child.text[0] as string, child);
        prev.children.set(first, upper);
        next = upper;
      }
      if (!next.owners.has(tenant)) {
        next.owners.set(tenant, 0);
        this.#chars.set(tenant, this.sizeOf(tenant) + next.text.length);
      }
      pos += shared;
      prev = next;
    }
    prev.owners.set(tenant, this.#epoch++); // the path's end is stamped
  }

  /** Matched chars and the tenant the router would pick. */
  prefixMatch(text: string): { matched: number; tenant: string | undefined } {
    let prev = this.root;
    let pos = 0;
    while (pos < text.length) {
      const child = prev.children.get(text[pos] as string);
      if (!child) break;
      const shared = sharedPrefix(text, pos, child.text);
      pos += shared;
      prev = child;
      if (shared < child.text.length) break;
    }
    let tenant = prev.lastTenant;
    if (tenant === undefined || !prev.owners.has(tenant)) {
      tenant = prev.owners.keys().next().value;
      prev.lastTenant = tenant;
    }
    return { matched: pos, tenant };
  }

  /** evict_tenant_by_size: LRU leaves first until each tenant holds <= maxSize chars. */
  evict(maxSize: number): void {
    const entries: { t: number; tenant: string; node: CharNode }[] = [];
    const stack: CharNode[] = [this.root];
    while (stack.length > 0) {
      const node = stack.pop() as CharNode;
      for (const c of node.children.values()) stack.push(c);
      if (node === this.root) continue;
      for (const [tenant, t] of node.owners)
        if (this.sizeOf(tenant) > maxSize && isLeafOf(node, tenant)) entries.push({ t, tenant, node });
    }
    // A sorted queue is enough here: eviction runs every few hundred seconds.
    entries.sort((a, b) => b.t - a.t);
    while (entries.length > 0) {
      const { tenant, node } = entries.pop() as { t: number; tenant: string; node: CharNode };
      if (this.sizeOf(tenant) <= maxSize || !isLeafOf(node, tenant)) continue;
      this.#chars.set(tenant, this.sizeOf(tenant) - node.text.length);
      node.owners.delete(tenant);
      const parent = node.parent;
      if (node.children.size === 0 && node.owners.size === 0 && parent)
        parent.children.delete(node.text[0] as string);
      if (parent && parent !== this.root && isLeafOf(parent, tenant)) enqueue(entries, tenant, parent);
    }
  }
}

/**
 * sglang-router's cache_aware as a Policy over the bench's views. `textOf`
 * gives the routing text of a request (what extract_text_for_routing would
 * return); `inFlight` of each view is the router's own load.
 */
export class SglangRouterEmulation implements Policy {
  readonly name = 'sglang-router';
  readonly tree = new CharTree();
  readonly #cfg: SglangRouterConfig;
  readonly #textOf: (req: RouteInput) => string;
  #lastEviction: number | undefined;

  constructor(textOf: (req: RouteInput) => string, cfg: SglangRouterConfig = SGLANG_ROUTER_0_3_2) {
    this.#cfg = cfg;
    this.#textOf = textOf;
  }

  select(endpoints: readonly EndpointView[], req: RouteInput): number | undefined {
    if (endpoints.length === 0) return undefined;
    const loads = endpoints.map((e) => e.inFlight);
    const max = Math.max(...loads);
    const min = Math.min(...loads);
    const minIdx = loads.indexOf(min); // min_by_key: the first minimum
    if (max - min > this.#cfg.balanceAbsThreshold && max > min * this.#cfg.balanceRelThreshold) return minIdx;
    const text = this.#textOf(req);
    const { matched, tenant } = this.tree.prefixMatch(text);
    const rate = text.length === 0 ? 0 : matched / text.length;
    if (rate > this.#cfg.cacheThreshold) {
      const i = endpoints.findIndex((e) => e.id === tenant);
      if (i >= 0) return i;
      return 0; // the real router drops the stale tenant and falls back to the first healthy worker
    }
    return minIdx;
  }

  observe(outcome: RouteOutcome): void {
    // The router inserts at selection time, on both paths.
    if (outcome.kind === 'routed') this.tree.insert(this.#textOf(outcome.input), outcome.endpoint);
  }

  /** Called by the evaluator's timer; evicts on the router's own period. */
  maintain(now: number): void {
    if (this.#lastEviction === undefined) this.#lastEviction = 0;
    while (now - this.#lastEviction >= this.#cfg.evictionIntervalMs) {
      this.#lastEviction += this.#cfg.evictionIntervalMs;
      this.tree.evict(this.#cfg.maxTreeSize);
    }
  }
}
