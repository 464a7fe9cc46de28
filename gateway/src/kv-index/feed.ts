// One publisher's numbered KV event batches, applied to a KvBlockIndex in
// sequence: the decisions of the subscriber, without its sockets.
//
// SGLang's publisher numbers batches 0, 1, 2, ... from its start and keeps
// the last buffer_steps (10,000 by default) for replay. The feed:
//
// - applies a live batch whose seq is the next one; a later seq is a gap
//   (live() says 'gap': the caller asks the replay endpoint, then offers the
//   batch again with afterReplay, which adopts it if the replay did not close
//   the gap);
// - skips a live batch it already applied (same seq, same bytes: one that
//   arrived again after a replay); an earlier seq with other bytes means the
//   publisher restarted: its cache is gone, so the index is dropped;
// - asks a replay from its last seq, not the one after: the first answer
//   must be the very batch it applied last (a SHA-1 of the bytes), which
//   tells a restarted publisher that has since counted past our seq from the
//   same one. Answers that start later mean the buffer rolled over;
// - a hole later in an answer is not a roll-over: the publisher's ROUTER
//   drops what its pipe to us cannot take (libzmq's high-water mark; SGLang
//   sends its whole buffer in one loop), so the round stops there and
//   another asks from the last batch applied ('again'). So does an answer
//   whose end marker never came (endReplay({ cut: true })).
// - knows the index is complete (exactly the runtime's cache) when it has
//   applied every batch since seq 0, or since an AllBlocksCleared (a flush,
//   or a runtime's construction); after events were lost beyond the
//   replay's reach it starts over from an empty index and says so, until
//   the next AllBlocksCleared. An incomplete index under-reports blocks
//   stored before it started; routing decides whether that is good enough.
// - An incomplete index converges without a flush: SGLang evicts by LRU
//   (its default radix eviction policy), and a page it stored while the
//   index ran was used no earlier than that. So once the runtime removes
//   such a page from a tier, every page on that tier used only before the
//   index started is gone before it: the index is complete when that has
//   happened on every tier it saw stored to. What an old page still held
//   there was used for since was a request, and that request's stored pages
//   name it as their parent (block-index.ts takes it as held). Left out: a
//   request that hit an old prefix and stored nothing (its whole sequence
//   was cached, or its tail was under a page); the index learns that prefix
//   from the next page stored under it. A replica that joins a busy fleet
//   after the publisher's replay rolled over (a restart, a scale-up) thus
//   reads as exact once the runtime's cache has turned over, rather than
//   partial until the runtime's next flush, which may never come.
//
// A batch that does not decode is lost for good (a replay returns the same
// bytes): the index starts over from the batch after it.
//
// No I/O and no timers: time comes in through a Clock and a wall clock.

import { hash } from 'node:crypto';
import type { Clock } from '#kube/clock.ts';
import type { KvCacheEvent } from '#sglang/kv-events.ts';
import { addApplyStats, buildApplyStats, type ApplyStats, type KvBlockIndex } from './block-index.ts';
import { decodeEventBatch } from './decode.ts';

/** Applied batches remembered for telling a repeated batch from a restarted publisher's. */
const RECENT_BATCHES = 1024;

export type LiveStep = 'applied' | 'duplicate' | 'gap';
export type ReplayOutcome = 'done' | 'again';

export interface FeedCounters {
  /** Batches applied (live or replayed). */
  applied: number;
  replays: number;
  /** Times the index was dropped and started over (restart, lost batches, malformed batch). */
  restarts: number;
  malformed: number;
  /** Times an incomplete index became complete by the runtime's eviction order (above), not a flush. */
  converged: number;
  /** Accumulated over every batch applied. */
  readonly blocks: ApplyStats;
}

