// The KV event subscription of one SGLang endpoint (one DP rank's
// publisher): a SUB socket on its PUB, a DEALER on its replay ROUTER, feeding
// a KvBlockIndex through a KvEventFeed (feed.ts has the sequencing rules).
//
// - Catch-up asks the replay endpoint [empty, seq] and reads [empty, topic,
//   seq, payload] answers up to the end marker (seq -1). It runs whenever the
//   SUB completes a handshake (start-up, and every reconnect: a publisher
//   that went away may have restarted) and on a gap in the live sequence.
//   Live batches read meanwhile wait in a queue (up to MAX_QUEUED_BATCHES,
//   then in the SUB's own) and are then skipped as duplicates or applied.
//   An answer not complete within replayTimeoutMs gives up: the index
//   starts over from the next live batch (partial), and the DEALER is
//   replaced so a late answer cannot be mistaken for the next one's. Without a replay endpoint every catch-up gives up that way
//   (SGLang's replay_endpoint is optional; set it).
// - One task at a time (live batch or catch-up), in arrival order.
// - status() (and health(), its part routing reads), computed when read (no timers):
//     down         closed, or the SUB is not connected to the publisher;
//     catching-up  a replay is under way;
//     stale        expectBatch() was called (a request that stores pages
//                  was sent: SGLang publishes its BlockStored after the
//                  prefill step) and no batch came within staleAfterMs;
//     live         otherwise. `complete` says whether the index holds all
//                  the runtime caches (feed.ts); `reason` says why not.
//   SGLang publishes nothing while idle (no heartbeat on this socket), so
//   silence alone never makes an endpoint stale.
// - lagMs compares the publisher's batch timestamp (its wall clock) with
//   ours when the batch came off the socket: it includes any clock skew
//   between the hosts, and not the time the batch then waited for a
//   catch-up (that time is the catching-up state). Measured at apply, a
//   long replay left the last live batch looking late, and an idle runtime
//   sends nothing to correct it.
// - A lag describes the index while batches keep coming. Once nothing has
//   been read for lagHoldMs and nothing waits to be applied, the runtime has
//   gone quiet and the index holds all it published: lagMs is null (not
//   measured) until the next batch. Otherwise one batch read late (the
//   gateway's loop stalled behind a replay on a busy machine) kept an idle
//   runtime's index "lagging", unusable, until the runtime's next batch.

import { Dealer, Subscriber } from 'zeromq';
import { decodeSeq, encodeSeq, REPLAY_END_SEQ, type KvCacheEvent } from '#sglang/kv-events.ts';
import { monotonicClock, type Clock } from '#kube/clock.ts';
import type { KvBlockBudget } from './block-budget.ts';
import { KvBlockIndex } from './block-index.ts';
import { KvEventFeed, type FeedCounters } from './feed.ts';

export const KvIndexState = {
  live: 'live',
  catchingUp: 'catching-up',
  stale: 'stale',
  down: 'down',
} as const;
export type KvIndexState = (typeof KvIndexState)[keyof typeof KvIndexState];

/** What routing reads of an index, for every request. */
export interface KvIndexHealth {
  readonly state: KvIndexState;
  readonly reason: string;
  /** The index holds everything the runtime caches (feed.ts). */
  readonly complete: boolean;
  readonly lagMs: number | null;
}

export interface KvIndexStatus extends KvIndexHealth {
  readonly lastSeq: number | null;
  /** Clock ms when a batch was last applied. */
  readonly lastEventAt: number | null;
  readonly blocks: number;
  readonly counters: Readonly<FeedCounters> & { readonly badFrames: number };
}

