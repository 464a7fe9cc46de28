// A routed request's real output length, read off the runtime's KV events
// instead of its response body (ADR 0049).
//
// SGLang 0.5.23 keys its radix cache by whole pages. At a request's prefill it
// stores the prompt's whole pages (mem_cache/common.py checkpoint_kv_cache,
// up_to=extend_end); when the request finishes it stores the prompt and the
// output but the last token, whose KV was never computed (release_kv_cache:
// checkpoint up_to=owned_kv_len, then radix_cache.py _insert_cache, page
// aligned). The tree already holds the prompt's whole pages, so that finishing
// store is a BlockStored whose chain links to the prompt's last whole page
// (parentBlockHash) and whose token ids start with the prompt's tail past it.
// With `tail` = prompt tokens past the last whole page and `n` pages stored:
//   prompt + output - 1 lies in [whole prompt pages + n pages, ... + n + 1)
//   so output lies in [n x page - tail + 1, (n + 1) x page - tail]
// exact at page size 1 (SGLang's default). The picker hashed every prompt it
// routed (the KV index's match), so it knows each request's last whole page.
//
// What is not attributed (it stays unseen, nothing is guessed):
// - two requests waiting on the same last page and tail on one endpoint (the
//   same prompt at once): the store could be either's;
// - a store whose chain runs through another waiting request's last prompt
//   page: it is that request's prefill (a conversation's next turn extending
//   this one's prompt), or the two were published as one event (SGLang joins a
//   store to the one before when it continues it, mem_cache/events.py enqueue);
// - a prompt under one page (its store would link to the namespace root, as
//   every first page does), an output under a page past the tail (nothing is
//   stored), an output the tree already held (a repeat of a greedy answer);
// - host-tier stores (HiCache's backups of the same pages).
// A request is expected from its pick until `graceMs` after its answer ended:
// SGLang publishes events at a prefill, an idle pass or every 40 decode steps
// (metrics_reporter.py decode_log_interval), so the store may come after the
// answer's last byte. The answer's end is kept here only: what the picker timed
// of its stream (first byte to end) comes back with the measurement, so the
// decode estimate (epp/decode-estimate.ts) keeps no book of ended answers.

import type { BlockStored } from '#sglang/kv-events.ts';

/** What the picker knows of a request it routed, to recognise its finishing store. */
export interface ExpectedOutput {
  readonly id: string;
  /** The block hash of the prompt's last whole page (null: the prompt is under a page). */
  readonly lastPage: bigint | null;
  /** Prompt tokens past the last whole page (fewer than a page). */
  readonly tail: readonly number[];
  readonly blockSize: number;
  readonly cacheSalt: string | null;
  /** The request's max_tokens, if it gave one: an output cannot be longer. */
  readonly maxTokens?: number;
}

/** A request's output length as its finishing store bounds it (exact when min === max); `cap`: its max_tokens. */
export interface MeasuredOutput {
  readonly id: string;
  readonly min: number;
  readonly max: number;
  readonly cap?: number;
  /** Its answer ended before the store came, having streamed this long from first byte to end. */
  readonly streamedMs?: number;
}

export interface OutputAttributionOptions {
  /** How long after its answer ended a request's store is still taken (default 5 s). */
  readonly graceMs?: number;
  /** Requests expected at most, per endpoint; past it the oldest goes (default 10,000). */
  readonly maxExpected?: number;
}

/** One request id, or a Set of two or more. */
type WaitingIds = string | Set<string>;

interface Waiting {
  readonly e: ExpectedOutput;
  endedAt: number | undefined;
  streamedMs: number | undefined;
}

/** How long after its answer ended a request's finishing store is still taken (SGLang publishes it late). */
const FINISHING_STORE_GRACE_MS = 5_000;
const DEFAULT_MAX_EXPECTED = 10_000;

export class OutputAttribution {
  readonly #graceMs: number;
  readonly #maxExpected: number;
  /** endpoint -> request id -> what is waited for. */
  readonly #byEndpoint = new Map<string, Map<string, Waiting>>();
  /**
   * endpoint -> last page hash -> the request id waiting on it, or the ids when several do (the
   * same prompt at once, rare): a Set a request was most of what this book kept of it.
   */
  readonly #byLastPage = new Map<string, Map<bigint, WaitingIds>>();
  /** request id -> its endpoint. */
  readonly #endpointOf = new Map<string, string>();
  /** Requests whose answer ended, in the order they ended: id -> when. */
  readonly #ended = new Map<string, number>();
  /** Stores that matched more than one waiting request, or ran through another's prompt: not attributed. */
  ambiguous = 0;

  constructor(opts: OutputAttributionOptions = {}) {
    this.#graceMs = opts.graceMs ?? FINISHING_STORE_GRACE_MS;
    this.#maxExpected = opts.maxExpected ?? DEFAULT_MAX_EXPECTED;
  }

