import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import {
  AdmissionController,
  AdmissionRegistry,
  type AdmissionConfig,
  type AdmissionResult,
  type Permit,
} from './controller.ts';

const cfg: AdmissionConfig = { maxConcurrency: 2, maxQueue: 2, queueTimeoutMs: 1000, adaptive: false };

function permit(r: AdmissionResult): Permit {
  if (!r.ok) throw new Error(`rejected: ${r.error.code}`);
  return r.value;
}

/** Tracks a pending acquire without awaiting it. */
function track(p: Promise<AdmissionResult>): { result: AdmissionResult | undefined } {
  const box: { result: AdmissionResult | undefined } = { result: undefined };
  void p.then((r) => (box.result = r));
  return box;
}

const flush = () => new Promise<void>((r) => setImmediate(r));

describe('AdmissionController', () => {
  it('admits up to the limit, queues up to maxQueue, then rejects with Retry-After', async () => {
    const clock = new ManualClock();
    const ctl = new AdmissionController(cfg, clock);
    permit(await ctl.acquire());
    permit(await ctl.acquire());
    const q1 = track(ctl.acquire());
    const q2 = track(ctl.acquire());
    const over = await ctl.acquire();
    expect(over).toMatchObject({ ok: false, error: { code: 'overloaded' } });
    expect(ctl.snapshot()).toMatchObject({ inFlight: 2, queued: 2 });
    await flush();
    expect(q1.result).toBeUndefined();
    expect(q2.result).toBeUndefined();
  });

  it('grants queued requests in FIFO order as permits are released, with queue time', async () => {
    const clock = new ManualClock();
    const ctl = new AdmissionController(cfg, clock);
    const a = permit(await ctl.acquire());
    const b = permit(await ctl.acquire());
    const q1 = track(ctl.acquire());
    const q2 = track(ctl.acquire());
    clock.advance(300);
    a.release();
    await flush();
    expect(q1.result?.ok).toBe(true);
    expect(q2.result).toBeUndefined();
    expect(permit(q1.result as AdmissionResult).queuedMs).toBe(300);
    b.release();
    b.release(); // idempotent
    await flush();
    expect(q2.result?.ok).toBe(true);
    expect(ctl.snapshot()).toMatchObject({ inFlight: 2, queued: 0 });
  });

  it('times out a queued request with a 503 code and frees its place', async () => {
    const clock = new ManualClock();
    const ctl = new AdmissionController(cfg, clock);
    permit(await ctl.acquire());
    permit(await ctl.acquire());
    const q = track(ctl.acquire());
    clock.advance(999);
    await flush();
    expect(q.result).toBeUndefined();
    clock.advance(1);
    await flush();
    expect(q.result).toMatchObject({ ok: false, error: { code: 'queue-timeout' } });
    expect(ctl.snapshot().queued).toBe(0);
  });

  it('an aborted client leaves the queue; the next one gets its turn', async () => {
    const clock = new ManualClock();
    const ctl = new AdmissionController(cfg, clock);
    const a = permit(await ctl.acquire());
    permit(await ctl.acquire());
    const abort = new AbortController();
    const q1 = track(ctl.acquire(abort.signal));
    const q2 = track(ctl.acquire());
    abort.abort();
    await flush();
    expect(q1.result).toEqual({ ok: false, error: { code: 'aborted' } });
    a.release();
    await flush();
    expect(q2.result?.ok).toBe(true);
    expect(clock.pendingTimers).toBe(0);
  });

  it('drain rejects queued and new requests with draining; held permits finish', async () => {
    const clock = new ManualClock();
    const ctl = new AdmissionController(cfg, clock);
    const a = permit(await ctl.acquire());
    permit(await ctl.acquire()).release();
    permit(await ctl.acquire());
    const q = track(ctl.acquire());
    ctl.drain();
    await flush();
    expect(q.result).toEqual({ ok: false, error: { code: 'draining' } });
    expect(await ctl.acquire()).toEqual({ ok: false, error: { code: 'draining' } });
    let idle = false;
    void ctl.idle().then(() => (idle = true));
    a.release();
    await flush();
    expect(idle).toBe(false);
    expect(ctl.snapshot().inFlight).toBe(1);
  });

  it('Retry-After grows with the queue and the observed service time', async () => {
    const clock = new ManualClock();
    const ctl = new AdmissionController({ ...cfg, maxConcurrency: 1, maxQueue: 1 }, clock);
    const a = permit(await ctl.acquire());
    clock.advance(4000);
    a.release();
    permit(await ctl.acquire());
    track(ctl.acquire());
    const over = await ctl.acquire();
    // 2 requests ahead × 4 s each / limit 1
    expect(over).toEqual({ ok: false, error: { code: 'overloaded', retryAfterSeconds: 8 } });
  });

  it('adaptive: lowers the limit when latency climbs, recovers after', async () => {
    const clock = new ManualClock();
    const ctl = new AdmissionController(
      { maxConcurrency: 20, maxQueue: 100, queueTimeoutMs: 60_000, adaptive: true, cooldownMs: 100 },
      clock,
    );
    const cycle = async (latencyMs: number) => {
      const held: Permit[] = [];
      for (let i = 0; i < ctl.limit; i++) held.push(permit(await ctl.acquire()));
      clock.advance(latencyMs);
      for (const p of held) p.release({ latencyMs, ok: true });
    };
    for (let i = 0; i < 20; i++) await cycle(50);
    expect(ctl.limit).toBe(20);
    for (let i = 0; i < 10; i++) await cycle(400);
    const lowered = ctl.limit;
    expect(lowered).toBeLessThan(20);
    expect(lowered).toBeGreaterThanOrEqual(1);
    for (let i = 0; i < 200; i++) await cycle(50);
    expect(ctl.limit).toBe(20);
  });

  it('adaptive: upstream failures and reported pressure lower the limit, once per cooldown', async () => {
    const clock = new ManualClock();
    const ctl = new AdmissionController(
      { maxConcurrency: 10, maxQueue: 10, queueTimeoutMs: 1000, adaptive: true, cooldownMs: 1000 },
      clock,
    );
    permit(await ctl.acquire()).release({ ok: false });
    expect(ctl.limit).toBe(8);
    ctl.reportPressure();
    expect(ctl.limit).toBe(8);
    clock.advance(1000);
    ctl.reportPressure();
    expect(ctl.limit).toBe(6);
  });

  it('never goes below minConcurrency', () => {
    const clock = new ManualClock();
    const ctl = new AdmissionController(
      { maxConcurrency: 4, maxQueue: 0, queueTimeoutMs: 1, adaptive: true, cooldownMs: 0, minConcurrency: 2 },
      clock,
    );
    for (let i = 0; i < 50; i++) ctl.reportPressure();
    expect(ctl.limit).toBe(2);
  });
});

