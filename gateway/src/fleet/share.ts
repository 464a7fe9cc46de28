// A CachePolicy's admission bounds hold for the whole gateway tier, not for
// each replica: every replica takes a share of each bound, and the shares of
// the live replicas add up to the bound.
//
//   share(total) = floor(total / n) + (rank < total mod n ? 1 : 0), at least min(1, total)
//
// where n counts the replicas that receive traffic (self counted even before
// it is ready: a direct request may reach it) and `rank` is self's place among
// them sorted by name, so replicas agree on who takes the remainder without
// talking to each other. A bound of 0 (no queue) is 0 everywhere; any other
// gives every replica at least 1, so each can serve: with fewer permits than
// replicas the tier admits up to n, not total.
// Pure.

/** Where a replica stands in the tier: its rank among `size` replicas. */
export interface FleetPosition {
  readonly rank: number;
  readonly size: number;
}

export function computeFleetPosition(members: readonly string[], self: string): FleetPosition {
  const everyone = [...new Set([...members, self])].sort();
  return { rank: everyone.indexOf(self), size: everyone.length };
}

export function computeShareOf(total: number, { rank, size }: FleetPosition): number {
  return Math.max(Math.min(1, total), Math.floor(total / size) + (rank < total % size ? 1 : 0));
}

export function computeFleetShare(total: number, members: readonly string[], self: string): number {
  return computeShareOf(total, computeFleetPosition(members, self));
}
