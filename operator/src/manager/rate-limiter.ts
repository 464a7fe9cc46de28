// Rate limiters for requeues, as client-go's workqueue has them. The controller default
// is the max of a per-key exponential failure backoff (5 ms doubling to 1000 s) and a
// global token bucket (10 qps, burst 100): one failing key backs off alone, and a
// storm of failures cannot exceed the bucket's rate overall.
import type { Clock } from '#kube/clock.ts';
import { systemClock } from '#kube/clock.ts';

export interface RateLimiter<K = string> {
  // How long to wait before the key may be processed again; records a failure.
  when(key: K): number;
  // The key succeeded: forget its failures.
  forget(key: K): void;
  numRequeues(key: K): number;
}

export function createExponentialFailureRateLimiter<K = string>(
  opts: { baseDelayMs?: number; maxDelayMs?: number } = {},
): RateLimiter<K> {
  const base = opts.baseDelayMs ?? 5;
  const max = opts.maxDelayMs ?? 1_000_000;
  const failures = new Map<K, number>();
  return {
    when: (key) => {
      const n = failures.get(key) ?? 0;
      failures.set(key, n + 1);
      // 2^n overflows to Infinity long before it matters; min() keeps it bounded.
      return Math.min(base * 2 ** n, max);
    },
    forget: (key) => void failures.delete(key),
    numRequeues: (key) => failures.get(key) ?? 0,
  };
}

// A token bucket with reservations (golang.org/x/time/rate's Reserve): each call takes a
// token, possibly one not yet refilled, and returns how long until it exists.
export function createBucketRateLimiter<K = string>(
  opts: { qps?: number; burst?: number; clock?: Clock } = {},
): RateLimiter<K> {
  const qps = opts.qps ?? 10;
  const burst = opts.burst ?? 100;
  const clock = opts.clock ?? systemClock;
  let tokens = burst;
  let last = clock.now();
  return {
    when: () => {
      const now = clock.now();
      tokens = Math.min(burst, tokens + ((now - last) / 1000) * qps);
      last = now;
      tokens -= 1;
      return tokens >= 0 ? 0 : Math.ceil((-tokens / qps) * 1000);
    },
    forget: () => undefined,
    numRequeues: () => 0,
  };
}

export function createMaxOfRateLimiter<K = string>(...limiters: RateLimiter<K>[]): RateLimiter<K> {
  return {
    // Every limiter records the attempt, so each keeps its own state right.
    when: (key) => limiters.reduce((max, l) => Math.max(max, l.when(key)), 0),
    forget: (key) => limiters.forEach((l) => l.forget(key)),
    numRequeues: (key) => limiters.reduce((max, l) => Math.max(max, l.numRequeues(key)), 0),
  };
}

export function createDefaultControllerRateLimiter<K = string>(clock: Clock = systemClock): RateLimiter<K> {
  return createMaxOfRateLimiter<K>(
    createExponentialFailureRateLimiter<K>({ baseDelayMs: 5, maxDelayMs: 1_000_000 }),
    createBucketRateLimiter<K>({ qps: 10, burst: 100, clock }),
  );
}
