// Time for the gateway's cores: injected, so tests move it by hand.

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Monotonic milliseconds. */
  now(): number;
  setTimer(delayMs: number, fn: () => void): Timer;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  setTimer(delayMs, fn) {
    const t = setTimeout(fn, delayMs);
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
};

/** A clock tests advance by hand; due timers fire in order during `advance`. */
export class ManualClock implements Clock {
  #now = 0;
  #seq = 0;
  #timers = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.#now;
  }

  setTimer(delayMs: number, fn: () => void): Timer {
    const id = this.#seq++;
    this.#timers.set(id, { at: this.#now + Math.max(0, delayMs), fn });
    return { cancel: () => this.#timers.delete(id) };
  }

  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.#timers)
        if (entry[1].at <= end && (!next || entry[1].at < next[1].at)) next = entry;
      if (!next) break;
      this.#timers.delete(next[0]);
      this.#now = next[1].at;
      next[1].fn();
    }
    this.#now = end;
  }

  get pendingTimers(): number {
    return this.#timers.size;
  }
}
