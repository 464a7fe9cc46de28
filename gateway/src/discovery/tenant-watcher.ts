// Tenants from Kubernetes: informers on Tenant objects (all namespaces, or one
// per listed namespace) and on the one Secret the operator keeps for the
// gateway (its namespace, its name: ADR 0027) → buildTenantDirectory → one swap
// of the directory. The gateway sees the digests of the Tenants' keys, never a
// key and never another Secret. As the routing table's watcher: ready after the
// first full list, changes coalesced.

import type { SecretLocation } from '#api/gateway-keys.ts';
import type { Logger } from '#kube/logger.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { buildTenantDirectory } from '../tenancy/build-directory.ts';
import { KeyDirectory, type BuiltDirectory, type TenantIssue } from '../tenancy/tenant.ts';
import { readKeptKeys, watchKeptSecret } from './gateway-keys-secret.ts';
import type { WatchedKind } from './informer-group.ts';
import { SnapshotWatcher, type SnapshotWatcherOptions } from './snapshot-watcher.ts';

export interface TenantWatcherOptions extends SnapshotWatcherOptions {
  /** The Secret the operator keeps for the gateway (--keys-secret). */
  readonly keysSecret: SecretLocation;
}

export class TenantWatcher extends SnapshotWatcher<TenantIssue, BuiltDirectory> {
  /** The directory the gateway authenticates with; not ready until the first sync. */
  readonly directory = new KeyDirectory();
  /** Never a key, only where it is. */
  protected readonly issueMessage = 'tenant key refused';
  protected override readonly clearedMessage = 'tenant issue cleared';
  readonly #keysSecret: SecretLocation;

  constructor(opts: TenantWatcherOptions) {
    super(opts, 'tenants');
    this.#keysSecret = opts.keysSecret;
  }

  protected kinds(): readonly WatchedKind[] {
    return [{ resource: Resources.tenants }, watchKeptSecret(this.#keysSecret)];
  }

  protected build([tenants = [], kept = []]: readonly (readonly KubeObject[])[]): BuiltDirectory {
    const keys = readKeptKeys(kept, this.#keysSecret);
    return buildTenantDirectory({
      tenants,
      keyDigests: keys.apiKeyDigests,
      keysSecretProblem: keys.problem,
    });
  }

  protected swap(built: BuiltDirectory): void {
    this.directory.replace(built);
  }

  protected synced(log: Logger): void {
    this.directory.ready = true;
    log.info('tenants synced', { tenants: this.directory.tenants().length });
  }
}
