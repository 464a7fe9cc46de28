// Endpoints still standing, as this replica last saw them. The routing table
// learns that a runtime is gone only when the operator's status says so (a
// watch event after a reconcile); the runtime itself says it sooner, two ways:
// - a refused or reset connection: the endpoint leaves every pick at once, for
//   a hold time or until the table shows it as a new process (another
//   generation), and is tried again after the hold: a blip costs one failed
//   attempt, a dead pod costs none more;
// - its /ready answering 503 (runtime-ready.ts): SGLang after SIGTERM (or
//   paused, or unhealthy) still serves what it is sent, but exits only once
//   nothing is left in flight, so whatever keeps sending keeps it alive until
//   its kill cuts what it holds. Such an endpoint is `draining`: out of every
//   pick until /ready answers 200 again or the table shows a new process.
// When nothing stands, a draining runtime is the next best (it still serves),
// then any (the table's word is all that is left), rather than no answer.

import type { Clock } from '#kube/clock.ts';
import type { RouteEndpoint } from '../routing/table.ts';
import { generationOf } from './generation.ts';

export const DRAINING = 'draining';

export interface DownMark {
  readonly id: string;
  /** The connection failure (ECONNREFUSED, ...), or `draining`. */
  readonly reason: string;
  /** Clock time a connection failure's mark lapses; absent for `draining` alone. */
  readonly until?: number;
}

/** One entry per endpoint, so a pick reads one map entry per endpoint whatever it is marked for. */
interface Mark {
  readonly generation: string;
  /** A connection failed: out of picks until then. */
  readonly down?: { readonly reason: string; readonly until: number };
  readonly draining: boolean;
}

export class StandingEndpoints {
  readonly #clock: Clock;
  readonly #holdMs: number;
  readonly #marks = new Map<string, Mark>();

  constructor(clock: Clock, holdMs = 10_000) {
    this.#clock = clock;
    this.#holdMs = holdMs;
  }

  /** Take `e` out of every pick (its connection was refused or reset before an answer). */
  markDown(e: RouteEndpoint, reason: string): void {
    const down = { reason, until: this.#clock.now() + this.#holdMs };
    this.#marks.set(e.id, { ...this.#current(e), down });
  }

  /** Take `e` out of every pick until it is ready again (its /ready answered 503). */
  markDraining(e: RouteEndpoint): void {
    this.#marks.set(e.id, { ...this.#current(e), draining: true });
  }

  /** `e`'s /ready answered 200: no longer draining (a connection failure's hold still runs). */
  markReady(e: RouteEndpoint): void {
    const mark = this.#current(e);
    if (!mark.draining) return;
    if (this.#isDown(mark)) this.#marks.set(e.id, { ...mark, draining: false });
    else this.#marks.delete(e.id);
  }

  /** Forgets the endpoints no route lists any more (their marks would never lapse). */
  keepOnly(ids: ReadonlySet<string>): void {
    for (const id of this.#marks.keys()) if (!ids.has(id)) this.#marks.delete(id);
  }

  isStanding(e: RouteEndpoint): boolean {
    const mark = this.#marks.get(e.id);
    if (!mark) return true;
    if (mark.generation !== generationOf(e)) {
      this.#marks.delete(e.id);
      return true;
    }
    if (mark.draining || this.#isDown(mark)) return false;
    this.#marks.delete(e.id);
    return true;
  }

  /**
   * The standing ones; when none stands, the draining ones whose connection has not failed
   * (a draining runtime still serves); when none of those either, all of them.
   */
  filter(endpoints: readonly RouteEndpoint[]): readonly RouteEndpoint[] {
    if (this.#marks.size === 0) return endpoints;
    const standing = endpoints.filter((e) => this.isStanding(e));
    if (standing.length > 0) return standing;
    const draining = endpoints.filter((e) => {
      const mark = this.#marks.get(e.id);
      return mark !== undefined && mark.draining && !this.#isDown(mark);
    });
    return draining.length > 0 ? draining : [...endpoints];
  }

  /** Marks in force now, one per endpoint (a connection failure's before `draining`), for the status page. */
  list(): DownMark[] {
    const out: DownMark[] = [];
    for (const [id, mark] of this.#marks) {
      if (mark.down && this.#isDown(mark)) out.push({ id, ...mark.down });
      else if (mark.draining) out.push({ id, reason: DRAINING });
    }
    return out;
  }

  /** `e`'s mark if it is of `e`'s process, else a clean one. */
  #current(e: RouteEndpoint): Mark {
    const generation = generationOf(e);
    const mark = this.#marks.get(e.id);
    return mark?.generation === generation ? mark : { generation, draining: false };
  }

  #isDown(mark: Mark): boolean {
    return mark.down !== undefined && this.#clock.now() < mark.down.until;
  }
}
