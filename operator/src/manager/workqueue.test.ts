import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '#kube/clock.ts';
import { createExponentialFailureRateLimiter } from './rate-limiter.ts';
import { WorkQueue, runWorkers } from './workqueue.ts';
import type { QueueMetrics } from './workqueue.ts';

// A gate a test opens by hand: processing "takes time" without sleeping.
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

describe('WorkQueue', () => {
  beforeEach(() => void vi.useFakeTimers({ now: 0 }));
  afterEach(() => void vi.useRealTimers());

  it('de-duplicates a key added many times before it is taken', async () => {
    const q = new WorkQueue<string>();
    q.add('a');
    q.add('b');
    q.add('a');
    q.add('a');
    expect(q.len()).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
    expect(q.len()).toBe(0);
  });

  it('never hands one key to two workers, and runs a key added during processing again after', async () => {
    const q = new WorkQueue<string>();
    const running = new Set<string>();
    const seen: string[] = [];
    let overlap = false;
    const gates = [gate(), gate()];
    let call = 0;
    const workers = runWorkers(q, 4, async (key) => {
      if (running.has(key)) overlap = true;
      running.add(key);
      seen.push(key);
      await gates[call++]?.wait;
      running.delete(key);
    });
    q.add('a');
    await flush();
    expect(q.isProcessing('a')).toBe(true);
    // Added twice while processing: queued once, and not handed to the 3 idle workers.
    q.add('a');
    q.add('a');
    await flush();
    expect(seen).toEqual(['a']);
    gates[0]?.open();
    await flush();
    expect(seen).toEqual(['a', 'a']);
    gates[1]?.open();
    await flush();
    expect(seen).toEqual(['a', 'a']);
    expect(overlap).toBe(false);
    q.shutDown();
    await workers;
  });

  it('bounds concurrency to the number of workers', async () => {
    const q = new WorkQueue<string>();
    let active = 0;
    let peak = 0;
    const g = gate();
    const workers = runWorkers(q, 3, async () => {
      active++;
      peak = Math.max(peak, active);
      await g.wait;
      active--;
    });
    for (const k of ['a', 'b', 'c', 'd', 'e']) q.add(k);
    await flush();
    expect(active).toBe(3);
    expect(q.len()).toBe(2);
    g.open();
    await flush();
    expect(peak).toBe(3);
    expect(q.len()).toBe(0);
    q.shutDown();
    await workers;
  });

  it('addAfter delays a key in (fake) time, and the earliest pending time wins', async () => {
    const q = new WorkQueue<string>();
    q.addAfter('a', 1000);
    q.addAfter('a', 5000); // later: ignored
    q.addAfter('b', 500);
    expect(q.len()).toBe(0);
    vi.advanceTimersByTime(499);
    expect(q.len()).toBe(0);
    vi.advanceTimersByTime(1);
    expect(await q.get()).toBe('b');
    vi.advanceTimersByTime(500);
    expect(await q.get()).toBe('a');
    vi.advanceTimersByTime(10_000);
    expect(q.len()).toBe(0);
  });

  it('grows the per-key backoff exponentially on failure and resets it only on forget', async () => {
    const q = new WorkQueue<string>({
      rateLimiter: createExponentialFailureRateLimiter({ baseDelayMs: 5, maxDelayMs: 1_000_000 }),
    });
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      const before = Date.now();
      q.addRateLimited('a');
      // The key appears exactly after its delay.
      let waited = 0;
      while (q.len() === 0 && waited < 10_000) {
        vi.advanceTimersByTime(1);
        waited++;
      }
      delays.push(Date.now() - before);
      expect(waited).toBe(delays.at(-1));
      q.done((await q.get()) as string);
    }
    expect(delays).toEqual([5, 10, 20, 40, 80]);
    expect(q.numRequeues('a')).toBe(5);
    // Another key's backoff is its own.
    expect(q.numRequeues('b')).toBe(0);
    q.forget('a');
    expect(q.numRequeues('a')).toBe(0);
  });

  it('caps the backoff at the maximum', () => {
    const rl = createExponentialFailureRateLimiter<string>({ baseDelayMs: 5, maxDelayMs: 1_000_000 });
    const delays = Array.from({ length: 40 }, () => rl.when('k'));
    expect(delays.at(-1)).toBe(1_000_000);
    expect(Math.max(...delays)).toBe(1_000_000);
  });

  it('shutDown stops intake, wakes idle workers, and drain waits for the key in flight', async () => {
    const q = new WorkQueue<string>();
    const g = gate();
    let finished = false;
    const workers = runWorkers(q, 2, async () => {
      await g.wait;
      finished = true;
    });
    q.add('a');
    q.addAfter('later', 1000);
    await flush();
    q.shutDown();
    q.add('b');
    vi.advanceTimersByTime(2000);
    expect(q.len()).toBe(0);
    let drained = false;
    const drain = q.drain().then(() => (drained = true));
    await flush();
    expect(drained).toBe(false);
    g.open();
    await drain;
    expect(finished).toBe(true);
    await workers;
    expect(await q.get()).toBeUndefined();
  });

  it('reports metrics: adds, depth, latency, work duration, retries', async () => {
    const m = { adds: 0, depth: [] as number[], latency: [] as number[], work: [] as number[], retries: 0 };
    const metrics: QueueMetrics = {
      add: () => void m.adds++,
      depth: (n) => void m.depth.push(n),
      latency: (s) => void m.latency.push(s),
      workDuration: (s) => void m.work.push(s),
      retry: () => void m.retries++,
    };
    const q = new WorkQueue<string>({ metrics, clock: systemClock });
    q.add('a');
    q.add('a');
    vi.advanceTimersByTime(250);
    const k = await q.get();
    vi.advanceTimersByTime(1500);
    q.done(k as string);
    q.addRateLimited('a');
    expect(m.adds).toBe(1);
    expect(m.depth).toEqual([1, 0]);
    expect(m.latency).toEqual([0.25]);
    expect(m.work).toEqual([1.5]);
    expect(m.retries).toBe(1);
  });
});
