// Tenants from Kubernetes: informers on Tenant objects and on Secrets
// labelled cacheroute.dev/api-keys (all namespaces, or one pair per listed
// namespace) → buildTenantDirectory → one swap of the directory. As the
// routing table's watcher: ready after the first full list, changes coalesced.
// Only labelled Secrets are listed, so the gateway never holds other Secrets
// in memory (RBAC cannot filter by label; the chart's comments say so).

import { API_KEYS_LABEL } from '#api';
import type { ListerWatcher } from '#kube/informer.ts';
import { noopLogger, type Logger } from '#kube/logger.ts';
import { Resources } from '#kube/resources.ts';
import type { Clock } from '#kube/clock.ts';
import { buildTenantDirectory } from '../tenancy/build-directory.ts';
import { KeyDirectory, type TenantIssue } from '../tenancy/tenant.ts';
import { InformerGroup } from './informer-group.ts';

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
  readonly #opts: TenantWatcherOptions;
  #log: Logger;
  #group: InformerGroup | undefined;
  #issues = new Set<string>();

  constructor(opts: TenantWatcherOptions) {
    this.#opts = opts;
    this.#log = (opts.logger ?? noopLogger).child({ component: 'tenants' });
  }

  /** `logger`: the app's, once it exists (the watcher is made before the app). */
  start(logger?: Logger): void {
    if (logger) this.#log = logger.child({ component: 'tenants' });
    this.#group = new InformerGroup({
      client: this.#opts.client,
      namespaces: this.#opts.namespaces,
      // Only labelled Secrets: the gateway never holds other Secrets in memory.
      kinds: [
        { resource: Resources.tenants },
        { resource: Resources.secrets, labelSelector: `${API_KEYS_LABEL}=true` },
      ],
      logger: this.#log,
      clock: this.#opts.clock,
      coalesceMs: this.#opts.coalesceMs,
      rebuild: ([tenants = [], secrets = []]) => {
        const built = buildTenantDirectory({ tenants, secrets });
        this.directory.replace(built);
        this.#logIssues(built.issues);
      },
      onSynced: () => {
        this.directory.ready = true;
        this.#log.info('tenants synced', { tenants: this.directory.tenants().length });
      },
    });
    this.#group.start();
  }

  async stop(): Promise<void> {
    await this.#group?.stop();
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
