// The most recent pick times a replica has heard, kept in time order: peers' picks arrive
// late over the exchange, so each goes in its place rather than at the end. Bounded, the
// oldest going first (tier-bursts.ts reads the gaps, unheard-picks.ts the rate).

export class PickTimes {
  /** Pick times, ascending. */
  readonly #times: number[] = [];

  readonly capacity: number;

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  /** The kept times, ascending. */
  get times(): readonly number[] {
    return this.#times;
  }

  /** A pick at `at` (ms); a late one goes in its place, one older than every kept time of a full buffer is dropped. */
  note(at: number): void {
    if (!Number.isFinite(at)) return;
    const t = this.#times;
    if (t.length >= this.capacity && at <= (t[0] as number)) return;
    let i = t.length;
    while (i > 0 && (t[i - 1] as number) > at) i--;
    t.splice(i, 0, at);
    if (t.length > this.capacity) t.shift();
  }

  /** Forgets the times before `cutoff`. */
  dropBefore(cutoff: number): void {
    const t = this.#times;
    let i = 0;
    while (i < t.length && (t[i] as number) < cutoff) i++;
    if (i > 0) t.splice(0, i);
  }
}
