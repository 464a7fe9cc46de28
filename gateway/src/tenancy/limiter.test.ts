import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { MemoryRateLimiter } from './limiter.ts';
import { WINDOW_MS } from './rate-window.ts';
import type { Tenant } from './tenant.ts';

const tenant = (limits: Tenant['limits'], id = 'ns/a'): Tenant => ({
  id,
  deployments: new Set(['ns/m']),
  limits,
  priority: 0,
});

describe('MemoryRateLimiter', () => {
  it('lets requestsPerMinute in, refuses the next, and lets in again as the minute slides', async () => {
    const clock = new ManualClock();
    const limiter = new MemoryRateLimiter(clock);
    const t = tenant({ requestsPerMinute: 4 });
    for (let i = 0; i < 4; i++)
      expect((await limiter.admit(t, { requests: 1, tokens: 10 })).allowed).toBe(true);
    const refused = await limiter.admit(t, { requests: 1, tokens: 10 });
    expect(refused).toMatchObject({ allowed: false, limited: 'requests' });
    // A refused request is not counted: after the wait it names, one fits.
    clock.advance((refused.allowed ? 0 : refused.retryAfterSeconds) * 1000);
    expect((await limiter.admit(t, { requests: 1, tokens: 10 })).allowed).toBe(true);
    // Two windows later nothing of the old traffic is left.
    clock.advance(2 * WINDOW_MS);
    for (let i = 0; i < 4; i++)
      expect((await limiter.admit(t, { requests: 1, tokens: 10 })).allowed).toBe(true);
  });

  it('counts completion tokens charged after the answer against tokensPerMinute', async () => {
    const limiter = new MemoryRateLimiter(new ManualClock());
    const t = tenant({ tokensPerMinute: 100 });
    expect((await limiter.admit(t, { requests: 1, tokens: 40 })).allowed).toBe(true);
    expect((await limiter.admit(t, { requests: 1, tokens: 40 })).allowed).toBe(true);
    limiter.charge(t, 30);
    expect(await limiter.admit(t, { requests: 1, tokens: 1 })).toMatchObject({
      allowed: false,
      limited: 'tokens',
    });
  });

  it('counts a batch as the requests it is (prompts x n), and lets it in only when all of them fit', async () => {
    const limiter = new MemoryRateLimiter(new ManualClock());
    const t = tenant({ requestsPerMinute: 10 });
    expect(await limiter.admit(t, { requests: 8, tokens: 0 })).toMatchObject({
      allowed: true,
      requests: { limit: 10, remaining: 2 },
    });
    const refused = await limiter.admit(t, { requests: 3, tokens: 0 });
    expect(refused).toMatchObject({ allowed: false, limited: 'requests' });
    expect((await limiter.admit(t, { requests: 2, tokens: 0 })).allowed).toBe(true);
  });

  it("a request larger than this replica's share fits only a window with nothing in it", async () => {
    const clock = new ManualClock();
    const limiter = new MemoryRateLimiter(clock, (total) => Math.floor(total / 4));
    const t = tenant({ requestsPerMinute: 20 });
    expect((await limiter.admit(t, { requests: 8, tokens: 0 })).allowed).toBe(true);
    const refused = await limiter.admit(t, { requests: 8, tokens: 0 });
    expect(refused).toMatchObject({ allowed: false, limited: 'requests' });
    // The wait it names is until the window is empty again, and then it fits.
    clock.advance((refused.allowed ? 0 : refused.retryAfterSeconds) * 1000);
    expect((await limiter.admit(t, { requests: 8, tokens: 0 })).allowed).toBe(true);
  });

  it("enforces this replica's share of a tier-wide limit, and each tenant apart", async () => {
    const limiter = new MemoryRateLimiter(new ManualClock(), (total) => Math.floor(total / 3));
    const a = tenant({ requestsPerMinute: 9 });
    const b = tenant({ requestsPerMinute: 9 }, 'ns/b');
    for (let i = 0; i < 3; i++)
      expect((await limiter.admit(a, { requests: 1, tokens: 0 })).allowed).toBe(true);
    expect((await limiter.admit(a, { requests: 1, tokens: 0 })).allowed).toBe(false);
    expect((await limiter.admit(b, { requests: 1, tokens: 0 })).allowed).toBe(true);
  });
});
