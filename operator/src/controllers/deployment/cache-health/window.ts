// Two counters of one source over a sliding window: a total and the part of it
// that counts (prompt tokens and cached ones at a runtime; prompt tokens routed
// and predicted cached at a gateway replica). It keeps the readings of the last
// `windowMs` and gives the difference between the oldest and the newest. A
// counter that went down is a restarted source: the readings before it go.
export interface CounterPair {
  readonly total: number;
  readonly part: number;
}

export interface WindowDelta extends CounterPair {
  /** The span the difference covers. */
  readonly seconds: number;
}

interface Reading extends CounterPair {
  readonly atMs: number;
}

export class CounterWindow {
  readonly #windowMs: number;
  #readings: Reading[] = [];

  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  add(atMs: number, pair: CounterPair): void {
    const last = this.#readings.at(-1);
    if (last && (pair.total < last.total || pair.part < last.part)) this.#readings = [];
    this.#readings.push({ ...pair, atMs });
    // Keep one reading at or before the window's start, so the delta covers the whole window.
    while (this.#readings.length > 2 && (this.#readings[1]?.atMs ?? 0) <= atMs - this.#windowMs)
      this.#readings.shift();
  }

  /** A source that stopped answering: readings older than the window go, so stale figures do not last. */
  expire(nowMs: number): void {
    this.#readings = this.#readings.filter((r) => r.atMs > nowMs - this.#windowMs);
  }

  /** undefined until two readings exist. */
  delta(): WindowDelta | undefined {
    const first = this.#readings[0];
    const last = this.#readings.at(-1);
    if (!first || !last || first === last) return undefined;
    return {
      total: last.total - first.total,
      part: last.part - first.part,
      seconds: (last.atMs - first.atMs) / 1000,
    };
  }
}
