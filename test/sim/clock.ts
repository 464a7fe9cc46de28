// Clocks for the timing model. Engine time is simulated milliseconds.
// VirtualClock: tests move time by hand, timers fire in order, no sleeps.
// ScaledClock: the server's clock; simulated time runs `scale` times faster
// than wall time, so --sim-time-scale 60 replays an hour in a minute.

export interface Clock {
  /** Simulated milliseconds since the clock started. */
  now(): number;
  /** Run `fn` once `delayMs` simulated milliseconds have passed. */
  setTimer(delayMs: number, fn: () => void): void;
}

interface VirtualTimer {
  readonly at: number;
  readonly seq: number;
  readonly fn: () => void;
}

export class VirtualClock implements Clock {
  #now = 0;
  #seq = 0;
  #timers: VirtualTimer[] = [];

  now(): number {
    return this.#now;
  }

  setTimer(delayMs: number, fn: () => void): void {
    this.#timers.push({ at: this.#now + Math.max(0, delayMs), seq: this.#seq++, fn });
  }

  get pendingTimers(): number {
    return this.#timers.length;
  }

  nextTimerAt(): number | undefined {
    let at: number | undefined;
    for (const t of this.#timers) if (at === undefined || t.at < at) at = t.at;
    return at;
  }

  /** Advance to `t`, firing due timers in time order (a timer may add more). */
  advanceTo(t: number): void {
    for (;;) {
      let next: VirtualTimer | undefined;
      for (const timer of this.#timers) {
        if (timer.at <= t && (!next || timer.at < next.at || (timer.at === next.at && timer.seq < next.seq)))
          next = timer;
      }
      if (!next) break;
      this.#timers = this.#timers.filter((x) => x !== next);
      this.#now = Math.max(this.#now, next.at);
      next.fn();
    }
    this.#now = Math.max(this.#now, t);
  }

  advanceBy(ms: number): void {
    this.advanceTo(this.#now + ms);
  }

  /** Fire timers until none are left (or `limitMs` of simulated time passed). */
  runAll(limitMs = 3_600_000): void {
    const end = this.#now + limitMs;
    while (this.#timers.length > 0) {
      const at = Math.min(...this.#timers.map((x) => x.at));
      if (at > end) break;
      this.advanceTo(at);
    }
  }
}

export class ScaledClock implements Clock {
  readonly #scale: number;
  readonly #start: number;
  readonly #wallNow: () => number;

  constructor(scale: number, wallNow: () => number = () => performance.now()) {
    if (!(scale > 0)) throw new RangeError('time scale must be > 0');
    this.#scale = scale;
    this.#wallNow = wallNow;
    this.#start = wallNow();
  }

  now(): number {
    return (this.#wallNow() - this.#start) * this.#scale;
  }

  toWallMs(simMs: number): number {
    return simMs / this.#scale;
  }

  setTimer(delayMs: number, fn: () => void): void {
    const wall = delayMs / this.#scale;
    // Node timers have a 1 ms granularity; shorter steps run on the next turn
    // of the event loop and the engine accounts them at their scheduled end.
    if (wall < 1) setImmediate(fn);
    else setTimeout(fn, wall);
  }
}

/**
 * Virtual time that runs itself: due timers fire one at a time on the next
 * event-loop turn, jumping the clock to each timer's time. A server on this
 * clock answers at once while reporting model time, so HTTP tests need no
 * sleeps and see deterministic latencies.
 */
export class InstantClock implements Clock {
  readonly #inner = new VirtualClock();
  #scheduled = false;
  #held = false;

  /** Stop time: timers wait until release(), so tests can line requests up deterministically. */
  hold(): void {
    this.#held = true;
  }

  release(): void {
    this.#held = false;
    if (this.#inner.pendingTimers > 0) this.#schedule();
  }

  now(): number {
    return this.#inner.now();
  }

  setTimer(delayMs: number, fn: () => void): void {
    this.#inner.setTimer(delayMs, fn);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled || this.#held) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      if (this.#held) return;
      // Fire only the earliest due time per turn so I/O callbacks (new requests) interleave.
      const at = this.#inner.nextTimerAt();
      if (at !== undefined) this.#inner.advanceTo(at);
      if (this.#inner.pendingTimers > 0) this.#schedule();
    });
  }
}
