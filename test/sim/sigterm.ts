// SIGTERM as SGLang 0.5.23 takes it (managers/tokenizer_manager.py):
// SignalHandler.sigterm_handler only sets gracefully_exit. From then /ready,
// /health and /health_generate answer 503 (entrypoints/http_server.py), but
// generation requests are still accepted and served. sigterm_watchdog, a loop
// started with the server that wakes every 5 s, sees the flag at its next wake
// and exits the process at the first wake that finds no request left
// (len(rid_to_state) == 0). So whoever keeps sending keeps it alive, and a
// runtime sent nothing new exits on its own within one period of going idle.
// Time here is the simulator's model time, as every other period it keeps.

import type { Clock } from './clock.ts';

/** sigterm_watchdog's asyncio.sleep(5). */
export const SIGTERM_WATCHDOG_PERIOD_MS = 5_000;

/** An answer being written (http.ServerResponse): 'close' once it ended or its client went away. */
export interface OpenAnswer {
  once(event: 'close', listener: () => void): unknown;
}

export interface WatchdogLogger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
}

export class SigtermWatchdog {
  readonly #clock: Clock;
  readonly #startedAt: number;
  readonly #log: WatchdogLogger;
  #open = 0;
  #exiting: Promise<void> | undefined;
  #stopped = false;

  constructor(clock: Clock, log: WatchdogLogger) {
    this.#clock = clock;
    this.#startedAt = clock.now();
    this.#log = log;
  }

  /** SIGTERM was received: readiness and health answer 503 from now on. */
  get gracefullyExit(): boolean {
    return this.#exiting !== undefined;
  }

  /** Requests the tokenizer manager holds (rid_to_state): generations and health checks being answered. */
  get open(): number {
    return this.#open;
  }

  /** One such request, from its arrival until its answer closes (ended, or the client gone). */
  track(res: OpenAnswer): void {
    this.#open++;
    res.once('close', () => this.#open--);
  }

  /** SIGTERM: resolves at the first wake of the watchdog that finds no request left. */
  terminate(): Promise<void> {
    if (this.#exiting) return this.#exiting;
    this.#log.warn('SIGTERM received. Draining requests and shutting down...');
    // The loop wakes on its own period since the server started, not since the signal.
    const sinceStart = this.#clock.now() - this.#startedAt;
    const firstWake = SIGTERM_WATCHDOG_PERIOD_MS - (sinceStart % SIGTERM_WATCHDOG_PERIOD_MS);
    this.#exiting = new Promise((resolve) => {
      const wake = (): void => {
        if (this.#stopped) return;
        if (this.#open === 0) return resolve();
        this.#log.info('Gracefully exiting...', { remaining: this.#open });
        this.#clock.setTimer(SIGTERM_WATCHDOG_PERIOD_MS, wake);
      };
      this.#clock.setTimer(firstWake, wake);
    });
    return this.#exiting;
  }

  /** The server closed: the watchdog wakes no more (a pending terminate() never resolves). */
  stop(): void {
    this.#stopped = true;
  }
}
