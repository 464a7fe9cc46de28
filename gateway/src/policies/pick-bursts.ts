// Whether a replica's picks come in bursts: requests arriving together, not
// merely often. A hold (cache-aware.ts holdMs) helps only when the tier's
// replicas decide at one instant on one view; on a steady stream each decision
// has about rate x lag unheard peer picks behind it whatever it waits, so a
// hold there costs latency and buys nothing.
//
// The test: over the last gaps between this replica's picks, the share within
// the window (the exchange's lag) against the share a Poisson stream of the
// same mean rate would put there, 1 - exp(-window / mean gap). Picks come in
// bursts when the excess, as a share of the gaps Poisson would leave long, is
// at least BURST_EXCESS; and never when a steady stream alone fills half the
// window's gaps (every pick then has unheard peers, held or not).

/** Gaps kept (the most recent). */
const GAPS = 64;
/** Fewer gaps than this: no verdict (not bursty); a few let the first bursts be seen, as a full window would. */
const MIN_GAPS = 3;
/** Share of the long gaps a steady stream would leave that came within the window instead. */
const BURST_EXCESS = 0.25;
/** A steady stream that puts this share of gaps within the window: too fast for a hold to help. */
const STEADY_CEILING = 0.5;
/** Longer gaps count as this (an idle hour is not a rate). */
const MAX_GAP_MS = 10_000;

export class PickBursts {
  readonly #gaps: number[] = [];
  #next = 0;
  #last: number | undefined;

  /** A pick at `now` (ms). */
  note(now: number): void {
    const last = this.#last;
    this.#last = now;
    if (last === undefined) return;
    const gap = Math.min(MAX_GAP_MS, Math.max(0, now - last));
    if (this.#gaps.length < GAPS) this.#gaps.push(gap);
    else {
      this.#gaps[this.#next] = gap;
      this.#next = (this.#next + 1) % GAPS;
    }
  }

  /** Whether recent picks came together within `windowMs` more than a steady stream explains. */
  bursty(windowMs: number): boolean {
    const n = this.#gaps.length;
    if (n < MIN_GAPS || !(windowMs > 0)) return false;
    let close = 0;
    let sum = 0;
    for (const g of this.#gaps) {
      sum += g;
      if (g < windowMs) close++;
    }
    // Every gap zero: all at one instant, the purest burst.
    if (sum === 0) return true;
    const steady = 1 - Math.exp(-windowMs / (sum / n));
    if (steady >= STEADY_CEILING) return false;
    return (close / n - steady) / (1 - steady) >= BURST_EXCESS;
  }
}
