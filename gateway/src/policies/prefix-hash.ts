// prefix-hash: consistent hashing of the prompt's leading blocks, with
// bounded load (Mirrokni, Thorup, Zadimoghaddam, "Consistent Hashing with
// Bounded Loads", 2018).
//
//   key       = hash(salt, first prefixBlocks × blockTokens tokens)
//   ring      = VNODES points per endpoint, hash(endpoint id, replica)
//   capacity  = ceil(loadFactor × (total load + 1) / endpoints)
//   choose    = the first endpoint clockwise from key whose load + 1 <= capacity
//
// Requests sharing a leading prefix land on one endpoint until it carries
// loadFactor × the mean; then they spill to the next endpoint on the ring, so
// a hot prefix spreads over a few endpoints rather than all of them. Adding or
// removing an endpoint moves only the keys next to its points. Stateless
// apart from a memoised ring.

import type { z } from 'zod';
import type { PrefixHashSettings } from '#api';
import { loadOf, type EndpointView, type Policy, type RouteInput } from './policy.ts';

export type PrefixHashConfig = z.output<typeof PrefixHashSettings>;

const VNODES = 64;

function hash32(seed: number, values: ArrayLike<number>, count: number): number {
  let h = seed >>> 0;
  for (let i = 0; i < count; i++) {
    h = Math.imul(h ^ ((values[i] ?? 0) >>> 0), 0x01000193);
    h ^= h >>> 15;
  }
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

function hashString(seed: number, s: string, suffix: readonly number[] = []): number {
  const codes = new Array<number>(s.length);
  for (let i = 0; i < s.length; i++) codes[i] = s.charCodeAt(i);
  codes.push(...suffix);
  return hash32(seed, codes, codes.length);
}

interface Ring {
  readonly ids: string;
  readonly points: Uint32Array;
  /** Owner (index into the endpoint list) of each point. */
  readonly owners: Uint32Array;
}

function buildRing(endpoints: readonly EndpointView[]): Ring {
  const pts: { p: number; o: number }[] = [];
  endpoints.forEach((e, o) => {
    for (let r = 0; r < VNODES; r++) pts.push({ p: hashString(0x9e3779b9, e.id, [0xffff_ffff, r]), o });
  });
  pts.sort((a, b) => a.p - b.p || a.o - b.o);
  return {
    ids: endpoints.map((e) => e.id).join('\n'),
    points: Uint32Array.from(pts, (x) => x.p),
    owners: Uint32Array.from(pts, (x) => x.o),
  };
}

export class PrefixHashPolicy implements Policy {
  readonly name = 'prefix-hash';
  readonly #cfg: PrefixHashConfig;
  #ring: Ring | undefined;

  constructor(cfg: PrefixHashConfig) {
    this.#cfg = cfg;
  }

  select(endpoints: readonly EndpointView[], req: RouteInput): number | undefined {
    if (endpoints.length === 0) return undefined;
    const ring = this.#ringFor(endpoints);
    const n = Math.min(req.tokens.length, this.#cfg.prefixBlocks * this.#cfg.blockTokens);
    const key = hash32(hashString(0x811c9dc5, req.salt), req.tokens, n);
    const loads = endpoints.map(loadOf);
    const total = loads.reduce((a, b) => a + b, 0);
    const capacity = Math.ceil((this.#cfg.loadFactor * (total + 1)) / endpoints.length);
    const start = lowerBound(ring.points, key);
    const size = ring.points.length;
    for (let k = 0; k < size; k++) {
      const owner = ring.owners[(start + k) % size] as number;
      if ((loads[owner] as number) + 1 <= capacity) return owner;
    }
    return undefined; // unreachable: some endpoint is at or below the mean
  }

  #ringFor(endpoints: readonly EndpointView[]): Ring {
    const ids = endpoints.map((e) => e.id).join('\n');
    if (this.#ring?.ids !== ids) this.#ring = buildRing(endpoints);
    return this.#ring;
  }
}

function lowerBound(a: Uint32Array, x: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((a[mid] as number) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo % Math.max(1, a.length);
}
