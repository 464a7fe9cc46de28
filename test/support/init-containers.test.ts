import { describe, expect, it } from 'vitest';
import { buildInitConditions, computeBackoffMs, KUBELET_BACKOFF } from './init-containers.ts';

describe('computeBackoffMs', () => {
  it("waits as a kubelet's crash loop does: 10 s, doubling, at most 40 s", () => {
    expect([0, 1, 2, 3, 4].map((n) => computeBackoffMs(n, KUBELET_BACKOFF))).toEqual([
      10_000, 20_000, 40_000, 40_000, 40_000,
    ]);
  });
});

describe('buildInitConditions', () => {
  const then = new Date('2026-01-01T00:00:00Z');
  const now = '2026-01-01T00:01:00.000Z';
  const kwok = ['PodScheduled', 'Initialized', 'Ready', 'ContainersReady'].map((type) => ({
    type,
    status: 'True',
    lastTransitionTime: then,
  }));

  it('turns KWOK’s Ready pod not initialized, naming the init containers left, and keeps the others', () => {
    const c = buildInitConditions(kwok, ['fetch', 'after'], now);
    expect(c.find((x) => x.type === 'PodScheduled')).toEqual(kwok[0]);
    expect(c.find((x) => x.type === 'Initialized')).toEqual({
      type: 'Initialized',
      status: 'False',
      reason: 'ContainersNotInitialized',
      message: 'containers with incomplete status: [fetch after]',
      lastTransitionTime: new Date(now),
    });
    expect(c.find((x) => x.type === 'Ready')?.status).toBe('False');
    expect(c.find((x) => x.type === 'ContainersReady')?.status).toBe('False');
  });

  it('moves a transition time only when the status changes', () => {
    const pending = buildInitConditions(kwok, ['fetch'], now);
    const still = buildInitConditions(pending, ['fetch'], '2026-01-01T00:02:00.000Z');
    expect(still.find((x) => x.type === 'Ready')?.lastTransitionTime).toEqual(new Date(now));
    const done = buildInitConditions(still, [], '2026-01-01T00:03:00.000Z');
    expect(done.find((x) => x.type === 'Ready')).toEqual({
      type: 'Ready',
      status: 'True',
      lastTransitionTime: new Date('2026-01-01T00:03:00.000Z'),
    });
  });
});