describe('AdmissionController weights (a batch is prompts x n requests to the runtime)', () => {
  const four: AdmissionConfig = { maxConcurrency: 4, maxQueue: 4, queueTimeoutMs: 1000, adaptive: false };

  it('in flight counts weights: a batch of 3 leaves room for 1, a batch of 2 waits', async () => {
    const ctl = new AdmissionController(four, new ManualClock());
    const batch = permit(await ctl.acquire(undefined, { weight: 3 }));
    expect(ctl.snapshot()).toMatchObject({ inFlight: 3, queued: 0 });
    const two = track(ctl.acquire(undefined, { weight: 2 }));
    await flush();
    expect(two.result).toBeUndefined();
    batch.release();
    await flush();
    expect(two.result?.ok).toBe(true);
    expect(ctl.snapshot()).toMatchObject({ inFlight: 2, queued: 0 });
  });

  it('the next in line waits for room for its weight; lighter requests behind it wait too', async () => {
    const ctl = new AdmissionController(four, new ManualClock());
    const held = permit(await ctl.acquire());
    const batch = track(ctl.acquire(undefined, { weight: 4 }));
    const single = track(ctl.acquire());
    await flush();
    expect([batch.result, single.result]).toEqual([undefined, undefined]);
    held.release();
    await flush();
    expect(batch.result?.ok).toBe(true);
    expect(single.result).toBeUndefined();
    permit(batch.result as AdmissionResult).release();
    await flush();
    expect(single.result?.ok).toBe(true);
  });

  it('a request heavier than the limit is admitted alone, and counted whole', async () => {
    const ctl = new AdmissionController(four, new ManualClock());
    const big = permit(await ctl.acquire(undefined, { weight: 10 }));
    expect(ctl.snapshot()).toMatchObject({ inFlight: 10 });
    const next = track(ctl.acquire());
    await flush();
    expect(next.result).toBeUndefined();
    big.release();
    await flush();
    expect(next.result?.ok).toBe(true);
    expect(() => ctl.acquire(undefined, { weight: 0 })).toThrow(RangeError);
  });
});

