// Time as a dependency, for every program: production passes a system clock; unit tests
// run the same code under vitest fake timers (the system clocks read the globals at call
// time, so the fakes take effect) or with a hand-driven clock (test/support/manual-clock.ts).

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds on this clock's own scale: compare only readings of one clock. */
  now(): number;
  /** Run `fn` once, `delayMs` from now, unless cancelled first. */
  setTimer(delayMs: number, fn: () => void): Timer;
}

function unrefTimer(delayMs: number, fn: () => void): Timer {
  const t = setTimeout(fn, delayMs);
  // Timers never keep the process alive on their own: servers and watches do.
  t.unref();
  return { cancel: () => clearTimeout(t) };
}

/** Wall time: now() is milliseconds since the epoch, for timestamps others read (Dates, leases). */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer: unrefTimer,
};

/** Monotonic time: now() never steps back with the wall clock, for durations and windows. */
export const monotonicClock: Clock = {
  now: () => performance.now(),
  setTimer: unrefTimer,
};

// Resolves after ms, or at once (without rejecting) when signal aborts.
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = (): void => {
      timer.cancel();
      resolve();
    };
    const timer = clock.setTimer(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

// Exponential backoff with jitter, as client-go's wait.Backoff: each step doubles up to max.
export interface Backoff {
  next(): number;
  reset(): void;
}

export function createBackoff(opts: {
  initialMs: number;
  maxMs: number;
  factor?: number;
  jitter?: number;
  rng?: () => number;
}): Backoff {
  const factor = opts.factor ?? 2;
  const jitter = opts.jitter ?? 0.2;
  const rng = opts.rng ?? Math.random;
  let current = opts.initialMs;
  return {
    next: () => {
      const base = current;
      current = Math.min(current * factor, opts.maxMs);
      return Math.round(base * (1 + jitter * rng()));
    },
    reset: () => {
      current = opts.initialMs;
    },
  };
}
