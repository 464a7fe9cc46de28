// How long a pick takes to reach the other replicas, from the exchange's own
// measure: a high quantile of the lags observed recently
// (cacheroute_gateway_peer_load_lag_seconds records the same samples), within
// bounds. A policy holds a miss made in a burst by rank x this
// (policies/cache-aware.ts holdMs): on an idle host the exchange takes a
// fraction of a millisecond and so does the hold; on a loaded one it grows
// with the lag it has to cover.

export interface LagWindowOptions {
  /** Samples kept (the most recent). */
  readonly size?: number;
  /** Samples older than this (ms, on the clock `add` is given) no longer count. */
  readonly maxAgeMs?: number;
  /** The quantile taken, 0..1. */
  readonly quantile?: number;
  /** Fewer samples than this: `fallbackMs`. */
  readonly minSamples?: number;
  /** The answer before enough samples: about the p99 bench-exchange-lag.ts measured on a loaded 2-core host. */
  readonly fallbackMs?: number;
  readonly floorMs?: number;
  /** A lag past this is a clock step or a stalled process, not what a hold should wait out. */
  readonly ceilingMs?: number;
}

export class LagWindow {
  readonly #size: number;
  readonly #maxAgeMs: number;
  readonly #q: number;
  readonly #minSamples: number;
  readonly #fallbackMs: number;
  readonly #floorMs: number;
  readonly #ceilingMs: number;
  readonly #lags: number[] = [];
  readonly #at: number[] = [];
  /** unheardMs's working copy of the recent lags, allocated once. */
  readonly #scratch: Float64Array;
  #next = 0;
  #cached: { readonly ms: number; readonly until: number } | undefined;

  constructor(o: LagWindowOptions = {}) {
    this.#size = o.size ?? 512;
    this.#maxAgeMs = o.maxAgeMs ?? 60_000;
    this.#q = o.quantile ?? 0.99;
    this.#minSamples = o.minSamples ?? 20;
    this.#fallbackMs = o.fallbackMs ?? 20;
    this.#floorMs = o.floorMs ?? 0.25;
    this.#ceilingMs = o.ceilingMs ?? 40;
    this.#scratch = new Float64Array(this.#size);
  }

  add(lagMs: number, now: number): void {
    if (!Number.isFinite(lagMs)) return;
    const lag = Math.max(0, lagMs);
    if (this.#lags.length < this.#size) {
      this.#lags.push(lag);
      this.#at.push(now);
    } else {
      this.#lags[this.#next] = lag;
      this.#at[this.#next] = now;
      this.#next = (this.#next + 1) % this.#size;
    }
    this.#cached = undefined;
  }

  /**
   * The mean of the recent lags (ms), each within the ceiling, or the fallback while there are too
   * few: how long a pick is on its way on average, for counting the picks in transit
   * (unheard-picks.ts), where the quantile above is what a hold must wait out.
   */
  meanMs(now: number): number {
    let sum = 0;
    let n = 0;
    for (let i = 0; i < this.#lags.length; i++) {
      if (now - (this.#at[i] as number) > this.#maxAgeMs) continue;
      sum += Math.min(this.#ceilingMs, this.#lags[i] as number);
      n++;
    }
    return n < this.#minSamples ? this.#fallbackMs : sum / n;
  }

  /** The bounded quantile of the recent lags (ms), or the fallback while there are too few. */
  unheardMs(now: number): number {
    const c = this.#cached;
    if (c && now <= c.until) return c.ms;
    let oldest = Infinity;
    let n = 0;
    for (let i = 0; i < this.#lags.length; i++) {
      const at = this.#at[i] as number;
      if (now - at > this.#maxAgeMs) continue;
      this.#scratch[n++] = this.#lags[i] as number;
      oldest = Math.min(oldest, at);
    }
    if (n < this.#minSamples) return this.#fallbackMs;
    // A typed array sorts numerically in native code: a sample arrives between most picks in a
    // tier, so this runs about once a pick, where Array.sort with a comparator cost ~30 us.
    const recent = this.#scratch.subarray(0, n).sort();
    const v = recent[Math.min(n - 1, Math.ceil(this.#q * n) - 1)] as number;
    const ms = Math.min(this.#ceilingMs, Math.max(this.#floorMs, v));
    // Valid until a sample comes or the oldest one counted ages out.
    this.#cached = { ms, until: oldest + this.#maxAgeMs };
    return ms;
  }
}
