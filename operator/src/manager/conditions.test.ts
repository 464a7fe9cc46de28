import { describe, expect, it } from 'vitest';
import {
  findCondition,
  isConditionTrue,
  removeCondition,
  setCondition,
  setConditions,
} from './conditions.ts';

const t0 = new Date('2026-01-01T00:00:00.123Z');
const t1 = new Date('2026-01-01T00:05:00Z');

describe('setCondition', () => {
  const ready = { type: 'Ready', status: 'False', reason: 'Starting', message: 'waiting for pods' } as const;

  it('adds a new condition stamped with now (second precision)', () => {
    const r = setCondition(undefined, ready, t0);
    expect(r.changed).toBe(true);
    expect(r.conditions).toEqual([{ ...ready, lastTransitionTime: '2026-01-01T00:00:00Z' }]);
  });

  it('moves lastTransitionTime only when status flips', () => {
    const { conditions } = setCondition([], ready, t0);
    const flipped = setCondition(conditions, { ...ready, status: 'True', reason: 'Serving' }, t1);
    expect(flipped.changed).toBe(true);
    expect(findCondition(flipped.conditions, 'Ready')?.lastTransitionTime).toBe('2026-01-01T00:05:00Z');
  });

  it.each([
    ['reason', { reason: 'StillStarting' }],
    ['message', { message: '1 of 2 pods ready' }],
    ['observedGeneration', { observedGeneration: 4 }],
  ])('a %s change without a status flip is a change that keeps lastTransitionTime', (_name, patch) => {
    const { conditions } = setCondition([], ready, t0);
    const r = setCondition(conditions, { ...ready, ...patch }, t1);
    expect(r.changed).toBe(true);
    expect(findCondition(r.conditions, 'Ready')).toEqual({
      ...ready,
      ...patch,
      lastTransitionTime: '2026-01-01T00:00:00Z',
    });
  });

  it('reports no change for an identical condition and does not touch the list', () => {
    const { conditions } = setCondition([], ready, t0);
    const r = setCondition(conditions, ready, t1);
    expect(r.changed).toBe(false);
    expect(r.conditions).toEqual(conditions);
  });

  it('keeps the order and other conditions; setConditions and removeCondition', () => {
    const r = setConditions(
      [],
      [ready, { type: 'Progressing', status: 'True', reason: 'Rolling', message: '' }],
      t0,
    );
    expect(r.conditions.map((c) => c.type)).toEqual(['Ready', 'Progressing']);
    expect(isConditionTrue(r.conditions, 'Progressing')).toBe(true);
    expect(isConditionTrue(r.conditions, 'Ready')).toBe(false);
    const again = setConditions(r.conditions, [ready], t1);
    expect(again.changed).toBe(false);
    const removed = removeCondition(r.conditions, 'Ready');
    expect(removed).toEqual({ conditions: [r.conditions[1]], changed: true });
    expect(removeCondition(removed.conditions, 'Ready').changed).toBe(false);
  });
});
