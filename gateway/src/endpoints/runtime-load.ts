// The runtime's own view of its load, scraped from each endpoint's /metrics
// (SGLang with --enable-metrics): the queue and KV usage the policies add to
// the gateway's in-flight counts. Off the request path: a timer scrapes, the
// request path reads the last value. A failed scrape forgets the endpoint's
// value (unknown counts as 0, not as its last reading). No API key is sent:
// SGLang's --api-key leaves /metrics open (utils/auth.py; test/sim/auth.ts).

import { request } from 'undici';
import { readMetricSamples } from '#sglang/metrics-text.ts';
import type { Clock, Timer } from '#kube/clock.ts';
import { readCappedText } from '#sglang/capped-text.ts';
import type { RuntimeLoad } from './book.ts';
import type { RoutingTable } from '../routing/table.ts';

const QUEUE_METRICS = new Set([
  'sglang:num_queue_reqs',
  // PD: requests waiting for a KV slot or a transfer also wait. SGLang 0.5.23's
  // names (observability/metrics_collector.py): the prefill side's waiting
  // room is its bootstrap queue; it has no prealloc queue.
  'sglang:num_prefill_bootstrap_queue_reqs',
  'sglang:num_decode_prealloc_queue_reqs',
]);

/** Sums the queues over ranks (their totals, not a priority's share); KV usage is the busiest rank's. */
export function parseRuntimeMetrics(text: string): RuntimeLoad | undefined {
  let queued: number | undefined;
  let tokenUsage: number | undefined;
  for (const { name, value, byPriority } of readMetricSamples(text, (n) => n.startsWith('sglang:'))) {
    if (QUEUE_METRICS.has(name)) {
      if (!byPriority) queued = (queued ?? 0) + value;
    } else if (name === 'sglang:token_usage') tokenUsage = Math.max(tokenUsage ?? 0, value);
  }
  if (queued === undefined && tokenUsage === undefined) return undefined;
  return { queued: queued ?? 0, ...(tokenUsage !== undefined ? { tokenUsage } : {}) };
}

export type FetchText = (url: string) => Promise<string>;

/** SGLang's /metrics is tens of KiB a rank; past this the scrape fails (the load is unknown). */
export const MAX_METRICS_BYTES = 8 * 1024 * 1024;

export async function fetchMetricsText(url: string, maxBytes = MAX_METRICS_BYTES): Promise<string> {
  const res = await request(url, { headersTimeout: 2000, bodyTimeout: 2000 });
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new Error(`status ${res.statusCode}`);
  }
  return readCappedText(res.body, maxBytes, url);
}

export class RuntimeLoadPoller {
  readonly #table: RoutingTable;
  readonly #clock: Clock;
  readonly #intervalMs: number;
  readonly #fetch: FetchText;
  #loads = new Map<string, RuntimeLoad>();
  #timer: Timer | undefined;

  constructor(opts: { table: RoutingTable; clock: Clock; intervalMs: number; fetchText?: FetchText }) {
    this.#table = opts.table;
    this.#clock = opts.clock;
    this.#intervalMs = opts.intervalMs;
    this.#fetch = opts.fetchText ?? fetchMetricsText;
  }

  get(endpointId: string): RuntimeLoad | undefined {
    return this.#loads.get(endpointId);
  }

  start(): void {
    const tick = () => {
      void this.scrapeOnce().finally(() => {
        if (this.#timer) this.#timer = this.#clock.setTimer(this.#intervalMs, tick);
      });
    };
    this.#timer = this.#clock.setTimer(this.#intervalMs, tick);
  }

  stop(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  async scrapeOnce(): Promise<void> {
    const endpoints = new Map<string, string>();
    for (const route of this.#table.list())
      for (const e of route.endpoints) if (e.ready) endpoints.set(e.id, e.url);
    const next = new Map<string, RuntimeLoad>();
    await Promise.all(
      [...endpoints].map(async ([id, url]) => {
        try {
          const load = parseRuntimeMetrics(await this.#fetch(new URL('/metrics', url).toString()));
          if (load) next.set(id, load);
        } catch {
          // unknown: counts as no runtime queue
        }
      }),
    );
    this.#loads = next;
  }
}
