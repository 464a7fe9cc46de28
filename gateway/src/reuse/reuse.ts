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

/**
 * A request's place among identical ones: a `hit` (a stored answer, or the one an identical
 * request in flight produced), or a `miss` whose answer the caller produces and then settles
 * (settle or fail, once); identical requests arriving meanwhile wait on that settlement.
 */
export type ReuseClaim =
  | { readonly kind: 'hit'; readonly source: 'store' | 'inflight'; readonly stored: StoredResult }
  | {
      readonly kind: 'miss';
      settle(stored: StoredResult | undefined): Promise<void>;
      fail(): Promise<void>;
    };

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

  async claim(key: string, ttlMs: number): Promise<ReuseClaim> {
    const pending = this.#inflight.get(key);
    if (pending) {
      this.#waiting++;
      const shared = await pending.catch(() => undefined).finally(() => this.#waiting--);
      if (shared) return { kind: 'hit', source: 'inflight', stored: shared };
      // The first produced nothing reusable: this one produces its own, and is waited on by none.
      return {
        kind: 'miss',
        settle: async (stored) => {
          if (stored) await this.#store.set(key, stored, ttlMs);
        },
        fail: () => Promise.resolve(),
      };
    }
    const leader = Promise.withResolvers<StoredResult | undefined>();
    // Waiters catch it; with none, a failed leader must not be an unhandled rejection.
    leader.promise.catch(() => undefined);
    this.#inflight.set(key, leader.promise);
    const finish = (outcome: () => void): void => {
      outcome();
      this.#inflight.delete(key);
    };
    let hit: StoredResult | undefined;
    try {
      hit = await this.#store.get(key);
    } catch (err) {
      finish(() => leader.reject(err));
      throw err;
    }
    if (hit) {
      const stored = hit;
      finish(() => leader.resolve(stored));
      return { kind: 'hit', source: 'store', stored };
    }
    return {
      kind: 'miss',
      settle: async (stored) => {
        try {
          if (stored) await this.#store.set(key, stored, ttlMs);
          else await this.#store.release?.(key);
        } catch (err) {
          finish(() => leader.reject(err));
          throw err;
        }
        finish(() => leader.resolve(stored));
      },
      // A claim taken by get() must not outlive a failed generation: replicas waiting on it
      // would sit out their whole wait timeout.
      fail: async () => {
        try {
          await this.#store.release?.(key);
        } finally {
          finish(() => leader.reject(new Error('the identical request in flight failed')));
        }
      },
    };
  }

  /** `produce` run under a claim: the form tests and simple callers use. */
  async run<T>(key: string, ttlMs: number, produce: () => Promise<Produced<T>>): Promise<ReuseOutcome<T>> {
    const claim = await this.claim(key, ttlMs);
    if (claim.kind === 'hit') return { source: claim.source, stored: claim.stored, produced: undefined };
    let own: Produced<T>;
    try {
      own = await produce();
    } catch (err) {
      await claim.fail();
      throw err;
    }
    await claim.settle(own.stored);
    return { source: 'fresh', stored: own.stored, produced: own.value };
  }
}
