// Tenants from Kubernetes: informers on Tenant objects and on Secrets
// labelled cacheroute.dev/api-keys (all namespaces, or one pair per listed
// namespace) → buildTenantDirectory → one swap of the directory. As the
// routing table's watcher: ready after the first full list, changes coalesced.
// Only labelled Secrets are listed, so the gateway never holds other Secrets
// in memory (RBAC cannot filter by label; the chart's comments say so).

import { API_KEYS_LABEL } from '../../../operator/src/api/index.ts';
import { Informer, type ListerWatcher } from '../../../operator/src/runtime/informer.ts';
import { noopLogger, type Logger } from '../../../operator/src/runtime/logger.ts';
import { Resources } from '../../../operator/src/runtime/resources.ts';
import { systemClock, type Clock, type Timer } from '../clock.ts';
import { buildTenantDirectory } from '../tenancy/build-directory.ts';
import { KeyDirectory, type TenantIssue } from '../tenancy/tenant.ts';

export interface TenantWatcherOptions {
  readonly client: ListerWatcher;
  readonly namespaces?: readonly string[];
  readonly logger?: Logger;
  readonly clock?: Clock;
  readonly coalesceMs?: number;
}

export class TenantWatcher {
  /** The directory the gateway authenticates with; not ready until the first sync. */
  readonly directory = new KeyDirectory();
  #log: Logger;
  readonly #clock: Clock;
  readonly #coalesceMs: number;
  readonly #opts: TenantWatcherOptions;
  #tenants: Informer[] = [];
  #secrets: Informer[] = [];
  readonly #abort = new AbortController();
  #pending: Timer | undefined;
  #synced = false;
  #issues = new Set<string>();

  constructor(opts: TenantWatcherOptions) {
    this.#opts = opts;
    this.#log = (opts.logger ?? noopLogger).child({ component: 'tenants' });
    this.#clock = opts.clock ?? systemClock;
    this.#coalesceMs = opts.coalesceMs ?? 100;
  }

  /** `logger`: the app's, once it exists (the watcher is made before the app). */
  start(logger?: Logger): void {
    if (logger) this.#log = logger.child({ component: 'tenants' });
    const { client, namespaces: listed } = this.#opts;
    const namespaces = listed?.length ? [...new Set(listed)] : [undefined];
    const log = this.#log;
    this.#tenants = namespaces.map(
      (namespace) => new Informer({ client, resource: Resources.tenants, namespace, logger: log }),
    );
    // Only labelled Secrets: the gateway never holds other Secrets in memory.
    this.#secrets = namespaces.map(
      (namespace) =>
        new Informer({
          client,
          resource: Resources.secrets,
          namespace,
          labelSelector: `${API_KEYS_LABEL}=true`,
          logger: log,
        }),
    );
    const all = [...this.#tenants, ...this.#secrets];
    const onChange = (): void => this.#schedule();
    for (const informer of all) {
      informer.addEventHandler({
        onAdd: onChange,
        onUpdate: (before, after) => before !== after && onChange(),
        onDelete: onChange,
      });
      informer.start();
    }
    void Promise.all(all.map((i) => i.waitForSync(this.#abort.signal))).then((synced) => {
      if (!synced.every(Boolean)) return;
      this.#synced = true;
      this.#rebuild();
      this.directory.ready = true;
      this.#log.info('tenants synced', { tenants: this.directory.tenants().length });
    });
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    this.#pending?.cancel();
    this.#pending = undefined;
    await Promise.all([...this.#tenants, ...this.#secrets].map((i) => i.stop()));
  }

  #schedule(): void {
    if (!this.#synced || this.#pending) return;
    this.#pending = this.#clock.setTimer(this.#coalesceMs, () => {
      this.#pending = undefined;
      this.#rebuild();
    });
  }

  #rebuild(): void {
    const built = buildTenantDirectory({
      tenants: this.#tenants.flatMap((i) => i.list()),
      secrets: this.#secrets.flatMap((i) => i.list()),
    });
    this.directory.replace(built);
    this.#logIssues(built.issues);
  }

  /** Logged when they appear and when they clear; never a key, only where it is. */
  #logIssues(issues: readonly TenantIssue[]): void {
    const next = new Set(issues.map((i) => JSON.stringify(i)));
    for (const i of issues)
      if (!this.#issues.has(JSON.stringify(i))) this.#log.warn('tenant key refused', { ...i });
    for (const key of this.#issues)
      if (!next.has(key)) this.#log.info('tenant issue cleared', JSON.parse(key) as Record<string, unknown>);
    this.#issues = next;
  }
}
