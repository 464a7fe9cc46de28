// Spilling a request onto an idle runtime, once per tier (cache-aware.ts, ADR 0052).
//
// Cost routing values a cached prefix at costWeight x the tokens it saves, so
// the first runtime to hold a hot shared prefix leads every other one by
// costWeight x its length (64 x 4,096 tokens: about 33 s of prefill backlog),
// and the prefix spreads only when the imbalance guard fires. Meanwhile a
// runtime with nothing to do may sit idle for the whole run
// (docs/benchmarks.md, mixed-sessions seed 3). An idle runtime that would
// prefill the request's whole uncached part before the cheapest runtime's
// backlog is even through gives it its first token sooner, and then holds the
// prefix too: it takes the request.
//
// In a tier every replica sees the same idle runtime on the same shared view,
// and until the peers' picks arrive each would spill its next request onto it
// at once (measured: the conversation slice's hit fell to 0.95x at eight
// replicas). So one replica owns each idle runtime's spill: the rank its id
// hashes to among the tier's replicas (their ranks, by name, are the same at
// every replica). Its own pick ends the runtime's idleness in its own view at
// once, so the tier spills once per idle spell; the other replicas route as
// usual. Alone in the tier the replica owns every runtime.
//
// A spill discards the cache the request has on the usual pick. Copying a
// shared prefix costs a prompt's worth; discarding more moves a long
// conversation's whole history, which the cost already weighs right: so a
// spill discards at most `maxLoss` tokens, a usual prompt's length (measured:
// without it a tier's few spills of 26-36k-token conversations cost the
// conversation slice 3% of its hit ratio at three replicas). Pure.

import { hashToUnit } from '#kube/seeded-random.ts';

export interface SpillCandidate {
  /** Nothing in flight, waiting, prefilling or decoding on it, by the tier's and the runtime's counts. */
  readonly idle: boolean;
  /** The runtime's id, which decides the replica that owns its spill. */
  readonly id: string;
  /** Tokens of this request the runtime would have to prefill (the part it does not hold). */
  readonly uncached: number;
  /** Tokens of this request the runtime holds (tier-weighted): what a spill away from it discards. */
  readonly cached: number;
  /** The tier's predicted prefill backlog on the runtime, in tokens. */
  readonly backlog: number;
}

/** Whether the replica at `tier.rank` of `tier.size` spills onto the idle runtime `id`; alone, always. */
export function ownsSpill(
  id: string,
  tier: { readonly rank: number; readonly size: number } | undefined,
): boolean {
  if (!tier || tier.size <= 1) return true;
  return Math.min(tier.size - 1, Math.floor(hashToUnit(`idle-spill:${id}`) * tier.size)) === tier.rank;
}

/**
 * The idle runtime this replica owns that would prefill the whole request before `chosen` (the
 * usual pick) is through its backlog, discarding at most `maxLoss` of the cache the request has
 * there, the one with least to prefill (first among equals); undefined when the usual pick is
 * idle itself or none qualifies.
 */
export function chooseSpill(
  candidates: readonly SpillCandidate[],
  chosen: number,
  tier: { readonly rank: number; readonly size: number } | undefined,
  maxLoss = Infinity,
): number | undefined {
  const usual = candidates[chosen];
  if (!usual || usual.idle) return undefined;
  let best: number | undefined;
  candidates.forEach((c, i) => {
    if (!c.idle || !(c.uncached < usual.backlog) || !ownsSpill(c.id, tier)) return;
    if (usual.cached - c.cached > maxLoss) return;
    if (best === undefined || c.uncached < (candidates[best] as SpillCandidate).uncached) best = i;
  });
  return best;
}
