import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '#kube/clock.ts';
import {
  createBucketRateLimiter,
  createDefaultControllerRateLimiter,
  createExponentialFailureRateLimiter,
  createMaxOfRateLimiter,
} from './rate-limiter.ts';

describe('rate limiters', () => {
  beforeEach(() => void vi.useFakeTimers({ now: 0 }));
  afterEach(() => void vi.useRealTimers());

  it('token bucket: a burst passes at once, then one token per 1/qps', () => {
    const rl = createBucketRateLimiter({ qps: 10, burst: 100, clock: systemClock });
    const burst = Array.from({ length: 100 }, (_, i) => rl.when(`k${i}`));
    expect(burst.every((d) => d === 0)).toBe(true);
    expect(rl.when('x')).toBe(100);
    expect(rl.when('y')).toBe(200);
    // After a second, ten tokens refilled: the reservations already made consume two.
    vi.advanceTimersByTime(1000);
    expect(rl.when('z')).toBe(0);
  });

  it('max-of: the slower limiter decides, every limiter records the attempt', () => {
    const fast = createExponentialFailureRateLimiter<string>({ baseDelayMs: 1 });
    const slow = createExponentialFailureRateLimiter<string>({ baseDelayMs: 100 });
    const rl = createMaxOfRateLimiter(fast, slow);
    expect(rl.when('k')).toBe(100);
    expect(rl.when('k')).toBe(200);
    expect(fast.numRequeues('k')).toBe(2);
    rl.forget('k');
    expect(fast.numRequeues('k')).toBe(0);
    expect(slow.numRequeues('k')).toBe(0);
  });

  it.each([
    [1, 5],
    [2, 10],
    [11, 5120],
  ])('default controller limiter: failure %i of one key waits %i ms', (n, expected) => {
    const rl = createDefaultControllerRateLimiter<string>(systemClock);
    let last = 0;
    for (let i = 0; i < n; i++) last = rl.when('k');
    expect(last).toBe(expected);
  });

  it('default controller limiter: the global bucket throttles many failing keys', () => {
    const rl = createDefaultControllerRateLimiter<string>(systemClock);
    const delays = Array.from({ length: 120 }, (_, i) => rl.when(`k${i}`));
    expect(delays.slice(0, 100).every((d) => d === 5)).toBe(true);
    expect(delays[119]).toBe(2000);
  });
});
