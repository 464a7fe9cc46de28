import { describe, expect, it } from 'vitest';
import type { GatewayCacheReport } from '#api';
import { findWanted } from './watcher.ts';

const report = (
  instance: string,
  load: { waking?: number; queued?: number; inFlight?: number; admitted?: number },
): GatewayCacheReport => ({
  instance,
  deployments: [
    {
      deployment: 'ns/sleepy',
      decisions: 0,
      promptTokens: 0,
      predictedTokens: 0,
      ...(load.waking !== undefined ? { waking: load.waking } : {}),
      admission: {
        queued: load.queued ?? 0,
        inFlight: load.inFlight ?? 0,
        admitted: load.admitted ?? 0,
        rejected: 0,
      },
      endpoints: [],
    },
  ],
});

describe('findWanted', () => {
  it('counts a request held, queued or in flight at the read', () => {
    for (const load of [{ waking: 1 }, { queued: 1 }, { inFlight: 2 }])
      expect([...findWanted([report('a', load)], new Map()).wanted]).toEqual(['ns/sleepy']);
    expect(findWanted([report('a', {})], new Map()).wanted.size).toBe(0);
  });

  it('sees a request that came and went between two reads by the replica’s admissions', () => {
    const first = findWanted([report('a', { admitted: 7 })], new Map());
    expect(first.wanted.size).toBe(0);
    const second = findWanted([report('a', { admitted: 8 })], first.seen);
    expect([...second.wanted]).toEqual(['ns/sleepy']);
    expect(findWanted([report('a', { admitted: 8 })], second.seen).wanted.size).toBe(0);
    // A restarted replica counts from 0 again: no demand from the lower count.
    expect(findWanted([report('b', { admitted: 1 })], second.seen).wanted.size).toBe(0);
  });
});
