// Time as a dependency: production uses the system clock; unit tests run the same code
// under vitest fake timers (the system clock reads the globals at call time, so the fakes
// take effect) or with a hand-driven clock.

export type TimerHandle = ReturnType<typeof setTimeout>;

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    // Timers never keep the process alive on their own: servers and watches do.
    t.unref();
    return t;
  },
  clearTimeout: (t) => clearTimeout(t),
};

// Resolves after ms, or at once (without rejecting) when signal aborts.
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = (): void => {
      clock.clearTimeout(timer);
      resolve();
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
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
