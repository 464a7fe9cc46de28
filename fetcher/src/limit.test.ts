import { describe, expect, it } from 'vitest';
import { forEachLimited } from './limit.ts';

/** A promise the test resolves itself: no timers. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

describe('forEachLimited', () => {
  it('runs at most `limit` at once and all of them', async () => {
    const gates = Array.from({ length: 7 }, gate);
    let running = 0;
    let most = 0;
    const done: number[] = [];
    const all = forEachLimited([0, 1, 2, 3, 4, 5, 6], 3, async (i) => {
      most = Math.max(most, ++running);
      await gates[i]!.promise;
      running--;
      done.push(i);
    });
    for (const g of [...gates].reverse()) {
      await Promise.resolve();
      g.open();
    }
    await all;
    expect(most).toBe(3);
    expect([...done].sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
  });

  it('stops taking work after a failure, aborts the running ones and throws the first error', async () => {
    const started: number[] = [];
    const aborted: number[] = [];
    const hold = gate();
    const r = forEachLimited([0, 1, 2, 3], 2, async (i, signal) => {
      started.push(i);
      if (i === 1) throw new Error('boom');
      // The running one ends when it is aborted, as a download does.
      signal.addEventListener('abort', () => {
        aborted.push(i);
        hold.open();
      });
      await hold.promise;
      if (signal.aborted) throw new Error(`aborted ${i}`);
    });
    await expect(r).rejects.toThrow('boom');
    expect(started).toEqual([0, 1]);
    expect(aborted).toEqual([0]);
  });
});
