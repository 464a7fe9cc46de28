// Endpoints still standing, as this replica last saw them. The routing table
// learns that a runtime is gone only when the operator's status says so (a
// watch event after a reconcile); a refused or reset connection says it now.
// Such an endpoint leaves every pick at once, for a hold time or until the
// table shows it as a new process (another generation), and is tried again
// after the hold: a blip costs one failed attempt, a dead pod costs none more.

import type { Clock } from '../clock.ts';
import type { RouteEndpoint } from '../routing/table.ts';
import { generationOf } from './generation.ts';

export interface DownMark {
  readonly id: string;
  readonly reason: string;
  /** Clock time the mark lapses. */
  readonly until: number;
}

interface Mark extends DownMark {
  readonly generation: string;
}

export class StandingEndpoints {
  readonly #clock: Clock;
  readonly #holdMs: number;
  readonly #down = new Map<string, Mark>();

  constructor(clock: Clock, holdMs = 10_000) {
    this.#clock = clock;
    this.#holdMs = holdMs;
  }

  /** Take `e` out of every pick (its connection was refused or reset before an answer). */
  markDown(e: RouteEndpoint, reason: string): void {
    this.#down.set(e.id, {
      id: e.id,
      reason,
      generation: generationOf(e),
      until: this.#clock.now() + this.#holdMs,
    });
  }

  isStanding(e: RouteEndpoint): boolean {
    const mark = this.#down.get(e.id);
    if (!mark) return true;
    if (mark.generation === generationOf(e) && this.#clock.now() < mark.until) return false;
    this.#down.delete(e.id);
    return true;
  }

  /** The standing ones; when none stands, all of them (the table's word is all that is left). */
  filter(endpoints: readonly RouteEndpoint[]): readonly RouteEndpoint[] {
    if (this.#down.size === 0) return endpoints;
    const standing = endpoints.filter((e) => this.isStanding(e));
    return standing.length > 0 ? standing : [...endpoints];
  }

  /** Marks in force now, for the status page. */
  list(): DownMark[] {
    const now = this.#clock.now();
    return [...this.#down.values()]
      .filter((m) => now < m.until)
      .map(({ id, reason, until }) => ({ id, reason, until }));
  }
}