describe('AdmissionController priority', () => {
  const one: AdmissionConfig = { maxConcurrency: 1, maxQueue: 10, queueTimeoutMs: 1000, adaptive: false };

  /** Releases the held permit and returns the next one granted from the queue. */
  async function handOver(held: Permit, waiters: { result: AdmissionResult | undefined }[]) {
    const before = waiters.filter((w) => w.result !== undefined).length;
    held.release();
    await flush();
    const granted = waiters.filter((w) => w.result?.ok);
    expect(granted.length).toBe(before + 1);
    return granted;
  }

  it('serves the highest priority first', async () => {
    const ctl = new AdmissionController(one, new ManualClock());
    const held = permit(await ctl.acquire());
    const low = track(ctl.acquire(undefined, { priority: 0 }));
    const high = track(ctl.acquire(undefined, { priority: 5 }));
    const neg = track(ctl.acquire(undefined, { priority: -3 }));
    const mid = track(ctl.acquire(undefined, { priority: 2 }));
    const order: string[] = [];
    const named = { low, high, neg, mid };
    let current = held;
    for (let i = 0; i < 4; i++) {
      current.release();
      await flush();
      const next = Object.entries(named).find(([n, w]) => w.result?.ok && !order.includes(n));
      if (!next) throw new Error('nothing granted');
      order.push(next[0]);
      current = permit(next[1].result as AdmissionResult);
    }
    expect(order).toEqual(['high', 'mid', 'low', 'neg']);
    expect(ctl.snapshot()).toMatchObject({ inFlight: 1, queued: 0 });
  });

  it('serves one priority in arrival order, and acquire(signal) means priority 0', async () => {
    const ctl = new AdmissionController(one, new ManualClock());
    let held = permit(await ctl.acquire());
    const waiters = [
      track(ctl.acquire(undefined, { priority: 3 })),
      track(ctl.acquire()),
      track(ctl.acquire(undefined, { priority: 3 })),
      track(ctl.acquire(new AbortController().signal)),
      track(ctl.acquire(undefined, { priority: 3 })),
    ];
    const order: number[] = [];
    for (let i = 0; i < waiters.length; i++) {
      await handOver(held, waiters);
      const next = waiters.findIndex((w, j) => w.result?.ok && !order.includes(j));
      order.push(next);
      held = permit(waiters[next]?.result as AdmissionResult);
    }
    expect(order).toEqual([0, 2, 4, 1, 3]);
  });

  it('a full queue: a higher arrival displaces the newest of the lowest, which gets overloaded', async () => {
    const clock = new ManualClock();
    const ctl = new AdmissionController({ ...one, maxQueue: 3 }, clock);
    const first = permit(await ctl.acquire());
    clock.advance(4000);
    first.release(); // service time 4 s
    const held = permit(await ctl.acquire());
    const lowOld = track(ctl.acquire(undefined, { priority: -1 }));
    const lowNew = track(ctl.acquire(undefined, { priority: -1 }));
    const mid = track(ctl.acquire(undefined, { priority: 1 }));
    const high = track(ctl.acquire(undefined, { priority: 2 }));
    await flush();
    // As a rejected arrival would hear: 4 requests ahead (3 queued + itself) × 4 s / limit 1.
    expect(lowNew.result).toEqual({ ok: false, error: { code: 'overloaded', retryAfterSeconds: 16 } });
    expect(lowOld.result).toBeUndefined();
    expect(ctl.snapshot()).toMatchObject({ inFlight: 1, queued: 3 });
    expect(await ctl.acquire(undefined, { priority: -1 })).toEqual({
      ok: false,
      error: { code: 'overloaded', retryAfterSeconds: 16 },
    });
    held.release();
    await flush();
    expect(high.result?.ok).toBe(true);
    expect(mid.result).toBeUndefined();
    expect(lowOld.result).toBeUndefined();
    permit(high.result as AdmissionResult).release();
    await flush();
    expect(mid.result?.ok).toBe(true);
    permit(mid.result as AdmissionResult).release();
    await flush();
    expect(lowOld.result?.ok).toBe(true);
    expect(ctl.snapshot()).toMatchObject({ inFlight: 1, queued: 0 });
    expect(clock.pendingTimers).toBe(0);
  });

  it('a full queue: an arrival no higher than the lowest waiter is rejected, displacing no one', async () => {
    const ctl = new AdmissionController({ ...one, maxQueue: 2 }, new ManualClock());
    permit(await ctl.acquire());
    const waiters = [
      track(ctl.acquire(undefined, { priority: 1 })),
      track(ctl.acquire(undefined, { priority: 4 })),
    ];
    for (const priority of [1, 0, -50]) {
      expect(await ctl.acquire(undefined, { priority })).toMatchObject({
        ok: false,
        error: { code: 'overloaded' },
      });
    }
    await flush();
    expect(waiters.map((w) => w.result)).toEqual([undefined, undefined]);
    expect(ctl.snapshot().queued).toBe(2);
    // Strictly higher than the lowest waiting is what it takes.
    const two = track(ctl.acquire(undefined, { priority: 2 }));
    await flush();
    expect(waiters[0]?.result).toMatchObject({ ok: false, error: { code: 'overloaded' } });
    expect(two.result).toBeUndefined();
    expect(ctl.snapshot().queued).toBe(2);
  });

  it('maxQueue 0: no queue, whatever the priority', async () => {
    const ctl = new AdmissionController({ ...one, maxQueue: 0 }, new ManualClock());
    permit(await ctl.acquire());
    expect(await ctl.acquire(undefined, { priority: 100 })).toMatchObject({
      ok: false,
      error: { code: 'overloaded' },
    });
    expect(ctl.snapshot().queued).toBe(0);
  });

  it('timeout and abort of waiters below the top keep the counts exact', async () => {
    const clock = new ManualClock();
    const ctl = new AdmissionController({ ...one, maxQueue: 3 }, clock);
    const held = permit(await ctl.acquire());
    const abort = new AbortController();
    const mid = track(ctl.acquire(undefined, { priority: 2 }));
    const low = track(ctl.acquire(abort.signal, { priority: 0 }));
    clock.advance(500);
    const high = track(ctl.acquire(undefined, { priority: 5 }));
    abort.abort();
    await flush();
    expect(low.result).toEqual({ ok: false, error: { code: 'aborted' } });
    expect(ctl.snapshot().queued).toBe(2);
    clock.advance(500); // mid's timeout; high has 500 ms left
    await flush();
    expect(mid.result).toMatchObject({ ok: false, error: { code: 'queue-timeout' } });
    expect(high.result).toBeUndefined();
    expect(ctl.snapshot().queued).toBe(1);
    const three = track(ctl.acquire(undefined, { priority: 3 }));
    const five = track(ctl.acquire(undefined, { priority: 5 }));
    expect(ctl.snapshot().queued).toBe(3);
    // The emptied levels 0 and 2 are gone: 3 is the lowest waiting, so a 1 displaces no one.
    expect(await ctl.acquire(undefined, { priority: 1 })).toMatchObject({ ok: false });
    expect(ctl.snapshot().queued).toBe(3);
    await handOver(held, [high, three, five]);
    expect(high.result?.ok).toBe(true);
    await handOver(permit(high.result as AdmissionResult), [high, three, five]);
    expect(five.result?.ok).toBe(true);
    await handOver(permit(five.result as AdmissionResult), [high, three, five]);
    expect(ctl.snapshot()).toMatchObject({ inFlight: 1, queued: 0 });
    expect(clock.pendingTimers).toBe(0);
  });

  it('drain rejects the waiters of every priority; after resume the queue starts clean', async () => {
    const clock = new ManualClock();
    const ctl = new AdmissionController(one, clock);
    const held = permit(await ctl.acquire());
    const waiters = [-3, 0, 0, 7].map((priority) => track(ctl.acquire(undefined, { priority })));
    ctl.drain();
    await flush();
    expect(waiters.map((w) => w.result)).toEqual(Array(4).fill({ ok: false, error: { code: 'draining' } }));
    expect(ctl.snapshot()).toMatchObject({ queued: 0, draining: true });
    expect(clock.pendingTimers).toBe(0);
    ctl.resume();
    const low = track(ctl.acquire(undefined, { priority: -3 }));
    const high = track(ctl.acquire(undefined, { priority: 7 }));
    expect(ctl.snapshot().queued).toBe(2);
    held.release();
    await flush();
    expect(high.result?.ok).toBe(true);
    expect(low.result).toBeUndefined();
  });

  it('refuses a priority that is not an integer', () => {
    const ctl = new AdmissionController(one, new ManualClock());
    for (const priority of [0.5, Number.NaN, Infinity]) {
      expect(() => ctl.acquire(undefined, { priority })).toThrow(RangeError);
    }
  });
});

