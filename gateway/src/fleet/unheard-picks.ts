// How many of the peers' picks are on their way to this replica right now: the
// peers' pick rate times the exchange's mean lag (Little's law: what is in
// transit is what arrives per unit time times how long it takes). A policy
// treats that many picks as made on the view it sees and not yet in it
// (policies/cache-aware.ts): on a steady stream and a slow exchange, replicas
// that see one view would otherwise all send their next request to the one
// runtime that looks least loaded (herding).
//
// The rate is the peers' picks only (this replica's own are in its view at
// once), counted over the recent ones by the times their senders stamped.

import { PickTimes } from './pick-times.ts';

/** Peer pick times kept (the most recent by time). */
const PICKS = 128;
/** Picks older than this (ms) no longer count toward the rate: an idle spell is not a rate. */
const WINDOW_MS = 10_000;

export class UnheardPicks {
  readonly #picks = new PickTimes(PICKS);

  /** A peer's pick at `at` (ms, the clock `expected` is given); late ones go in their place. */
  note(at: number): void {
    this.#picks.note(at);
  }

  /** The peers' picks per ms over the last WINDOW_MS before `now` (at most PICKS of them). */
  ratePerMs(now: number): number {
    this.#picks.dropBefore(now - WINDOW_MS);
    const t = this.#picks.times;
    const n = t.length;
    if (n === 0) return 0;
    // Full window unless the kept picks are fewer than it holds: then the span they cover.
    const span = n >= PICKS ? now - (t[0] as number) : WINDOW_MS;
    return span > 0 ? n / span : 0;
  }

  /** The peers' picks expected in transit to this replica at `now`, given the exchange's mean lag. */
  expected(now: number, meanLagMs: number): number {
    if (!(meanLagMs > 0)) return 0;
    return this.ratePerMs(now) * meanLagMs;
  }
}
