// The fleet's pooled-cache bound (pure): the hit rate one LRU cache of the
// whole fleet's KV pool (the sum of the simulators' max_total_tokens) would
// reach on a trace slice. The infinite-cache bound (computeBound) counts every
// reuse; no placement of requests on N pools of size P can keep more than one
// pool of N x P keeps, so this is the ceiling a router can be held to.
//
// Model, as the simulators' radix tree caches:
// - a block is the trace's 512-token block behind its chain of earlier blocks
//   (replay-trace.ts); a request matches its blocks in order and stops at the
//   first block not held with at least as many tokens (prefix semantics);
// - matched tokens are capped at input - 1 (SGLang recomputes the last token)
//   and rounded down to whole pages; a block's tokens are held in whole pages;
// - after a request, all its blocks are in the pool, most recently used; a
//   request's deeper blocks count as older than its shallower ones, so
//   eviction takes leaves first, never a prefix from under a held suffix (the
//   radix tree evicts leaves by last access);
// - optimistic where it must be an upper bound: only prompt blocks occupy the
//   pool (no generated tokens, no running requests' reservations); of a
//   request larger than the pool, the prefix that fits stays.
// Not an optimum (Belady's would keep more), but the policy every engine in
// the fleet runs, applied to one pool.

import { BLOCK_TOKENS, type TraceRecord } from './replay-trace.ts';

export interface PooledBound {
  readonly cached: number;
  readonly prompt: number;
  readonly hitRate: number;
  /** Capacity in tokens the bound was computed for (the pool, rounded down to pages). */
  readonly capacityTokens: number;
}

export function computePooledBound(
  records: readonly TraceRecord[],
  capacityTokens: number,
  pageSize = 1,
): PooledBound {
  const perRequest = pooledCachedPerRequest(records, capacityTokens, pageSize);
  const cached = perRequest.reduce((sum, c) => sum + c, 0);
  const prompt = records.reduce((sum, r) => sum + r.input_length, 0);
  const capacity = floorToPage(Math.max(0, capacityTokens), pageSize);
  return { cached, prompt, hitRate: prompt > 0 ? cached / prompt : 0, capacityTokens: capacity };
}

/** Whole pages of `n` tokens; an unbounded pool stays unbounded. */
const floorToPage = (n: number, pageSize: number): number => (Number.isFinite(n) ? n - (n % pageSize) : n);

/** Each request's cached tokens under the one pool, in trace order (the model above). */
export function pooledCachedPerRequest(
  records: readonly TraceRecord[],
  capacityTokens: number,
  pageSize = 1,
): number[] {
  if (!Number.isInteger(pageSize) || pageSize < 1) throw new RangeError('pageSize must be >= 1');
  const floor = (n: number): number => floorToPage(n, pageSize);
  const capacity = floor(Math.max(0, capacityTokens));
  // Chain key → tokens held; Map order is LRU order (first = least recent).
  const held = new Map<string, number>();
  let used = 0;
  return records.map((rec) => {
    const chains: { key: string; len: number }[] = [];
    let chain = '';
    let remaining = rec.input_length;
    for (const h of rec.hash_ids) {
      if (remaining <= 0) break;
      chain = chain === '' ? String(h) : `${chain},${h}`;
      chains.push({ key: chain, len: floor(Math.min(BLOCK_TOKENS, remaining)) });
      remaining -= BLOCK_TOKENS;
    }
    let matched = 0;
    for (const c of chains) {
      if ((held.get(c.key) ?? -1) < c.len || c.len === 0) break;
      matched += c.len;
    }
    // Deepest first, so the request's first block ends up the most recent.
    for (let i = chains.length - 1; i >= 0; i--) {
      const c = chains[i] as { key: string; len: number };
      const before = held.get(c.key);
      const len = Math.max(before ?? 0, c.len);
      if (before !== undefined) held.delete(c.key);
      used += len - (before ?? 0);
      held.set(c.key, len);
    }
    for (const [key, len] of held) {
      if (used <= capacity) break;
      held.delete(key);
      used -= len;
    }
    return floor(Math.min(matched, Math.max(0, rec.input_length - 1)));
  });
}