describe('AdmissionRegistry', () => {
  it('one saturated deployment does not starve another', async () => {
    const clock = new ManualClock();
    const reg = new AdmissionRegistry(clock);
    const slow = reg.get('slow', cfg);
    permit(await slow.acquire());
    permit(await slow.acquire());
    track(slow.acquire());
    track(slow.acquire());
    expect((await slow.acquire()).ok).toBe(false);
    const fast = reg.get('fast', cfg);
    expect((await fast.acquire()).ok).toBe(true);
    expect(reg.get('slow', cfg)).toBe(slow);
    expect(reg.get('slow', { ...cfg, queueTimeoutMs: 5000 })).not.toBe(slow);
  });

  it('resizes in place when only the bounds move, keeping what is held counted', async () => {
    const reg = new AdmissionRegistry(new ManualClock());
    const ctl = reg.get('d', { ...cfg, maxConcurrency: 4 });
    for (let i = 0; i < 3; i++) permit(await ctl.acquire());
    // A fourth replica joined: this one's share drops to 2 while it holds 3.
    expect(reg.get('d', { ...cfg, maxConcurrency: 2 })).toBe(ctl);
    const waiting = track(ctl.acquire());
    await flush();
    expect(waiting.result).toBeUndefined();
    expect(ctl.snapshot()).toMatchObject({ limit: 2, inFlight: 3, queued: 1 });
  });
});

