// The runtimes' API keys from Kubernetes: an informer on the one Secret the
// operator keeps for the gateway (its namespace, its name: ADR 0027) →
// buildRuntimeKeys → one swap. Ready after the first full list. A change is
// applied at once: keys change only on identity changes, rarely.

import type { SecretLocation } from '#api/gateway-keys.ts';
import type { Logger } from '#kube/logger.ts';
import type { KubeObject } from '#kube/objects.ts';
import { readKeptKeys, watchKeptSecret } from './gateway-keys-secret.ts';
import type { WatchedKind } from './informer-group.ts';
import {
  buildRuntimeKeys,
  RuntimeKeys,
  type BuiltRuntimeKeys,
  type RuntimeKeyIssue,
} from './runtime-keys.ts';
import { SnapshotWatcher, type SnapshotWatcherOptions } from './snapshot-watcher.ts';

export interface RuntimeKeyWatcherOptions extends Pick<SnapshotWatcherOptions, 'client' | 'logger'> {
  /** The Secret the operator keeps for the gateway (--keys-secret). */
  readonly keysSecret: SecretLocation;
}

export class RuntimeKeyWatcher extends SnapshotWatcher<RuntimeKeyIssue, BuiltRuntimeKeys> {
  /** The keys the gateway sends; not ready until the first sync. */
  readonly keys = new RuntimeKeys();
  /** A Secret's name, never a key. */
  protected readonly issueMessage = 'runtime keys not read';
  readonly #keysSecret: SecretLocation;

  constructor(opts: RuntimeKeyWatcherOptions) {
    super(opts, 'runtime-keys');
    this.#keysSecret = opts.keysSecret;
  }

  protected kinds(): readonly WatchedKind[] {
    return [watchKeptSecret(this.#keysSecret)];
  }

  /** Applied at once: keys change only with identities, rarely, and a new pod needs its key. */
  protected override coalesceMs(): number {
    return 0;
  }

  protected build([kept = []]: readonly (readonly KubeObject[])[]): BuiltRuntimeKeys {
    const keys = readKeptKeys(kept, this.#keysSecret);
    return buildRuntimeKeys(keys.runtimeKeys, keys.problem, this.#keysSecret);
  }

  protected swap(built: BuiltRuntimeKeys): void {
    this.keys.replace(built);
  }

  protected synced(log: Logger): void {
    this.keys.ready = true;
    log.info('runtime API keys synced', { deployments: this.keys.deployments });
  }
}
