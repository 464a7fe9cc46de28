// Where completed results live. In memory by default; the Redis store (later)
// implements the same interface so several gateway replicas share results.

import type { Clock } from '#kube/clock.ts';

export interface StoredResult {
  readonly status: number;
  readonly contentType: string;
  /** The response body as sent upstream (JSON text). */
  readonly body: string;
}

export interface ResultStore {
  get(key: string): Promise<StoredResult | undefined>;
  set(key: string, value: StoredResult, ttlMs: number): Promise<void>;
  delete(key: string): Promise<void>;
  /** Gives up a claim on `key` without a result, so waiters elsewhere generate at once. */
  release?(key: string): Promise<void>;
}

export interface MemoryStoreOptions {
  readonly maxEntries: number;
  /** Bound on the summed body sizes (UTF-16 units), default 256 Mi. */
  readonly maxBytes?: number;
}

interface Entry {
  readonly value: StoredResult;
  readonly expiresAt: number;
}

/** LRU with a TTL per entry; bounded by entries and by body size. */
export class MemoryResultStore implements ResultStore {
  readonly #clock: Clock;
  readonly #maxEntries: number;
  readonly #maxBytes: number;
  readonly #entries = new Map<string, Entry>();
  #bytes = 0;

  constructor(opts: MemoryStoreOptions, clock: Clock) {
    this.#clock = clock;
    this.#maxEntries = opts.maxEntries;
    this.#maxBytes = opts.maxBytes ?? 256 * 1024 * 1024;
  }

  get size(): number {
    return this.#entries.size;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get(key: string): Promise<StoredResult | undefined> {
    const e = this.#entries.get(key);
    if (!e) return Promise.resolve(undefined);
    this.#remove(key);
    if (e.expiresAt <= this.#clock.now()) return Promise.resolve(undefined);
    this.#entries.set(key, e); // most recently used last
    this.#bytes += e.value.body.length;
    return Promise.resolve(e.value);
  }

  set(key: string, value: StoredResult, ttlMs: number): Promise<void> {
    this.#remove(key);
    if (value.body.length > this.#maxBytes) return Promise.resolve();
    this.#entries.set(key, { value, expiresAt: this.#clock.now() + ttlMs });
    this.#bytes += value.body.length;
    for (const oldest of this.#entries.keys()) {
      if (this.#entries.size <= this.#maxEntries && this.#bytes <= this.#maxBytes) break;
      this.#remove(oldest);
    }
    return Promise.resolve();
  }

  delete(key: string): Promise<void> {
    this.#remove(key);
    return Promise.resolve();
  }

  #remove(key: string): void {
    const e = this.#entries.get(key);
    if (!e) return;
    this.#entries.delete(key);
    this.#bytes -= e.value.body.length;
  }
}
