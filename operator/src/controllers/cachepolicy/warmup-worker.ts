// Warm-ups off the reconcile loop. The CachePolicy reconciler starts a job and
// returns; the worker runs at most `concurrency` jobs at once (the rest wait
// in order), never two of one key (a container instance) at once, and when a
// job settles records its outcome in memory and asks for a reconcile of its
// policy, which writes the outcome to status (plan.ts). Jobs end early when
// their policy no longer wants them (retain), when it is deleted (cancel), or
// when the operator stops (stop, or the signal given at construction).
// Outcomes here are a cache of what status will say: losing them (a restart)
// only means a warm-up runs again.
import type { ObjectKey } from '#kube/objects.ts';
import { formatKey } from '#kube/objects.ts';
import type { WarmupJobState } from './plan.ts';
import type { WarmupTarget } from './warmup.ts';
import type { WarmupOutcome } from './warmup-send.ts';

/** Runs one warm-up; resolves to its outcome. Must honour `signal`. */
export type WarmupRun = (
  target: WarmupTarget,
  documents: readonly string[],
  signal: AbortSignal,
) => Promise<WarmupOutcome>;

export interface WarmupWorkerOptions {
  run: WarmupRun;
  /** A job of this policy settled: queue its key for reconcile. */
  onSettled: (policy: ObjectKey) => void;
  concurrency?: number;
  /** Wall clock, epoch milliseconds (outcomes go to status as times). */
  now?: () => number;
  /** Aborted: the worker stops (the manager's stopSignal). */
  signal?: AbortSignal;
}

interface Job {
  policy: string;
  key: ObjectKey;
  target: WarmupTarget;
  documents: readonly string[];
  state: WarmupJobState;
  /** Failed attempts before this one. */
  failures: number;
  abort: AbortController;
  done?: Promise<void>;
}

export class WarmupWorker {
  readonly #opts: WarmupWorkerOptions;
  readonly #now: () => number;
  readonly #concurrency: number;
  /** By instance key: queued, running and settled jobs. */
  readonly #jobs = new Map<string, Job>();
  readonly #queue: string[] = [];
  #running = 0;
  #stopped = false;

  constructor(opts: WarmupWorkerOptions) {
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
    this.#concurrency = Math.max(1, opts.concurrency ?? 4);
    opts.signal?.addEventListener('abort', () => void this.stop(), { once: true });
  }

  /** Starts (queues) a warm-up; false when one of this key is queued or running, or the worker stopped. */
  start(policy: ObjectKey, target: WarmupTarget, documents: readonly string[]): boolean {
    if (this.#stopped) return false;
    const prev = this.#jobs.get(target.key);
    if (prev && (prev.state.state === 'queued' || prev.state.state === 'running')) return false;
    const failures = prev?.state.state === 'failed' ? prev.state.failures : 0;
    this.#jobs.set(target.key, {
      policy: formatKey(policy),
      key: policy,
      target,
      documents,
      state: { state: 'queued', since: this.#now() },
      failures,
      abort: new AbortController(),
    });
    this.#queue.push(target.key);
    this.#pump();
    return true;
  }

  /** The jobs of a policy, by instance key, as the planner reads them. */
  jobsOf(policy: ObjectKey): Map<string, WarmupJobState> {
    const p = formatKey(policy);
    const out = new Map<string, WarmupJobState>();
    for (const [k, j] of this.#jobs) if (j.policy === p) out.set(k, j.state);
    return out;
  }

  /** Drops the policy's jobs not in `keep`, aborting those that run. */
  retain(policy: ObjectKey, keep: ReadonlySet<string>): void {
    const p = formatKey(policy);
    for (const [k, j] of this.#jobs) if (j.policy === p && !keep.has(k)) this.#drop(k, j);
  }

  /** The policy is gone: all its jobs end. */
  cancel(policy: ObjectKey): void {
    this.retain(policy, new Set());
  }

  /** Jobs queued or running (tests, metrics). */
  active(): number {
    return [...this.#jobs.values()].filter((j) => j.state.state === 'queued' || j.state.state === 'running')
      .length;
  }

  /** Aborts everything and waits for running jobs to return. */
  async stop(): Promise<void> {
    this.#stopped = true;
    const running = [...this.#jobs.values()].flatMap((j) => (j.done ? [j.done] : []));
    for (const [k, j] of this.#jobs) this.#drop(k, j);
    await Promise.all(running);
  }

  #drop(k: string, j: Job): void {
    j.abort.abort();
    this.#jobs.delete(k);
    const i = this.#queue.indexOf(k);
    if (i >= 0) this.#queue.splice(i, 1);
  }

  #pump(): void {
    while (this.#running < this.#concurrency && this.#queue.length > 0) {
      const k = this.#queue.shift();
      const job = k === undefined ? undefined : this.#jobs.get(k);
      if (!k || !job) continue;
      this.#running++;
      job.state = { state: 'running', since: this.#now() };
      job.done = this.#run(k, job).finally(() => {
        this.#running--;
        this.#pump();
      });
    }
  }

  async #run(k: string, job: Job): Promise<void> {
    let outcome: WarmupOutcome;
    try {
      outcome = await this.#opts.run(job.target, job.documents, job.abort.signal);
    } catch (err) {
      outcome = { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    // Dropped meanwhile (retain, cancel, stop): nobody wants the outcome.
    if (this.#jobs.get(k) !== job || job.abort.signal.aborted) return;
    const at = this.#now();
    if (outcome.ok) {
      const { ok: _ok, ...done } = outcome;
      job.state = { state: 'succeeded', at, documents: job.documents.length, ...done };
    } else job.state = { state: 'failed', at, error: outcome.error, failures: job.failures + 1 };
    this.#opts.onSettled(job.key);
  }
}