export interface KvEventSubscriberOptions {
  /** The publisher's PUB endpoint, e.g. tcp://10.0.0.7:5557. */
  readonly endpoint: string;
  /** Its replay ROUTER endpoint; null when it has none (gaps then restart the index). */
  readonly replayEndpoint: string | null;
  /** The publisher's topic ('' for every message, SGLang's default). */
  readonly topic: string;
  readonly clock?: Clock;
  /** Milliseconds since the epoch (batch timestamps are the publisher's). */
  readonly wallNow?: () => number;
  readonly staleAfterMs?: number;
  /** How long a measured lag holds with nothing read since (see above). */
  readonly lagHoldMs?: number;
  readonly replayTimeoutMs?: number;
  readonly maxBlocks?: number;
  /** The gateway's budget over every index (block-budget.ts). */
  readonly budget?: KvBlockBudget;
  /** Largest ZMQ message taken (maxMessageSize); a larger one drops the connection. */
  readonly maxMessageBytes?: number;
  /** Every decoded batch's events, live or replayed, after the index applied them. */
  readonly onEvents?: (events: readonly KvCacheEvent[]) => void;
}

/**
 * A batch is one scheduler step's events: well under a MiB for a 16k-token prefill at page
 * size 1. A publisher that sends more is not SGLang's; libzmq drops its connection.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
export const DEFAULT_STALE_AFTER_MS = 10_000;
export const DEFAULT_REPLAY_TIMEOUT_MS = 5_000;
/** As long as the fleet's default lag bound (fleet.ts): a lag past it holds at least that long. */
export const DEFAULT_LAG_HOLD_MS = 5_000;
/**
 * Replay rounds in a row that apply nothing before a catch-up gives up: a restart found while
 * verifying needs a second round, from seq 0; an answer cut short needs another from where it broke.
 */
const MAX_IDLE_REPLAY_ROUNDS = 3;
/** Rounds in one catch-up, whatever they apply. */
const MAX_REPLAY_ROUNDS = 100;
const START_ATTEMPTS = 5;
/** Live batches read ahead of the work queue (a catch-up in progress); past this, reading waits. */
const MAX_QUEUED_BATCHES = 10_000;
const EMPTY = Buffer.alloc(0);

export class KvEventSubscriber {
  readonly index: KvBlockIndex;
  readonly #opts: KvEventSubscriberOptions;
  readonly #clock: Clock;
  readonly #feed: KvEventFeed;
  readonly #wallNow: () => number;
  readonly #sub: Subscriber;
  readonly #topic: Buffer;
  #dealer: Dealer | null = null;
  #work: Promise<void> = Promise.resolve();
  #loop: Promise<void> = Promise.resolve();
  #connected = false;
  #catchingUp = false;
  #closed = false;
  #expectSince: number | null = null;
  #badFrames = 0;
  #failure = '';
  /** Live batches read and not yet handled. */
  #queued = 0;
  /** The catch-up after the first handshake has ended (replayed, failed or timed out). */
  #caughtUpOnce = false;
  /** Clock ms when a live batch was last read off the socket. */
  #lastReadAt: number | null = null;

