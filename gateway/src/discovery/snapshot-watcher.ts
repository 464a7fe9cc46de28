// The shell of a gateway watcher over labelled Secrets (tenants' API keys, the runtimes' API
// keys): an InformerGroup lists and watches the kinds, each change rebuilds the whole
// snapshot in pure code and swaps it in at once, and what the rebuild refused is logged when
// it appears (never a key, only where it is). Ready after the first full list. Only labelled
// Secrets are listed, so the gateway never holds other Secrets in memory (RBAC cannot filter
// by label; the chart's comments say so).
import type { Clock } from '#kube/clock.ts';
import type { ListerWatcher } from '#kube/informer.ts';
import { noopLogger, type LogFields, type Logger } from '#kube/logger.ts';
import type { KubeObject } from '#kube/objects.ts';
import { InformerGroup, type WatchedKind } from './informer-group.ts';

export interface SnapshotWatcherOptions {
  readonly client: ListerWatcher;
  readonly namespaces?: readonly string[];
  readonly logger?: Logger;
  readonly clock?: Clock;
  readonly coalesceMs?: number;
}

/** What one rebuild yields: the snapshot, with the objects it refused and why. */
export interface Rebuilt<Issue> {
  readonly issues: readonly Issue[];
}

export abstract class SnapshotWatcher<Issue extends object, Built extends Rebuilt<Issue>> {
  readonly #opts: SnapshotWatcherOptions;
  readonly #component: string;
  #log: Logger;
  #group: InformerGroup | undefined;
  #issues = new Set<string>();

  constructor(opts: SnapshotWatcherOptions, component: string) {
    this.#opts = opts;
    this.#component = component;
    this.#log = (opts.logger ?? noopLogger).child({ component });
  }

  /** `logger`: the app's, once it exists (the watcher is made before the app). */
  start(logger?: Logger): void {
    if (logger) this.#log = logger.child({ component: this.#component });
    this.#group = new InformerGroup({
      client: this.#opts.client,
      namespaces: this.#opts.namespaces,
      kinds: this.kinds(),
      logger: this.#log,
      clock: this.#opts.clock,
      coalesceMs: this.coalesceMs(this.#opts.coalesceMs),
      rebuild: (objects) => {
        const built = this.build(objects);
        this.swap(built);
        this.#logIssues(built.issues);
      },
      onSynced: () => this.synced(this.#log),
    });
    this.#group.start();
  }

  async stop(): Promise<void> {
    await this.#group?.stop();
  }

  /** The kinds watched, in the order build() receives their objects. */
  protected abstract kinds(): readonly WatchedKind[];
  /** The delay from a change to its rebuild (InformerGroup's), given the option's. */
  protected coalesceMs(option: number | undefined): number | undefined {
    return option;
  }
  protected abstract build(objects: readonly (readonly KubeObject[])[]): Built;
  /** Put the snapshot in place, whole. */
  protected abstract swap(built: Built): void;
  /** After the first full list and its swap: mark ready. */
  protected abstract synced(log: Logger): void;
  /** The warning an issue is logged with when it appears. */
  protected abstract readonly issueMessage: string;
  /** The line an issue that went away is logged with; undefined: not logged. */
  protected readonly clearedMessage: string | undefined = undefined;

  #logIssues(issues: readonly Issue[]): void {
    const keys = issues.map((i) => JSON.stringify(i));
    const next = new Set(keys);
    for (const key of keys)
      if (!this.#issues.has(key)) this.#log.warn(this.issueMessage, JSON.parse(key) as LogFields);
    if (this.clearedMessage !== undefined)
      for (const key of this.#issues)
        if (!next.has(key)) this.#log.info(this.clearedMessage, JSON.parse(key) as LogFields);
    this.#issues = next;
  }
}
