import { describe, expect, it } from 'vitest';
import { ScaledClock, VirtualClock } from './clock.ts';

describe('VirtualClock', () => {
  it('fires timers in time order, FIFO at equal times, including timers added while firing', () => {
    const c = new VirtualClock();
    const log: string[] = [];
    c.setTimer(10, () => log.push(`a@${c.now()}`));
    c.setTimer(5, () => {
      log.push(`b@${c.now()}`);
      c.setTimer(0, () => log.push(`c@${c.now()}`));
    });
    c.setTimer(10, () => log.push(`d@${c.now()}`));
    c.advanceTo(7);
    expect(log).toEqual(['b@5', 'c@5']);
    c.runAll();
    expect(log).toEqual(['b@5', 'c@5', 'a@10', 'd@10']);
    expect(c.now()).toBe(10);
  });
});

describe('ScaledClock', () => {
  it('runs simulated time `scale` times faster than wall time', () => {
    let wall = 1000;
    const c = new ScaledClock(20, () => wall);
    wall += 50;
    expect(c.now()).toBe(1000);
    expect(c.toWallMs(1000)).toBe(50);
  });

  it('rejects a non-positive scale', () => {
    expect(() => new ScaledClock(0)).toThrow(RangeError);
  });
});