export interface FeedState {
  readonly lastSeq: number | null;
  readonly complete: boolean;
  /** Complete by the runtime's eviction order since it started late (see above), not from seq 0 or a flush. */
  readonly converged: boolean;
  /** Why the index is what it is: empty when complete and nothing notable happened. */
  readonly note: string;
  /** Clock ms when a batch was last applied. */
  readonly lastEventAt: number | null;
  /** Wall-clock receipt minus the publisher's timestamp (its time.time()), for the last live batch. */
  readonly lagMs: number | null;
}

export interface KvEventFeedDeps {
  readonly clock: Pick<Clock, 'now'>;
  /** Every decoded batch's events, after the index applied them (the shared L3 model, shared-l3.ts). */
  readonly onEvents?: (events: readonly KvCacheEvent[]) => void;
}

interface ReplayRound {
  readonly from: number;
  readonly verifying: boolean;
  received: number;
  /** The publisher answered for our last seq with other bytes, or not at all: another publisher. */
  restarted: boolean;
  /** A hole after the answer's first batch: dropped on the way; what follows is ignored, asked again. */
  truncated: boolean;
}

function fingerprint(payload: Uint8Array): string {
  return hash('sha1', payload, 'base64');
}

export class KvEventFeed {
  readonly index: KvBlockIndex;
  readonly counters: FeedCounters = {
    applied: 0,
    replays: 0,
    restarts: 0,
    malformed: 0,
    converged: 0,
    blocks: buildApplyStats(),
  };
  readonly #deps: KvEventFeedDeps;
  readonly #recent = new Map<number, string>();
  #lastSeq: number | null = null;
  #complete = false;
  /** While incomplete: tiers stored to, and tiers a page stored since the start was removed from. */
  #turnover = { stored: 0, removed: 0 };
  #converged = false;
  #note = 'no batch yet';
  #lastEventAt: number | null = null;
  #lagMs: number | null = null;
  #round: ReplayRound | null = null;
  /** Why the last replay failed, until a batch is adopted in its place. */
  #replayFailure: string | null = null;

  constructor(index: KvBlockIndex, deps: KvEventFeedDeps) {
    this.index = index;
    this.#deps = deps;
  }

  get state(): FeedState {
    return {
      lastSeq: this.#lastSeq,
      complete: this.#complete,
      converged: this.#complete && this.#converged,
      note: this.#note,
      lastEventAt: this.#lastEventAt,
      lagMs: this.#lagMs,
    };
  }

  /** A batch off the live socket, read at `receivedAt` (ms since the epoch). */
  live(seq: number, payload: Uint8Array, opts: { receivedAt: number; afterReplay?: boolean }): LiveStep {
    const last = this.#lastSeq;
    if (last !== null && seq <= last) {
      if (this.#recent.get(seq) === fingerprint(payload)) return 'duplicate';
      this.#startOver(`publisher restarted (seq ${seq} after ${last})`, false);
      if (seq !== 0) return 'gap';
      this.#complete = true;
    } else if (seq !== (last ?? -1) + 1) {
      if (!opts.afterReplay) return 'gap';
      // The replay could not supply what came before: start from this batch.
      this.#startOver(
        `${this.#replayFailure ?? `batches before seq ${seq} were lost`}; index restarted at seq ${seq}`,
        false,
      );
    } else if (last === null) {
      // Seq 0 of a publisher: everything it ever published.
      this.#complete = true;
      this.#note = '';
    }
    this.#apply(seq, payload, opts.receivedAt);
    return 'applied';
  }

  /** Starts a replay round; returns the seq to ask from. */
  beginReplay(): number {
    const verifying = this.#lastSeq !== null;
    const from = this.#lastSeq ?? 0;
    this.#round = { from, verifying, received: 0, restarted: false, truncated: false };
    this.counters.replays++;
    return from;
  }

