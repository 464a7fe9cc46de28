// The node cache's lock on a real directory: one holder at a time, the next after a release,
// and a dead holder's lock taken over once stale.
import { mkdirSync, mkdtempSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { holdNodeLock } from './node-lock.ts';

const root = mkdtempSync(join(tmpdir(), 'node-lock-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('holdNodeLock', () => {
  it('lets one fetcher in at a time: the second waits, and gets in when the first releases', async () => {
    const dir = join(root, 'a');
    mkdirSync(dir);
    const lock = join(root, 'a.lock');
    const release = await holdNodeLock(dir, lock);
    let waited = false;
    let second: (() => Promise<void>) | undefined;
    const pending = holdNodeLock(dir, lock, { pollMs: 50, onWait: () => (waited = true) }).then(
      (r) => (second = r),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(waited).toBe(true);
    expect(second).toBeUndefined();
    await release();
    await pending;
    expect(second).toBeDefined();
    await second?.();
  });

  it('takes over a lock its holder left behind once it is stale', async () => {
    const dir = join(root, 'b');
    mkdirSync(dir);
    const lock = join(root, 'b.lock');
    // What a killed fetcher leaves: the lock directory, no longer refreshed.
    mkdirSync(lock);
    const old = new Date(Date.now() - 120_000);
    utimesSync(lock, old, old);
    let waited = false;
    const release = await holdNodeLock(dir, lock, {
      staleMs: 5_000,
      pollMs: 50,
      onWait: () => (waited = true),
    });
    expect(waited).toBe(false);
    await release();
  });
});
