// The runtime's own load, pushed: SGLang 0.5.23's load publisher
// (--load-publish-endpoint; scheduler_components/load_publisher.py) sends
// [b"load", seq, msgpack LoadStat] on a PUB socket per data-parallel rank, a
// changed stat at once and an unchanged one at least once a second. Every
// gateway replica subscribes, so all see the same queues and KV usage within
// a scheduler step, where the /metrics scrape is a second old. A rank silent
// for staleAfterMs (three heartbeats) no longer counts: the scrape answers.
//
// LoadStat is msgspec's tagged array: ["LoadStat", num_running_reqs,
// num_waiting_reqs, num_tokens, max_total_num_tokens, attn_dp_rank,
// num_waiting_uncached_tokens, num_total_tokens, max_running_requests,
// total_prefill_uncached_tokens, total_prefill_busy_us] in 0.5.23; the first
// six are the older shape, so the uncached count is optional. A publisher
// sends at most once per five scheduler calls (LOAD_PUBLISH_INTERVAL), a
// changed stat then at once: within a few steps of the runtime's state.

import { Decoder } from '@msgpack/msgpack';
import { Subscriber } from 'zeromq';
import { monotonicClock, type Clock } from '#kube/clock.ts';
import type { ModelRoute } from '../routing/table.ts';
import type { RuntimeLoad } from './book.ts';

export interface LoadStatValue {
  readonly running: number;
  readonly waiting: number;
  readonly tokens: number;
  readonly maxTotalTokens: number;
  readonly rank: number;
  /** Uncached prompt tokens waiting for prefill (0.5.23's 7th field), when the publisher sends it. */
  readonly waitingUncachedTokens?: number;
}

const decoder = new Decoder({ useBigInt64: false });

/** A LoadStat payload's counts; null for anything else (a newer or broken message is skipped, not fatal). */
export function decodeLoadStat(payload: Uint8Array): LoadStatValue | null {
  let v: unknown;
  try {
    v = decoder.decode(payload);
  } catch {
    return null;
  }
  if (!Array.isArray(v) || v[0] !== 'LoadStat' || v.length < 6) return null;
  const [running, waiting, tokens, maxTotalTokens, rank] = v.slice(1, 6).map(Number);
  const counts = [running, waiting, tokens, maxTotalTokens, rank];
  if (!counts.every((n) => n !== undefined && Number.isFinite(n) && n >= 0)) return null;
  const uncached = v.length > 6 ? Number(v[6]) : undefined;
  const waitingUncached =
    uncached !== undefined && Number.isFinite(uncached) && uncached >= 0 ? uncached : undefined;
  return {
    ...(waitingUncached !== undefined ? { waitingUncachedTokens: waitingUncached } : {}),
    running: running as number,
    waiting: waiting as number,
    tokens: tokens as number,
    maxTotalTokens: maxTotalTokens as number,
    rank: rank as number,
  };
}

interface Rank {
  readonly socket: Subscriber;
  stat: LoadStatValue | undefined;
  at: number;
}

interface Subscription {
  readonly key: string;
  readonly ranks: Rank[];
}

const MAX_LOAD_MESSAGE_BYTES = 64 * 1024;

export class RuntimeLoadEvents {
  readonly #clock: Clock;
  readonly #staleAfterMs: number;
  readonly #subs = new Map<string, Subscription>();

  constructor(opts: { clock?: Clock; staleAfterMs?: number } = {}) {
    this.#clock = opts.clock ?? monotonicClock;
    this.#staleAfterMs = opts.staleAfterMs ?? 3000;
  }

  /** Follow the table: subscribe to every endpoint that publishes load, drop the ones gone. */
  sync(routes: readonly ModelRoute[]): void {
    const seen = new Set<string>();
    for (const e of routes.flatMap((r) => r.endpoints)) {
      const ev = e.events;
      if (!ev?.load) continue;
      seen.add(e.id);
      const key = JSON.stringify([e.generation ?? '', ev.load, ev.loadTopic]);
      const current = this.#subs.get(e.id);
      if (current?.key === key) continue;
      if (current) this.#closeSub(current);
      const ranks = ev.load.map((address) => this.#open(address, ev.loadTopic ?? 'load'));
      this.#subs.set(e.id, { key, ranks });
    }
    for (const [id, sub] of this.#subs)
      if (!seen.has(id)) {
        this.#closeSub(sub);
        this.#subs.delete(id);
      }
  }

  /** The endpoint's load when every rank reported recently: queues and running summed, KV usage of the busiest rank. */
  get(endpointId: string): RuntimeLoad | undefined {
    const sub = this.#subs.get(endpointId);
    if (!sub) return undefined;
    const now = this.#clock.now();
    let queued = 0;
    let usage = 0;
    let running = 0;
    let uncached: number | undefined = 0;
    for (const r of sub.ranks) {
      if (!r.stat || now - r.at > this.#staleAfterMs) return undefined;
      queued += r.stat.waiting;
      running += r.stat.running;
      uncached =
        uncached === undefined || r.stat.waitingUncachedTokens === undefined
          ? undefined
          : uncached + r.stat.waitingUncachedTokens;
      if (r.stat.maxTotalTokens > 0) usage = Math.max(usage, r.stat.tokens / r.stat.maxTotalTokens);
    }
    return {
      queued,
      tokenUsage: usage,
      running,
      ...(uncached !== undefined ? { waitingUncachedTokens: uncached } : {}),
    };
  }

  close(): void {
    for (const sub of this.#subs.values()) this.#closeSub(sub);
    this.#subs.clear();
  }

  #open(address: string, topic: string): Rank {
    // A LoadStat is a few hundred bytes; libzmq drops a publisher that sends more than this.
    const socket = new Subscriber({ linger: 0, maxMessageSize: MAX_LOAD_MESSAGE_BYTES });
    socket.connect(address);
    socket.subscribe(topic);
    const rank: Rank = { socket, stat: undefined, at: 0 };
    void (async () => {
      try {
        for await (const frames of socket) {
          const stat = frames[2] ? decodeLoadStat(frames[2]) : null;
          if (stat) {
            rank.stat = stat;
            rank.at = this.#clock.now();
          }
        }
      } catch {
        // closed
      }
    })();
    return rank;
  }

  #closeSub(sub: Subscription): void {
    for (const r of sub.ranks) r.socket.close();
  }
}
