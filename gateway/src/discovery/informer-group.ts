// Informers on a few kinds (all namespaces, or one per listed namespace) that
// feed one rebuild: the shape every gateway watcher has (the routing table,
// tenants, runtime keys). The first rebuild runs once every informer has
// listed, so nothing is built from half a cluster; after that a change
// schedules a rebuild `coalesceMs` later and changes meanwhile ride along (a
// fixed delay from the first change, not a debounce, bounds staleness even
// when status churns). Reconnects, relists and backoff are the Informer's job.

import { Informer, type ListerWatcher } from '#kube/informer.ts';
import type { Logger } from '#kube/logger.ts';
import type { KubeObject } from '#kube/objects.ts';
import type { ResourceType } from '#kube/resources.ts';
import { monotonicClock, type Clock, type Timer } from '#kube/clock.ts';

export interface WatchedKind {
  readonly resource: ResourceType;
  /** Only these objects are listed and held (e.g. labelled Secrets). */
  readonly labelSelector?: string;
  /** Only these (`metadata.name=X`: one object, which RBAC can grant by resourceNames). */
  readonly fieldSelector?: string;
  /** This namespace only, whatever the group's (the gateway's own keys Secret). */
  readonly namespace?: string;
}

export interface InformerGroupOptions {
  readonly client: ListerWatcher;
  /** Empty or absent: all namespaces. */
  readonly namespaces?: readonly string[] | undefined;
  readonly kinds: readonly WatchedKind[];
  readonly logger: Logger;
  readonly clock?: Clock | undefined;
  /** Delay from the first change to the rebuild that includes it (default 100 ms). */
  readonly coalesceMs?: number | undefined;
  /** The objects of each kind, in `kinds` order, as the informers hold them now. */
  readonly rebuild: (objects: readonly (readonly KubeObject[])[]) => void;
  /** After the first full list and its rebuild. */
  readonly onSynced?: () => void;
}

export class InformerGroup {
  readonly #opts: InformerGroupOptions;
  readonly #clock: Clock;
  readonly #coalesceMs: number;
  /** Per kind, one informer per namespace. */
  readonly #informers: readonly (readonly Informer[])[];
  readonly #abort = new AbortController();
  #pending: Timer | undefined;
  #wake: Timer | undefined;
  #synced = false;

  constructor(opts: InformerGroupOptions) {
    this.#opts = opts;
    this.#clock = opts.clock ?? monotonicClock;
    this.#coalesceMs = opts.coalesceMs ?? 100;
    const namespaces = opts.namespaces?.length ? [...new Set(opts.namespaces)] : [undefined];
    this.#informers = opts.kinds.map((kind) =>
      (kind.namespace !== undefined ? [kind.namespace] : namespaces).map(
        (namespace) =>
          new Informer({
            client: opts.client,
            resource: kind.resource,
            namespace,
            labelSelector: kind.labelSelector,
            fieldSelector: kind.fieldSelector,
            logger: opts.logger,
          }),
      ),
    );
  }

  start(): void {
    const all = this.#informers.flat();
    const onChange = (): void => this.#schedule();
    for (const informer of all) {
      informer.addEventHandler({
        onAdd: onChange,
        // A resync replays objects as updates of themselves: nothing changed.
        onUpdate: (before, after) => before !== after && onChange(),
        onDelete: onChange,
      });
      informer.start();
    }
    void Promise.all(all.map((i) => i.waitForSync(this.#abort.signal))).then((synced) => {
      if (!synced.every(Boolean)) return;
      this.#synced = true;
      this.#rebuild();
      this.#opts.onSynced?.();
    });
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    this.#pending?.cancel();
    this.#pending = undefined;
    this.#wake?.cancel();
    this.#wake = undefined;
    await Promise.all(this.#informers.flat().map((i) => i.stop()));
  }

  /** Objects held per kind (tests, diagnostics). */
  sizes(): number[] {
    return this.#informers.map((list) => list.reduce((n, i) => n + i.size(), 0));
  }

  /**
   * One rebuild `delayMs` from now although nothing changed (what was built
   * depends on the time, e.g. a warm-up hold ending); replaces an earlier wake.
   */
  wakeIn(delayMs: number): void {
    this.#wake?.cancel();
    this.#wake = this.#clock.setTimer(Math.max(0, delayMs), () => {
      this.#wake = undefined;
      if (!this.#abort.signal.aborted) this.#rebuild();
    });
  }

  #schedule(): void {
    if (!this.#synced || this.#pending) return;
    this.#pending = this.#clock.setTimer(this.#coalesceMs, () => {
      this.#pending = undefined;
      this.#rebuild();
    });
  }

  #rebuild(): void {
    this.#opts.rebuild(this.#informers.map((list) => list.flatMap((i) => i.list())));
  }
}
