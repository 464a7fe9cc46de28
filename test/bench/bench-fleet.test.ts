import { describe, expect, it } from 'vitest';
import { smgDefaultArgs } from './bench-fleet.ts';

describe('smgDefaultArgs', () => {
  it("polls loads every smg default 10 s of model time, at the simulators' clock", () => {
    expect(smgDefaultArgs(1)).toEqual(['--load-monitor-interval', '10']);
    expect(smgDefaultArgs(2)).toEqual(['--load-monitor-interval', '5']);
  });

  it("never goes under smg's minimum of 1 s", () => {
    expect(smgDefaultArgs(8)).toEqual(['--load-monitor-interval', '1']);
    expect(smgDefaultArgs(100)).toEqual(['--load-monitor-interval', '1']);
  });
});
