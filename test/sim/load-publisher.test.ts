import { describe, expect, it } from 'vitest';
import type { LoadStat } from './kv-event-codec.ts';
import { LoadThrottle } from './load-publisher.ts';

const stat = (numRunningReqs: number): LoadStat => ({
  numRunningReqs,
  numWaitingReqs: 0,
  numTokens: 0,
  maxTotalNumTokens: 100,
  attnDpRank: 0,
  numWaitingUncachedTokens: 0,
  numTotalTokens: 0,
  maxRunningRequests: 8,
  totalPrefillUncachedTokens: 0,
  totalPrefillBusyUs: 0,
});

describe('LoadThrottle (SchedulerLoadPublisher.publish_load_stat)', () => {
  it('lets a decode step through once per publish interval, a forced one always', () => {
    const t = new LoadThrottle(3);
    const decoded = [1, 2, 3, 4, 5, 6].map((n) => t.admit(stat(n), false, n * 2000));
    expect(decoded).toEqual([false, false, true, false, false, true]);
    expect(t.admit(stat(7), true, 20_000)).toBe(true);
  });

  it('re-sends an unchanged stat at most once a second (the heartbeat), a changed one at once', () => {
    const t = new LoadThrottle(1);
    expect(t.admit(stat(1), true, 0)).toBe(true);
    expect(t.admit(stat(1), true, 999)).toBe(false);
    expect(t.admit(stat(2), true, 1000)).toBe(true);
    expect(t.admit(stat(2), true, 1500)).toBe(false);
    expect(t.admit(stat(2), true, 2000)).toBe(true);
  });
});
