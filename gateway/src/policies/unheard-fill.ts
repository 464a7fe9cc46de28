// Choosing among runtimes when the peers' latest picks are not yet in view
// (cache-aware.ts, ADR 0046). Every replica of a tier sees the same shared
// load; on a steady stream, picks the peers made within the exchange's lag are
// missing from it, and each of them went where this replica would now go. If
// every replica takes the cheapest runtime, they all take the same one.
//
// The picks in transit add, together, `volume` to the costs (their number x
// what one pick adds). Poured over the costs like water, they raise the
// cheapest runtimes to one level: fill(e) = max(0, level - cost(e)), summing
// to volume. Picking e with probability fill(e) / volume, every replica doing
// the same, each runtime expects the unheard picks its fill stands for, and
// every candidate's expected cost is the level: none is a better bet. A
// runtime further than `volume` above the cheapest gets nothing, so a cache
// hit worth more than the picks in transit keeps its affinity; with nothing in
// transit the cheapest is taken, as before. Pure.

/** Each cost's fill when `volume` is poured over `costs` (same order); all 0 when volume <= 0. */
export function pourOver(costs: readonly number[], volume: number): number[] {
  if (!(volume > 0) || costs.length === 0) return costs.map(() => 0);
  const sorted = [...costs].sort((a, b) => a - b);
  let sum = 0;
  let level = Infinity;
  for (let k = 0; k < sorted.length; k++) {
    sum += sorted[k] as number;
    const candidate = (volume + sum) / (k + 1);
    const next = sorted[k + 1];
    if (next === undefined || candidate <= next) {
      level = candidate;
      break;
    }
  }
  return costs.map((c) => Math.max(0, level - c));
}

/** The index whose share of `fills` covers `u` (0..1); undefined when nothing was filled. */
export function pickByFill(fills: readonly number[], u: number): number | undefined {
  const total = fills.reduce((a, b) => a + b, 0);
  if (!(total > 0)) return undefined;
  let acc = 0;
  let last: number | undefined;
  for (let i = 0; i < fills.length; i++) {
    const f = fills[i] as number;
    if (!(f > 0)) continue;
    last = i;
    acc += f / total;
    if (u < acc) return i;
  }
  return last;
}

/**
 * The draw's point in [0, 1) for replica `rank` choosing among `k` filled runtimes, when the
 * peers deciding at the same instant share `sharedU` (a hash of that instant; ADR 0058). Each
 * shifts it by rank / k: among k equally filled runtimes (a tie) replica r takes index
 * (r + floor(k x sharedU)) mod k, so k peers of consecutive ranks deciding together on one view
 * take k different runtimes, where independent draws land several on one. Over instants each
 * replica's point is uniform: alone, as random as an independent draw.
 */
export function rankedDrawPoint(rank: number, k: number, sharedU: number): number {
  return (sharedU + rank / k) % 1;
}
