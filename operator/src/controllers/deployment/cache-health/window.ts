// An endpoint's cache counters over a sliding window: the readings of the last
// `windowMs`, and the difference between the oldest and the newest. A counter
// that went down is a restarted process: the readings before it are dropped.
import type { RuntimeCacheSample } from './runtime-sample.ts';

interface Reading extends RuntimeCacheSample {
  readonly atMs: number;
}

export interface WindowDelta {
  readonly promptTokens: number;
  readonly cachedTokens: number;
  /** The span the difference covers (0 with one reading). */
  readonly seconds: number;
}

export class CounterWindow {
  readonly #windowMs: number;
  #readings: Reading[] = [];

  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  add(atMs: number, sample: RuntimeCacheSample): void {
    const last = this.#readings.at(-1);
    if (last && (sample.promptTokens < last.promptTokens || sample.cachedTokens < last.cachedTokens))
      this.#readings = [];
    this.#readings.push({ ...sample, atMs });
    // Keep one reading at or before the window's start, so the delta covers the whole window.
    while (this.#readings.length > 2 && (this.#readings[1]?.atMs ?? 0) <= atMs - this.#windowMs)
      this.#readings.shift();
  }

  /** undefined until two readings exist. */
  delta(): WindowDelta | undefined {
    const first = this.#readings[0];
    const last = this.#readings.at(-1);
    if (!first || !last || first === last) return undefined;
    return {
      promptTokens: last.promptTokens - first.promptTokens,
      cachedTokens: last.cachedTokens - first.cachedTokens,
      seconds: (last.atMs - first.atMs) / 1000,
    };
  }

  latest(): RuntimeCacheSample | undefined {
    return this.#readings.at(-1);
  }
}
