// Tenants from Kubernetes: informers on Tenant objects and on Secrets
// labelled cacheroute.dev/api-keys (all namespaces, or one pair per listed
// namespace) → buildTenantDirectory → one swap of the directory. As the
// routing table's watcher: ready after the first full list, changes coalesced.

import { API_KEYS_LABEL } from '#api';
import type { Logger } from '#kube/logger.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { buildTenantDirectory } from '../tenancy/build-directory.ts';
import { KeyDirectory, type BuiltDirectory, type TenantIssue } from '../tenancy/tenant.ts';
import type { WatchedKind } from './informer-group.ts';
import { SnapshotWatcher, type SnapshotWatcherOptions } from './snapshot-watcher.ts';

export type TenantWatcherOptions = SnapshotWatcherOptions;

export class TenantWatcher extends SnapshotWatcher<TenantIssue, BuiltDirectory> {
  /** The directory the gateway authenticates with; not ready until the first sync. */
  readonly directory = new KeyDirectory();
  /** Never a key, only where it is. */
  protected readonly issueMessage = 'tenant key refused';
  protected override readonly clearedMessage = 'tenant issue cleared';

  constructor(opts: TenantWatcherOptions) {
    super(opts, 'tenants');
  }

  protected kinds(): readonly WatchedKind[] {
    return [
      { resource: Resources.tenants },
      { resource: Resources.secrets, labelSelector: `${API_KEYS_LABEL}=true` },
    ];
  }

  protected build([tenants = [], secrets = []]: readonly (readonly KubeObject[])[]): BuiltDirectory {
    return buildTenantDirectory({ tenants, secrets });
  }

  protected swap(built: BuiltDirectory): void {
    this.directory.replace(built);
  }

  protected synced(log: Logger): void {
    this.directory.ready = true;
    log.info('tenants synced', { tenants: this.directory.tenants().length });
  }
}
