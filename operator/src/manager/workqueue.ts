// A rate-limited work queue with client-go semantics:
// - a key is queued at most once (dirty set), however often it is added;
// - a key is never handed to two workers at once (processing set); a key added while it
//   is processed is queued again when done() is called for it;
// - addAfter() delays a key (the earliest pending time wins), addRateLimited() delays it
//   by the rate limiter, forget() resets its failures (call it only on success);
// - shutDown() stops intake, drain() waits for in-flight keys to be done.
// Time comes from an injected Clock so unit tests run in fake time.
import type { Clock, Timer } from '#kube/clock.ts';
import { systemClock } from '#kube/clock.ts';
import type { RateLimiter } from './rate-limiter.ts';
import { createDefaultControllerRateLimiter } from './rate-limiter.ts';

export interface QueueMetrics {
  add(): void;
  depth(n: number): void;
  // Seconds a key waited in the queue before a worker took it.
  latency(seconds: number): void;
  // Seconds a worker spent on a key.
  workDuration(seconds: number): void;
  retry(): void;
}

export const noopQueueMetrics: QueueMetrics = {
  add: () => undefined,
  depth: () => undefined,
  latency: () => undefined,
  workDuration: () => undefined,
  retry: () => undefined,
};

export interface WorkQueueOptions<K> {
  clock?: Clock;
  rateLimiter?: RateLimiter<K>;
  metrics?: QueueMetrics;
}

export class WorkQueue<K = string> {
  private readonly clock: Clock;
  private readonly rateLimiter: RateLimiter<K>;
  private readonly metrics: QueueMetrics;
  private queue: K[] = [];
  private head = 0;
  private readonly dirty = new Set<K>();
  private readonly processing = new Map<K, number>(); // key → start time
  private readonly addedAt = new Map<K, number>();
  private readonly waiting = new Map<K, { readyAt: number; timer: Timer }>();
  private readonly getters: ((key: K | undefined) => void)[] = [];
  private drainers: (() => void)[] = [];
  private shuttingDown = false;

  constructor(opts: WorkQueueOptions<K> = {}) {
    this.clock = opts.clock ?? systemClock;
    this.rateLimiter = opts.rateLimiter ?? createDefaultControllerRateLimiter<K>(this.clock);
    this.metrics = opts.metrics ?? noopQueueMetrics;
  }

  add(key: K): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.metrics.add();
    this.dirty.add(key);
    this.addedAt.set(key, this.clock.now());
    // Picked up again by done(): never two workers on one key.
    if (this.processing.has(key)) return;
    this.enqueue(key);
  }

  addAfter(key: K, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) return this.add(key);
    const readyAt = this.clock.now() + delayMs;
    const pending = this.waiting.get(key);
    if (pending && pending.readyAt <= readyAt) return;
    if (pending) pending.timer.cancel();
    const timer = this.clock.setTimer(delayMs, () => {
      this.waiting.delete(key);
      this.add(key);
    });
    this.waiting.set(key, { readyAt, timer });
  }

  addRateLimited(key: K): void {
    if (this.shuttingDown) return;
    this.metrics.retry();
    this.addAfter(key, this.rateLimiter.when(key));
  }

  forget(key: K): void {
    this.rateLimiter.forget(key);
  }

  numRequeues(key: K): number {
    return this.rateLimiter.numRequeues(key);
  }

  // The next key to process, or undefined once the queue is shut down.
  get(): Promise<K | undefined> {
    const key = this.dequeue();
    if (key !== undefined) return Promise.resolve(key);
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.getters.push(resolve));
  }

  done(key: K): void {
    const started = this.processing.get(key);
    if (started === undefined) return;
    this.processing.delete(key);
    this.metrics.workDuration((this.clock.now() - started) / 1000);
    if (this.dirty.has(key) && !this.shuttingDown) this.enqueue(key);
    if (this.processing.size === 0) {
      const drainers = this.drainers;
      this.drainers = [];
      drainers.forEach((d) => d());
    }
  }

  len(): number {
    return this.queue.length - this.head;
  }

  isProcessing(key: K): boolean {
    return this.processing.has(key);
  }

  // Keys being processed and since when (for the unfinished-work gauges).
  inFlight(): ReadonlyMap<K, number> {
    return this.processing;
  }

  isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  // Stops intake: adds are ignored, delayed keys and queued keys are dropped and waiting
  // workers get undefined. Dropping is safe because reconciles are level-triggered: the
  // next instance (or this one, restarted) lists every object and enqueues it again.
  shutDown(): void {
    if (this.shuttingDown) return;
    this.shuttingDown = true;
    for (const { timer } of this.waiting.values()) timer.cancel();
    this.waiting.clear();
    this.queue = [];
    this.head = 0;
    this.dirty.clear();
    this.addedAt.clear();
    this.metrics.depth(0);
    for (const g of this.getters.splice(0)) g(undefined);
  }

  // Resolves when no key is being processed.
  drain(): Promise<void> {
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainers.push(resolve));
  }

  async shutDownWithDrain(): Promise<void> {
    this.shutDown();
    await this.drain();
  }

  private enqueue(key: K): void {
    const getter = this.getters.shift();
    if (getter) {
      this.queue.push(key);
      getter(this.dequeue());
      return;
    }
    this.queue.push(key);
    this.metrics.depth(this.len());
  }

  private dequeue(): K | undefined {
    if (this.head >= this.queue.length) return undefined;
    const key = this.queue[this.head] as K;
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    const now = this.clock.now();
    this.metrics.depth(this.len());
    this.metrics.latency((now - (this.addedAt.get(key) ?? now)) / 1000);
    this.addedAt.delete(key);
    this.processing.set(key, now);
    this.dirty.delete(key);
    return key;
  }
}

// Runs `concurrency` workers until the queue shuts down; each takes a key, awaits
// process(key) and marks it done. process() decides forget/addRateLimited/addAfter.
// Resolves when every worker has finished its last key.
export async function runWorkers<K>(
  queue: WorkQueue<K>,
  concurrency: number,
  process: (key: K) => Promise<void>,
  onError: (err: unknown, key: K) => void = () => undefined,
): Promise<void> {
  const worker = async (): Promise<void> => {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      try {
        await process(key);
      } catch (err) {
        // process() owns retries; a throw here must not kill the worker.
        onError(err, key);
      } finally {
        queue.done(key);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
}
