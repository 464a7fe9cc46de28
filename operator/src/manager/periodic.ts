// A pass run every period off the reconcile loop (cache health, wake, fetch progress): never
// two at once (a slow pass, a hung peer, is not overlapped by the next), a
// failure logged and the next pass run, nothing after the signal aborts.
import type { Logger } from '#kube/logger.ts';

export class PeriodicPass {
  readonly #periodMs: number;
  readonly #pass: () => Promise<void>;
  readonly #logger: Logger;
  readonly #what: string;
  readonly #signal: AbortSignal;
  #timer: NodeJS.Timeout | undefined;
  #busy = false;

  constructor(opts: {
    what: string;
    periodMs: number;
    pass: () => Promise<void>;
    logger: Logger;
    signal: AbortSignal;
  }) {
    this.#what = opts.what;
    this.#periodMs = opts.periodMs;
    this.#pass = opts.pass;
    this.#logger = opts.logger;
    this.#signal = opts.signal;
    opts.signal.addEventListener('abort', () => this.stop(), { once: true });
  }

  start(): void {
    if (this.#timer || this.#signal.aborted) return;
    this.#timer = setInterval(() => void this.#tick(), this.#periodMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #tick(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      await this.#pass();
    } catch (err) {
      this.#logger.error(`${this.#what} failed`, { error: (err as Error).message });
    } finally {
      this.#busy = false;
    }
  }
}

export interface LeaderPassOptions {
  /** What the pass is, for the log line of a failed one ("cache health pass"). */
  readonly what: string;
  readonly periodMs: number;
  /** Only the leader measures: its reconciles are the only ones that write what it found. */
  readonly isLeader: () => boolean;
  readonly logger: Logger;
  readonly signal: AbortSignal;
}

/**
 * A worker that runs a pass every period while this operator leads (cache health, wake,
 * fetch progress). A follower forgets what it measured: memory across passes is only a cache
 * of the cluster, so a new leader measures again and the status written meanwhile stands.
 */
export abstract class LeaderPeriodicWorker {
  readonly #isLeader: () => boolean;
  readonly #periodic: PeriodicPass;

  constructor(opts: LeaderPassOptions) {
    this.#isLeader = opts.isLeader;
    this.#periodic = new PeriodicPass({ ...opts, pass: () => this.pass() });
  }

  start(): void {
    this.#periodic.start();
  }

  stop(): void {
    this.#periodic.stop();
  }

  /** One pass (the timer's; tests call it directly): the work while leading, else forget. */
  async pass(): Promise<void> {
    if (!this.#isLeader()) return this.forget();
    await this.lead();
  }

  /** The work of one pass, run only while this operator leads. */
  protected abstract lead(): Promise<void>;

  /** Drop what earlier passes measured: this operator does not lead (any more). */
  protected abstract forget(): void;
}