describe('AdmissionController.resize', () => {
  it('a larger share admits the queue at once', async () => {
    const ctl = new AdmissionController(cfg, new ManualClock());
    permit(await ctl.acquire());
    permit(await ctl.acquire());
    const q = track(ctl.acquire());
    ctl.resize({ maxConcurrency: 3, maxQueue: 2 });
    await flush();
    expect(q.result?.ok).toBe(true);
    expect(ctl.snapshot()).toMatchObject({ limit: 3, inFlight: 3, queued: 0 });
  });

  it('a smaller queue bound refuses new arrivals but keeps the queued ones', async () => {
    const ctl = new AdmissionController({ ...cfg, maxQueue: 3 }, new ManualClock());
    permit(await ctl.acquire());
    permit(await ctl.acquire());
    const queued = [track(ctl.acquire()), track(ctl.acquire())];
    ctl.resize({ maxConcurrency: 2, maxQueue: 1 });
    expect(await ctl.acquire()).toMatchObject({ ok: false, error: { code: 'overloaded' } });
    await flush();
    expect(queued.map((q) => q.result)).toEqual([undefined, undefined]);
    expect(ctl.snapshot().queued).toBe(2);
  });

  it('keeps an adaptive limit at its place relative to the ceiling', () => {
    const ctl = new AdmissionController({ ...cfg, maxConcurrency: 10, adaptive: true }, new ManualClock());
    ctl.reportPressure(); // 10 * 0.8 = 8
    ctl.resize({ maxConcurrency: 5, maxQueue: 2 });
    expect(ctl.limit).toBe(4);
  });
});
