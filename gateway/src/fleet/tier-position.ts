// Where this replica stands in the gateway tier now, recomputed only when the
// members change: every admission bound and in-memory rate limit takes its
// share from it (share.ts).

import type { TierStanding } from '../policies/index.ts';
import type { PeerSet } from './peers.ts';
import { computeFleetPosition, computeShareOf, type FleetPosition } from './share.ts';

export class TierPosition {
  readonly #peers: PeerSet;
  #seen: { members: readonly string[]; position: FleetPosition } | undefined;

  constructor(peers: PeerSet) {
    this.#peers = peers;
  }

  get(): FleetPosition {
    const members = this.#peers.members();
    if (this.#seen?.members !== members)
      this.#seen = { members, position: computeFleetPosition(members, this.#peers.self) };
    return this.#seen.position;
  }

  /**
   * Where a routing policy sees this replica, when it shares load with peers: its rank (by name,
   * so every replica derives the same order), how long a pick takes to reach the peers, how
   * many of theirs are on the way, and the wall-clock millisecond of the decision (`wallMs`,
   * floored: what peers deciding at that instant read too; ADR 0058). Undefined alone in the tier.
   */
  standing(
    unheardMs: number,
    bursty: boolean,
    unheardPicks: number,
    wallMs: number,
  ): TierStanding | undefined {
    const { rank, size } = this.get();
    return size > 1
      ? { rank, size, unheardMs, bursty, unheardPicks, instant: Math.floor(wallMs) }
      : undefined;
  }

  /** This replica's part of a tier-wide bound. */
  shareOf(total: number): number {
    return computeShareOf(total, this.get());
  }
}
