import { describe, expect, it } from 'vitest';
import { PriorityQueue } from './priority-queue.ts';

function drain<T>(q: PriorityQueue<T>): T[] {
  const out: T[] = [];
  for (let v = q.shift(); v !== undefined; v = q.shift()) out.push(v);
  return out;
}

describe('PriorityQueue', () => {
  it('shifts the highest priority first, oldest first within one', () => {
    const q = new PriorityQueue<string>();
    for (const [v, p] of [
      ['a', 0],
      ['b', 2],
      ['c', -1],
      ['d', 2],
      ['e', 0],
    ] as const)
      q.push(v, p);
    expect(q.size).toBe(5);
    expect(q.lowestPriority).toBe(-1);
    expect(drain(q)).toEqual(['b', 'd', 'a', 'e', 'c']);
    expect(q.size).toBe(0);
    expect(q.lowestPriority).toBeUndefined();
  });

  it('pops the newest of the lowest priority', () => {
    const q = new PriorityQueue<string>();
    q.push('low-old', 1);
    q.push('high', 3);
    q.push('low-new', 1);
    expect(q.popNewestOfLowest()).toBe('low-new');
    expect(q.popNewestOfLowest()).toBe('low-old');
    expect(q.lowestPriority).toBe(3);
    expect(q.size).toBe(1);
  });

  it('removes an entry from the middle once, and closes an emptied level', () => {
    const q = new PriorityQueue<string>();
    const a = q.push('a', 5);
    const b = q.push('b', 5);
    q.push('c', 5);
    const lone = q.push('lone', 1);
    expect(q.remove(b)).toBe(true);
    expect(q.remove(b)).toBe(false);
    expect(q.remove(lone)).toBe(true);
    expect(q.lowestPriority).toBe(5);
    expect(q.size).toBe(2);
    expect(drain(q)).toEqual(['a', 'c']);
    expect(q.remove(a)).toBe(false);
  });

  it('refuses entries it does not hold', () => {
    const q = new PriorityQueue<string>();
    const other = new PriorityQueue<string>();
    q.push('mine', 0);
    const theirs = other.push('theirs', 0);
    expect(q.remove(theirs)).toBe(false);
    expect(q.remove({ value: 'mine', priority: 0 })).toBe(false);
    expect(q.size).toBe(1);
    expect(other.size).toBe(1);
  });

  it('takeAll empties every level, highest first', () => {
    const q = new PriorityQueue<string>();
    const kept = q.push('x', 0);
    q.push('y', 9);
    q.push('z', 0);
    expect(q.takeAll()).toEqual(['y', 'x', 'z']);
    expect(q.size).toBe(0);
    expect(q.remove(kept)).toBe(false);
    q.push('again', 0);
    expect(drain(q)).toEqual(['again']);
  });
});
