import { describe, expect, it } from 'vitest';
import { Drain } from './drain.ts';

describe('Drain', () => {
  it('counts requests until each leaves once, and wakes a waiter when the last one leaves', async () => {
    const drain = new Drain();
    const leaveA = drain.enter();
    const leaveB = drain.enter();
    drain.begin();
    expect(drain.draining).toBe(true);
    let idle: boolean | undefined;
    const waiting = drain.waitIdle(60_000).then((v) => (idle = v));
    leaveA();
    leaveA(); // a second call is not a second request leaving
    await Promise.resolve();
    expect(drain.inFlight).toBe(1);
    expect(idle).toBeUndefined();
    leaveB();
    await waiting;
    expect(idle).toBe(true);
    expect(drain.inFlight).toBe(0);
  });

  it('gives up at the timeout with the requests still counted', async () => {
    const drain = new Drain();
    drain.enter();
    expect(await drain.waitIdle(5)).toBe(false);
    expect(drain.inFlight).toBe(1);
  });

  it('is idle at once with nothing in flight', async () => {
    expect(await new Drain().waitIdle(60_000)).toBe(true);
  });
});