  /** One batch of the replay's answer, in the publisher's order. */
  replayed(seq: number, payload: Uint8Array): void {
    const round = this.#round;
    if (!round || round.restarted || round.truncated) return;
    const first = round.received++ === 0;
    const last = this.#lastSeq;
    if (first && round.verifying && seq === last) {
      if (this.#recent.get(seq) !== fingerprint(payload)) round.restarted = true;
      return;
    }
    if (last !== null && seq <= last) return;
    if (seq !== (last ?? -1) + 1 && !first) {
      round.truncated = true;
      return;
    }
    if (seq !== (last ?? -1) + 1) {
      // What we need is no longer kept (or never was: a fresh start from a rolled-over buffer).
      const why =
        last === null ? `replay starts at seq ${seq}` : `replay could not cover seq ${last + 1}..${seq - 1}`;
      this.#startOver(why, false);
    } else if (last === null) {
      this.#startOver('', true);
    }
    this.#apply(seq, payload, null);
  }

  /**
   * The replay's end marker arrived, or with `cut` the answer stopped short of it (a timeout after
   * some batches): 'again' asks for another round (from seq 0 after a restart, else from the last
   * batch applied).
   */
  endReplay(opts: { cut?: boolean } = {}): ReplayOutcome {
    const round = this.#round;
    this.#round = null;
    if (!round) return 'done';
    if (round.truncated || (opts.cut && !round.restarted && round.received > 0)) return 'again';
    if (round.restarted || (round.verifying && round.received === 0)) {
      this.#startOver(`publisher restarted (replay had no seq ${round.from} of ours)`, false);
      return 'again';
    }
    // An empty answer from seq 0 leaves the index incomplete: nothing published yet and nothing kept
    // (buffer_steps 0) look alike. SGLang's seq 0, published at start-up, settles it when it comes.
    return 'done';
  }

  /** The replay did not answer (or there is none): whatever comes next live is adopted as the start. */
  failReplay(why: string): void {
    this.#round = null;
    this.#startOver(why, false);
    this.#replayFailure = why;
  }

  #startOver(why: string, complete: boolean): void {
    if (this.#lastSeq !== null || this.index.size > 0) this.counters.restarts++;
    this.index.clear();
    this.#recent.clear();
    this.#lastSeq = null;
    this.#complete = complete;
    this.#converged = false;
    this.#turnover = { stored: 0, removed: 0 };
    this.#note = why;
    this.#replayFailure = null;
  }

  /** `receivedAt`: when a live batch was read (replayed ones say nothing of lag: null). */
  #apply(seq: number, payload: Uint8Array, receivedAt: number | null): void {
    const decoded = decodeEventBatch(payload);
    this.#lastSeq = seq;
    this.#remember(seq, payload);
    this.#lastEventAt = this.#deps.clock.now();
    this.counters.applied++;
    if (!decoded.ok) {
      this.counters.malformed++;
      this.counters.restarts++;
      this.index.clear();
      this.#complete = false;
      this.#turnover = { stored: 0, removed: 0 };
      this.#note = `batch ${seq} did not decode (${decoded.error.message}); index restarted after it`;
      return;
    }
    const stats = this.index.apply(decoded.value.events);
    this.#deps.onEvents?.(decoded.value.events);
    addApplyStats(this.counters.blocks, stats);
    if (stats.cleared) this.#converged = false;
    if (stats.cleared && !this.#complete) {
      this.#complete = true;
      this.#note = '';
    } else if (!this.#complete) this.#trackTurnover(stats);
    if (receivedAt !== null) this.#lagMs = receivedAt - decoded.value.timestampMs;
  }

  /** Complete once every tier stored to has removed a page stored since the index started (above). */
  #trackTurnover(stats: ApplyStats): void {
    const t = this.#turnover;
    t.stored |= stats.storedMedia;
    t.removed |= stats.removedMedia;
    if (t.removed === 0 || (t.stored & ~t.removed) !== 0) return;
    this.#complete = true;
    this.#converged = true;
    this.#note = '';
    this.counters.converged++;
  }

  #remember(seq: number, payload: Uint8Array): void {
    this.#recent.set(seq, fingerprint(payload));
    if (this.#recent.size > RECENT_BATCHES) {
      const oldest = this.#recent.keys().next().value;
      if (oldest !== undefined) this.#recent.delete(oldest);
    }
  }
}
