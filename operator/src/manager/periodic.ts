// A pass run every period off the reconcile loop (cache health, wake): never
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