  /** `e` was routed to `endpoint` (again: a retry moves it). A prompt under a page is not followed. */
  expect(endpoint: string, e: ExpectedOutput): void {
    this.drop(e.id);
    if (e.lastPage === null) return;
    let waiting = this.#byEndpoint.get(endpoint);
    if (!waiting) this.#byEndpoint.set(endpoint, (waiting = new Map<string, Waiting>()));
    if (waiting.size >= this.#maxExpected) {
      const oldest = waiting.keys().next().value;
      if (oldest !== undefined) this.#remove(endpoint, oldest);
    }
    waiting.set(e.id, { e, endedAt: undefined, streamedMs: undefined });
    let pages = this.#byLastPage.get(endpoint);
    if (!pages) this.#byLastPage.set(endpoint, (pages = new Map<bigint, WaitingIds>()));
    const ids = pages.get(e.lastPage);
    if (ids === undefined) pages.set(e.lastPage, e.id);
    else if (typeof ids === 'string') pages.set(e.lastPage, new Set([ids, e.id]));
    else ids.add(e.id);
    this.#endpointOf.set(e.id, endpoint);
  }

  /**
   * The request's answer ended at `now`: its store is taken until now + graceMs, and its
   * measurement carries `streamedMs` (how long its stream ran, first byte to end), if given.
   */
  ended(id: string, now: number, streamedMs?: number): void {
    const endpoint = this.#endpointOf.get(id);
    const w = endpoint === undefined ? undefined : this.#byEndpoint.get(endpoint)?.get(id);
    if (!w || w.endedAt !== undefined) return;
    w.endedAt = now;
    w.streamedMs = streamedMs;
    this.#ended.set(id, now);
  }

  /** Forget a request (it failed, or the picker lets it go). */
  drop(id: string): void {
    const endpoint = this.#endpointOf.get(id);
    if (endpoint !== undefined) this.#remove(endpoint, id);
  }

  /** Forget everything expected on `endpoint` (it went, or became another process). */
  forget(endpoint: string): void {
    for (const id of [...(this.#byEndpoint.get(endpoint)?.keys() ?? [])]) this.#remove(endpoint, id);
  }

  /** Requests waited for on `endpoint`. */
  sizeOf(endpoint: string): number {
    return this.#byEndpoint.get(endpoint)?.size ?? 0;
  }

  /** One event from `endpoint`'s KV stream, in order: the output it measures, if it is a routed request's. */
  stored(endpoint: string, ev: BlockStored, now: number): MeasuredOutput | undefined {
    this.#expire(now);
    if (ev.medium !== 'GPU' || ev.parentBlockHash === null) return undefined;
    const pages = this.#byLastPage.get(endpoint);
    const ids = pages?.get(ev.parentBlockHash);
    if (!pages || !ids) return undefined;
    const waiting = this.#byEndpoint.get(endpoint);
    const candidates: Waiting[] = [];
    for (const id of typeof ids === 'string' ? [ids] : ids) {
      const w = waiting?.get(id);
      if (w && this.#fits(w.e, ev)) candidates.push(w);
    }
    if (candidates.length === 0) return undefined;
    // The chain runs through another waiting request's last prompt page: a prefill, or two stores joined.
    const throughPrompt = ev.blockHashes.some((h) => pages.has(h));
    if (candidates.length > 1 || throughPrompt) {
      this.ambiguous++;
      return undefined;
    }
    const { e, streamedMs } = candidates[0] as Waiting;
    this.#remove(endpoint, e.id);
    const page = e.blockSize;
    const n = ev.blockHashes.length;
    const min = n * page - e.tail.length + 1;
    const max = Math.min((n + 1) * page - e.tail.length, e.maxTokens ?? Infinity);
    // Longer than the request may run: not its output (a peer replica's request on the same prompt).
    if (max < min) return undefined;
    return {
      id: e.id,
      min,
      max,
      ...(e.maxTokens !== undefined ? { cap: e.maxTokens } : {}),
      ...(streamedMs !== undefined ? { streamedMs } : {}),
    };
  }

  /** Same namespace and page size, and the stored tokens start with the prompt's tail. */
  #fits(e: ExpectedOutput, ev: BlockStored): boolean {
    if (ev.cacheSalt !== e.cacheSalt || ev.blockSize !== e.blockSize) return false;
    if (ev.tokenIds.length < e.tail.length) return false;
    for (let i = 0; i < e.tail.length; i++) if (ev.tokenIds[i] !== e.tail[i]) return false;
    return true;
  }

  /** Requests whose answer ended more than graceMs ago are no longer waited for (oldest first). */
  #expire(now: number): void {
    for (const [id, at] of this.#ended) {
      if (now - at <= this.#graceMs) return;
      this.drop(id);
    }
  }

  #remove(endpoint: string, id: string): void {
    const waiting = this.#byEndpoint.get(endpoint);
    const w = waiting?.get(id);
    if (!waiting || !w) return;
    waiting.delete(id);
    this.#endpointOf.delete(id);
    this.#ended.delete(id);
    const pages = this.#byLastPage.get(endpoint);
    const page = w.e.lastPage;
    const ids = page === null ? undefined : pages?.get(page);
    if (pages && page !== null && ids !== undefined) {
      if (typeof ids === 'string') {
        if (ids === id) pages.delete(page);
      } else {
        ids.delete(id);
        if (ids.size === 1) pages.set(page, ids.values().next().value as string);
      }
    }
    if (waiting.size === 0) {
      this.#byEndpoint.delete(endpoint);
      this.#byLastPage.delete(endpoint);
    }
  }
}
