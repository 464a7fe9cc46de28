// Each runtime's own word on whether it takes new requests: SGLang's /ready
// (entrypoints/http_server.py: 200 when up; 503 while starting, paused,
// unhealthy, or from SIGTERM on, when it still serves what it is sent but exits
// only once nothing is left). Every endpoint the table routes is asked every
// `intervalMs`, off the request path; a 503 marks it draining (standing.ts),
// a 200 clears that. No answer, or another status (a runtime without /ready),
// changes nothing: connection failures are the request path's to see. Each
// endpoint has at most one question out, so a hung runtime delays no other's.
// Unlike the /metrics scrape (runtime-load.ts) it parses nothing and needs no
// --enable-metrics, and a slow metrics render does not hold it up. No API
// key: SGLang leaves /ready open (utils/auth.py; test/sim/auth.ts).

import { request } from 'undici';
import type { Clock, Timer } from '#kube/clock.ts';
import type { RouteEndpoint, RoutingTable } from '../routing/table.ts';
import type { StandingEndpoints } from './standing.ts';

/** The HTTP status of a GET, or a rejection when there was none. */
export type ProbeStatus = (url: string, timeoutMs: number) => Promise<number>;

export const probeStatus: ProbeStatus = async (url, timeoutMs) => {
  const res = await request(url, { headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  await res.body.dump();
  return res.statusCode;
};

export interface RuntimeReadyOptions {
  readonly table: RoutingTable;
  readonly standing: StandingEndpoints;
  readonly clock: Clock;
  readonly intervalMs: number;
  /** A question unanswered this long counts as no answer (default: twice the interval). */
  readonly timeoutMs?: number;
  readonly probe?: ProbeStatus;
}

export class RuntimeReadyPoller {
  readonly #opts: RuntimeReadyOptions;
  readonly #probe: ProbeStatus;
  readonly #asking = new Set<string>();
  #timer: Timer | undefined;

  constructor(opts: RuntimeReadyOptions) {
    this.#opts = opts;
    this.#probe = opts.probe ?? probeStatus;
  }

  start(): void {
    const tick = (): void => {
      void this.pollOnce();
      this.#timer = this.#opts.clock.setTimer(this.#opts.intervalMs, tick);
    };
    this.#timer = this.#opts.clock.setTimer(this.#opts.intervalMs, tick);
  }

  stop(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  /** Asks every routed endpoint not already asked; resolves once those answers are in. */
  async pollOnce(): Promise<void> {
    const listed = new Set<string>();
    const asked: Promise<void>[] = [];
    for (const route of this.#opts.table.list())
      for (const e of route.endpoints) {
        listed.add(e.id);
        if (e.ready && !this.#asking.has(e.id)) asked.push(this.#ask(e));
      }
    this.#opts.standing.keepOnly(listed);
    await Promise.all(asked);
  }

  /** `e` as the table had it when asked: an answer of an old process marks only that process. */
  async #ask(e: RouteEndpoint): Promise<void> {
    this.#asking.add(e.id);
    try {
      const timeoutMs = this.#opts.timeoutMs ?? 2 * this.#opts.intervalMs;
      const status = await this.#probe(new URL('/ready', e.url).toString(), timeoutMs);
      if (status === 503) this.#opts.standing.markDraining(e);
      else if (status === 200) this.#opts.standing.markReady(e);
    } catch {
      // no answer: no word either way
    } finally {
      this.#asking.delete(e.id);
    }
  }
}
