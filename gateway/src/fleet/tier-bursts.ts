// Whether the tier's picks come in bursts: requests arriving together, not
// merely often. A hold (policies/cache-aware.ts holdMs) helps only when the
// replicas decide at one instant on one view; on a steady stream each decision
// has about rate x lag unheard peer picks behind it whatever it waits, so a
// hold there costs latency and buys nothing.
//
// The tier's picks, not one replica's: a burst spread one request a replica
// (nine requests over eight replicas) shows in no replica's own picks. Each
// replica notes its own picks and its peers' (their times come with their load
// shares, fleet/load-exchange.ts), late ones in their place by time.
//
// The test: over the gaps between the last picks, the share within the window
// (the exchange's lag) against the share a Poisson stream of the same mean
// rate would put there, 1 - exp(-window / mean gap). Picks come in bursts when
// the excess, as a share of the gaps Poisson would leave long, is at least
// BURST_EXCESS; never when a steady stream alone fills half the window's gaps
// (every pick then has unheard peers, held or not).

import { PickTimes } from './pick-times.ts';

/** Pick times kept (the most recent by time). */
const PICKS = 129;
/** Fewer gaps than this: no verdict (not bursty); a few let the first bursts be seen. */
const MIN_GAPS = 3;
/** Share of the long gaps a steady stream would leave that came within the window instead. */
const BURST_EXCESS = 0.5;
/** A steady stream that puts this share of gaps within the window: too fast for a hold to help. */
const STEADY_CEILING = 0.5;
/** Longer gaps count as this (an idle hour is not a rate). */
const MAX_GAP_MS = 10_000;

export class TierBursts {
  readonly #picks = new PickTimes(PICKS);

  /** A pick at `at` (ms; a peer's may come late and is placed by time). */
  note(at: number): void {
    this.#picks.note(at);
  }

  /** Whether recent picks came together within `windowMs` more than a steady stream explains. */
  bursty(windowMs: number): boolean {
    const t = this.#picks.times;
    const n = t.length - 1;
    if (n < MIN_GAPS || !(windowMs > 0)) return false;
    let close = 0;
    let sum = 0;
    for (let i = 1; i < t.length; i++) {
      const gap = Math.min(MAX_GAP_MS, (t[i] as number) - (t[i - 1] as number));
      sum += gap;
      if (gap < windowMs) close++;
    }
    // Every gap zero: all at one instant, the purest burst.
    if (sum === 0) return true;
    const steady = 1 - Math.exp(-windowMs / (sum / n));
    if (steady >= STEADY_CEILING) return false;
    return (close / n - steady) / (1 - steady) >= BURST_EXCESS;
  }
}