  private constructor(opts: KvEventSubscriberOptions) {
    this.#opts = opts;
    this.#clock = opts.clock ?? monotonicClock;
    this.index = new KvBlockIndex({
      ...(opts.maxBlocks === undefined ? {} : { maxBlocks: opts.maxBlocks }),
      ...(opts.budget ? { budget: opts.budget } : {}),
    });
    this.#wallNow = opts.wallNow ?? Date.now;
    this.#feed = new KvEventFeed(this.index, {
      clock: this.#clock,
      ...(opts.onEvents ? { onEvents: opts.onEvents } : {}),
    });
    this.#topic = Buffer.from(opts.topic, 'utf8');
    // The SUB's queue holds live batches while a replay is read; past it libzmq drops them (a gap).
    this.#sub = new Subscriber({
      linger: 0,
      receiveHighWaterMark: 100_000,
      maxMessageSize: opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
    });
  }

  /** Connects (asynchronously: status() is 'down' until the publisher answers) and starts applying. */
  static start(opts: KvEventSubscriberOptions): KvEventSubscriber {
    // libzmq's monitor setup is a system call a signal can interrupt (EINTR; a profiler's SIGPROF
    // does it on most starts): the gateway must not die of it, so a fresh socket tries again.
    for (let attempt = 1; ; attempt++) {
      const s = new KvEventSubscriber(opts);
      try {
        s.#open();
        return s;
      } catch (e) {
        s.#sub.close();
        s.index.release();
        if ((e as { code?: unknown }).code !== 'EINTR' || attempt >= START_ATTEMPTS) throw e;
      }
    }
  }

  #open(): void {
    this.#sub.events.on('handshake', () => {
      this.#connected = true;
      void this.#enqueue(() => this.#catchUp('connected'));
    });
    this.#sub.events.on('disconnect', () => {
      this.#connected = false;
    });
    this.#sub.connect(this.#opts.endpoint);
    this.#sub.subscribe(this.#opts.topic);
    this.#loop = this.#receiveLoop();
  }

  /** The caller sent this endpoint a request that stores pages: a batch is due (see status()). */
  expectBatch(): void {
    this.#expectSince ??= this.#clock.now();
  }

  /** The first catch-up has ended: the index holds what the replay could give (readiness.ts). */
  get caughtUpOnce(): boolean {
    return this.#caughtUpOnce;
  }

  /** status() without the counters and sequence: what routing reads for every request. */
  health(): KvIndexHealth {
    const f = this.#feed.state;
    const [state, reason] = this.#stateAndReason(f.complete ? '' : f.note || 'index incomplete');
    return { state, reason, complete: f.complete, lagMs: this.#quiet() ? null : f.lagMs };
  }

  /** Nothing read for lagHoldMs and nothing waiting: the last batch's lag no longer says anything of now. */
  #quiet(): boolean {
    const hold = this.#opts.lagHoldMs ?? DEFAULT_LAG_HOLD_MS;
    const readAt = this.#lastReadAt;
    return readAt !== null && this.#queued === 0 && !this.#catchingUp && this.#clock.now() - readAt > hold;
  }

  status(): KvIndexStatus {
    const f = this.#feed.state;
    return {
      ...this.health(),
      lastSeq: f.lastSeq,
      lastEventAt: f.lastEventAt,
      blocks: this.index.size,
      counters: {
        ...this.#feed.counters,
        blocks: { ...this.#feed.counters.blocks },
        badFrames: this.#badFrames,
      },
    };
  }

  /** Closes both sockets and waits for the work in hand to end. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#sub.close();
    this.#dealer?.close();
    this.#dealer = null;
    await this.#loop;
    await this.#work;
    this.index.release();
  }

  #stateAndReason(incomplete: string): [KvIndexState, string] {
    if (this.#closed) return [KvIndexState.down, 'closed'];
    if (this.#failure) return [KvIndexState.down, this.#failure];
    if (!this.#connected) return [KvIndexState.down, `not connected to ${this.#opts.endpoint}`];
    if (this.#catchingUp) return [KvIndexState.catchingUp, 'reading the replay'];
    const since = this.#expectSince;
    const staleAfter = this.#opts.staleAfterMs ?? DEFAULT_STALE_AFTER_MS;
    if (since !== null && this.#clock.now() - since > staleAfter)
      return [KvIndexState.stale, `no KV batch within ${staleAfter} ms of a request that stores pages`];
    return [KvIndexState.live, incomplete];
  }

  /** Runs `task` after every task queued before it; resolves when it has run (never rejects). */
  #enqueue(task: () => Promise<void>): Promise<void> {
    this.#work = this.#work
      .then(async () => {
        if (!this.#closed) await task();
      })
      .catch((e: unknown) => {
        this.#failure = `KV event handling failed: ${e instanceof Error ? e.message : String(e)}`;
      });
    return this.#work;
  }

  async #receiveLoop(): Promise<void> {
    try {
      for await (const frames of this.#sub) {
        const receivedAt = this.#wallNow();
        this.#lastReadAt = this.#clock.now();
        this.#queued++;
        const handled = this.#enqueue(() => {
          this.#queued--;
          return this.#onMessage(frames, receivedAt);
        });
        if (this.#queued >= MAX_QUEUED_BATCHES) await handled;
      }
    } catch (e) {
      if (!this.#closed) this.#failure = `receive failed: ${e instanceof Error ? e.message : String(e)}`;
    }
  }

  async #onMessage(frames: Buffer[], receivedAt: number): Promise<void> {
    const [topic, seqFrame, payload] = frames;
    const seq = seqFrame ? decodeSeq(seqFrame) : null;
    if (frames.length !== 3 || !topic?.equals(this.#topic) || !payload || seq === null || seq < 0) {
      this.#badFrames++;
      return;
    }
    this.#connected = true;
    this.#expectSince = null;
    if (this.#feed.live(seq, payload, { receivedAt }) === 'gap') {
      await this.#catchUp(`gap before seq ${seq}`);
      this.#feed.live(seq, payload, { receivedAt, afterReplay: true });
    }
  }

  async #catchUp(why: string): Promise<void> {
    // Without a replay, what was missed (while connecting, or away) is unknown: start over.
    if (this.#opts.replayEndpoint === null) {
      this.#feed.failReplay(`${why}, and no replay endpoint`);
      this.#caughtUpOnce = true;
      return;
    }
    this.#catchingUp = true;
    const applied = this.#feed.counters.applied;
    try {
      let idle = 0;
      for (let round = 0; round < MAX_REPLAY_ROUNDS && idle < MAX_IDLE_REPLAY_ROUNDS; round++) {
        const before = this.#feed.counters.applied;
        const answer = await this.#readReplay(this.#feed.beginReplay());
        if (answer === 'none') {
          this.#feed.failReplay(`${why}: the replay endpoint did not answer`);
          return;
        }
        if (this.#feed.endReplay({ cut: answer === 'cut' }) === 'done') break;
        idle = this.#feed.counters.applied === before ? idle + 1 : 0;
      }
    } finally {
      this.#catchingUp = false;
      this.#caughtUpOnce = true;
      if (this.#feed.counters.applied !== applied) this.#expectSince = null;
    }
  }

  /**
   * Sends one replay request and feeds the answers up to the end marker: 'end'; 'cut' when answers
   * came and then stopped before it, 'none' when none came (timeout, closed).
   */
  async #readReplay(from: number): Promise<'end' | 'cut' | 'none'> {
    const dealer = this.#replaySocket();
    let received = 0;
    try {
      await dealer.send([EMPTY, encodeSeq(from)]);
      for (;;) {
        const [, topic, seqFrame, payload] = await dealer.receive();
        const seq = seqFrame ? decodeSeq(seqFrame) : null;
        if (seq === REPLAY_END_SEQ) return 'end';
        received++;
        if (seq === null || !payload || !topic?.equals(this.#topic)) this.#badFrames++;
        else this.#feed.replayed(seq, payload);
      }
    } catch {
      // A timeout (or the socket closed under us): a late answer must not reach the next request.
      dealer.close();
      if (this.#dealer === dealer) this.#dealer = null;
      return received > 0 && !this.#closed ? 'cut' : 'none';
    }
  }

  #replaySocket(): Dealer {
    if (this.#dealer) return this.#dealer;
    const timeout = this.#opts.replayTimeoutMs ?? DEFAULT_REPLAY_TIMEOUT_MS;
    const dealer = new Dealer({
      linger: 0,
      // Room for a whole answer (SGLang keeps 10,000 batches): past it the ROUTER drops the rest.
      receiveHighWaterMark: 100_000,
      receiveTimeout: timeout,
      sendTimeout: timeout,
      maxMessageSize: this.#opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
    });
    dealer.connect(this.#opts.replayEndpoint ?? '');
    this.#dealer = dealer;
    return dealer;
  }
}
