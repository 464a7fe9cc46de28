// SGLang 0.5.23's runtime-load PUB socket (scheduler_components/
// load_publisher.py), opted in by --load-publish-endpoint:
//
// - one PUB socket bound at the resolved range's base + DP rank, high water
//   mark 8, linger 0; messages [ "load", seq (8 bytes, big endian), LoadStat ]
//   with their own sequence from 0 (no replay: a gauge needs none);
// - cadence (LoadThrottle): every prefill batch and every idle pass publish
//   ("force"); decode batches publish once per --load-snapshot-publish-interval
//   calls; an unchanged stat is re-sent at most once a second (the
//   heartbeat), a changed one at once.

import { Publisher } from 'zeromq';
import { buildFrames, encodeLoadStat, type LoadStat } from './kv-event-codec.ts';
import { LOAD_TOPIC } from './kv-events-config.ts';

export const LOAD_PUBLISH_HEARTBEAT_MS = 1000;
const LOAD_PUB_HWM = 8;

/** Whether a load stat goes out now. Pure: the caller passes monotonic `nowMs`. */
export class LoadThrottle {
  readonly #interval: number;
  #calls = 0;
  #lastKey: string | null = null;
  #lastAt = Number.NEGATIVE_INFINITY;

  constructor(publishInterval: number) {
    this.#interval = Math.max(1, publishInterval);
  }

  /** Counts this call; true when `stat` should be sent (then it is taken as sent). */
  admit(stat: LoadStat, force: boolean, nowMs: number): boolean {
    this.#calls++;
    if (!force && this.#calls < this.#interval) return false;
    this.#calls = 0;
    // attn_dp_rank is constant per socket; everything else is a count.
    const key = JSON.stringify({ ...stat, attnDpRank: 0 });
    if (key === this.#lastKey && nowMs - this.#lastAt < LOAD_PUBLISH_HEARTBEAT_MS) return false;
    this.#lastKey = key;
    this.#lastAt = nowMs;
    return true;
  }
}

export class LoadPublisher {
  readonly #pub: Publisher;
  #nextSeq = 0;
  #sending: Promise<void> = Promise.resolve();
  #closed = false;

  private constructor() {
    this.#pub = new Publisher({ sendHighWaterMark: LOAD_PUB_HWM, linger: 0 });
  }

  static async open(endpoint: string): Promise<LoadPublisher> {
    const p = new LoadPublisher();
    try {
      await p.#pub.bind(endpoint);
    } catch (e) {
      p.close();
      throw new Error(`cannot bind the load socket at ${endpoint}`, { cause: e });
    }
    return p;
  }

  /** The bound address (its port when bound on port 0). */
  get boundEndpoint(): string | null {
    return this.#pub.lastEndpoint;
  }

  /** Send one stat after the previous one (PUB sheds at the high water mark; a lost reading is superseded). */
  publish(stat: LoadStat): void {
    if (this.#closed) return;
    const frames = buildFrames(LOAD_TOPIC, this.#nextSeq++, encodeLoadStat(stat));
    this.#sending = this.#sending
      .then(() => (this.#closed ? undefined : this.#pub.send(frames)))
      .catch(() => {
        // Best effort, as SGLang's: routers fall back to their own in-flight counts.
      });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#pub.close();
  }
}
