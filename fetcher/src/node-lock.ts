// One fetcher at a time per node cache directory (ADR 0019): pods of one Deployment landing
// on the same node share its hostPath cache, and two fetchers writing the same files would
// spoil each other's partial files. proper-lockfile's lock is a directory made atomically
// next to the cache, its mtime refreshed while held; a holder that died (a killed pod, a lost
// node's reboot) leaves a lock that goes stale and is taken over.
import lockfile from 'proper-lockfile';

export interface NodeLockOptions {
  /** A lock not refreshed for this long is a dead holder's (default 60 s). */
  readonly staleMs?: number;
  /** How often a waiter looks again (default 2 s). */
  readonly pollMs?: number;
  /** Called once when the lock is held by another fetcher and this one waits. */
  readonly onWait?: () => void;
}

/** Waits for the lock at `lockPath` (for directory `dir`) and holds it; the result releases it. */
export async function holdNodeLock(
  dir: string,
  lockPath: string,
  opts: NodeLockOptions = {},
): Promise<() => Promise<void>> {
  const stale = opts.staleMs ?? 60_000;
  const poll = opts.pollMs ?? 2_000;
  let waited = false;
  for (;;) {
    try {
      return await lockfile.lock(dir, {
        lockfilePath: lockPath,
        realpath: false,
        stale,
        // Refreshed well inside the stale bound (the library's floor is 1 s).
        update: Math.max(1_000, Math.floor(stale / 4)),
      });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ELOCKED') throw e;
      if (!waited) opts.onWait?.();
      waited = true;
      await new Promise((resolve) => setTimeout(resolve, poll));
    }
  }
}
