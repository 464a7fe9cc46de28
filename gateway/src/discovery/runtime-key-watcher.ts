// The runtimes' API keys from Kubernetes: informers on Secrets labelled
// cacheroute.dev/runtime-api-key=true (all namespaces, or one per listed
// namespace) → buildRuntimeKeys → one swap. Ready after the first full list.
// A change is applied at once: keys change only on identity changes, rarely.

import { RUNTIME_API_KEY_LABEL } from '#api';
import type { Logger } from '#kube/logger.ts';
import type { KubeObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import type { WatchedKind } from './informer-group.ts';
import {
  buildRuntimeKeys,
  RuntimeKeys,
  type BuiltRuntimeKeys,
  type RuntimeKeyIssue,
} from './runtime-keys.ts';
import { SnapshotWatcher, type SnapshotWatcherOptions } from './snapshot-watcher.ts';

export type RuntimeKeyWatcherOptions = Pick<SnapshotWatcherOptions, 'client' | 'namespaces' | 'logger'>;

export class RuntimeKeyWatcher extends SnapshotWatcher<RuntimeKeyIssue, BuiltRuntimeKeys> {
  /** The keys the gateway sends; not ready until the first sync. */
  readonly keys = new RuntimeKeys();
  /** A Secret's name, never a key. */
  protected readonly issueMessage = 'runtime key Secret ignored';

  constructor(opts: RuntimeKeyWatcherOptions) {
    super(opts, 'runtime-keys');
  }

  protected kinds(): readonly WatchedKind[] {
    return [{ resource: Resources.secrets, labelSelector: `${RUNTIME_API_KEY_LABEL}=true` }];
  }

  /** Applied at once: keys change only with identities, rarely, and a new pod needs its key. */
  protected override coalesceMs(): number {
    return 0;
  }

  protected build([secrets = []]: readonly (readonly KubeObject[])[]): BuiltRuntimeKeys {
    return buildRuntimeKeys(secrets);
  }

  protected swap(built: BuiltRuntimeKeys): void {
    this.keys.replace(built);
  }

  protected synced(log: Logger): void {
    this.keys.ready = true;
    log.info('runtime API keys synced', { deployments: this.keys.deployments });
  }
}
