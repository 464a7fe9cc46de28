// A clock tests advance by hand (the Clock of lib/kube/clock.ts): no sleeps, timers fire in
// order of their due time during advance().
import type { Clock, Timer } from '#kube/clock.ts';

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
