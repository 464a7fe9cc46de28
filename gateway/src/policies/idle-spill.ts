// Spilling a request onto an idle runtime, once per tier (cache-aware.ts, ADRs 0052, 0053).
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
// In a tier every replica sees the same idle runtime on the same shared view.
// A replica's spill reaches its peers within the exchange's lag (sub-millisecond
// measured, 20 ms loaded), after which they see the runtime busy: so only picks
// made within that lag of each other can herd onto it (measured: the
// conversation slice's hit fell to 0.95x at eight replicas over a 20 ms
// exchange, where its requests arrive together). While the tier's picks come together (tier.bursty,
// fleet/tier-bursts.ts) or a peer's pick is likely in transit (tier.unheardPicks
// of a half or more), one replica owns each idle runtime's spill: the rank its
// id hashes to among the tier's replicas (their ranks, by name, are the same at
// every replica), so the tier spills once per idle spell. Otherwise any replica
// spills, on the first request that qualifies, as one replica alone does: an
// owner sees 1/R of the requests, so at eight replicas its spill came about
// eight requests late while the usual pick's queue grew (ADR 0053).
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

/** Where the deciding replica stands in its tier (RouteInput.tier); absent alone. */
export interface SpillTier {
  readonly rank: number;
  readonly size: number;
  /** The tier's picks come together (fleet/tier-bursts.ts): peers may be deciding on this view now. */
  readonly bursty?: boolean;
  /** The peers' picks expected in transit to this replica now (fleet/unheard-picks.ts). */
  readonly unheardPicks?: number;
}

/** Peer picks expected in transit from which a spill is contested: one is then in transit 2 times in 5. */
const CONTESTED_PICKS = 0.5;

/** Whether the replica at `tier.rank` of `tier.size` owns the idle runtime `id`'s spill; alone, always. */
export function ownsSpill(id: string, tier: SpillTier | undefined): boolean {
  if (!tier || tier.size <= 1) return true;
  return Math.min(tier.size - 1, Math.floor(hashToUnit(`idle-spill:${id}`) * tier.size)) === tier.rank;
}

/**
 * Whether this replica may spill onto the idle runtime `id`: any replica while no peer is likely
 * deciding on the same view (outside bursts, fewer than CONTESTED_PICKS peer picks in transit),
 * else only its owner (ownsSpill).
 */
export function maySpill(id: string, tier: SpillTier | undefined): boolean {
  const contested =
    tier !== undefined && (tier.bursty === true || (tier.unheardPicks ?? 0) >= CONTESTED_PICKS);
  return !contested || ownsSpill(id, tier);
}

/**
 * The idle runtime this replica may spill onto (maySpill) that would prefill the whole request
 * before `chosen` (the usual pick) is through its backlog, discarding at most `maxLoss` of the
 * cache the request has there, the one with least to prefill (first among equals); undefined when
 * the usual pick is idle itself or none qualifies.
 */
export function chooseSpill(
  candidates: readonly SpillCandidate[],
  chosen: number,
  tier: SpillTier | undefined,
  maxLoss = Infinity,
): number | undefined {
  const usual = candidates[chosen];
  if (!usual || usual.idle) return undefined;
  let best: number | undefined;
  candidates.forEach((c, i) => {
    if (!c.idle || !(c.uncached < usual.backlog) || !maySpill(c.id, tier)) return;
    if (usual.cached - c.cached > maxLoss) return;
    if (best === undefined || c.uncached < (candidates[best] as SpillCandidate).uncached) best = i;
  });
  return best;
}
