// Reuse with in-flight de-duplication: the first request for a key produces
// the result (or finds it in the store); identical requests arriving while it
// runs wait for it instead of generating again. When the first one yields
// nothing reusable (an error, an abort, a non-200), each waiter produces its
// own: de-duplication never turns one failure into many.
//
// De-duplication is per gateway replica; across replicas the shared store
// catches repeats once the first result is written.

import type { ResultStore, StoredResult } from './store.ts';

export type ReuseSource = 'store' | 'inflight' | 'fresh';

export interface ReuseOutcome<T> {
  readonly source: ReuseSource;
  /** The stored form, when there is one (store hit, shared, or stored fresh). */
  readonly stored: StoredResult | undefined;
  /** What `produce` returned, for the request that ran it. */
  readonly produced: T | undefined;
}

export interface Produced<T> {
  /** What the caller gets back. */
  readonly value: T;
  /** The reusable form, or undefined when this result must not be reused. */
  readonly stored: StoredResult | undefined;
}

export class ResultReuser {
  readonly #store: ResultStore;
  readonly #inflight = new Map<string, Promise<StoredResult | undefined>>();

  constructor(store: ResultStore) {
    this.#store = store;
  }

  #waiting = 0;

  get inflightCount(): number {
    return this.#inflight.size;
  }

  /** Requests waiting for an identical one in flight. */
  get waitingCount(): number {
    return this.#waiting;
  }

  async run<T>(key: string, ttlMs: number, produce: () => Promise<Produced<T>>): Promise<ReuseOutcome<T>> {
    const pending = this.#inflight.get(key);
    if (pending) {
      this.#waiting++;
      const shared = await pending.catch(() => undefined).finally(() => this.#waiting--);
      if (shared) return { source: 'inflight', stored: shared, produced: undefined };
      const own = await produce();
      if (own.stored) await this.#store.set(key, own.stored, ttlMs);
      return { source: 'fresh', stored: own.stored, produced: own.value };
    }
    let source: ReuseSource = 'fresh';
    let produced: T | undefined;
    const leader = (async () => {
      const hit = await this.#store.get(key);
      if (hit) {
        source = 'store';
        return hit;
      }
      // A claim taken by get() must not outlive a failed or unstorable generation:
      // replicas waiting on it would sit out their whole wait timeout.
      const own = await produce().catch(async (err: unknown) => {
        await this.#store.release?.(key);
        throw err;
      });
      produced = own.value;
      if (own.stored) await this.#store.set(key, own.stored, ttlMs);
      else await this.#store.release?.(key);
      return own.stored;
    })();
    this.#inflight.set(key, leader);
    try {
      const stored = await leader;
      return { source, stored, produced };
    } finally {
      this.#inflight.delete(key);
    }
  }
}
