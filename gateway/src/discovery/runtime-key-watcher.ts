// The runtimes' API keys from Kubernetes: informers on Secrets labelled
// cacheroute.dev/runtime-api-key=true (all namespaces, or one per listed
// namespace) → buildRuntimeKeys → one swap. Ready after the first full list.
// Only labelled Secrets are listed, so no other Secret is held in memory
// (RBAC cannot filter by label; the chart's comments say so). A change is
// applied at once: keys change only on identity changes, rarely.

import { RUNTIME_API_KEY_LABEL } from '#api';
import type { ListerWatcher } from '#kube/informer.ts';
import { noopLogger, type Logger } from '#kube/logger.ts';
import { Resources } from '#kube/resources.ts';
import { InformerGroup } from './informer-group.ts';
import { buildRuntimeKeys, RuntimeKeys, type RuntimeKeyIssue } from './runtime-keys.ts';

export interface RuntimeKeyWatcherOptions {
  readonly client: ListerWatcher;
  readonly namespaces?: readonly string[];
  readonly logger?: Logger;
}

export class RuntimeKeyWatcher {
  /** The keys the gateway sends; not ready until the first sync. */
  readonly keys = new RuntimeKeys();
  readonly #opts: RuntimeKeyWatcherOptions;
  #log: Logger;
  #group: InformerGroup | undefined;
  #issues = new Set<string>();

  constructor(opts: RuntimeKeyWatcherOptions) {
    this.#opts = opts;
    this.#log = (opts.logger ?? noopLogger).child({ component: 'runtime-keys' });
  }

  /** `logger`: the app's, once it exists (the watcher is made before the app). */
  start(logger?: Logger): void {
    if (logger) this.#log = logger.child({ component: 'runtime-keys' });
    this.#group = new InformerGroup({
      client: this.#opts.client,
      namespaces: this.#opts.namespaces,
      kinds: [{ resource: Resources.secrets, labelSelector: `${RUNTIME_API_KEY_LABEL}=true` }],
      logger: this.#log,
      // Applied at once: keys change only with identities, rarely, and a new pod needs its key.
      coalesceMs: 0,
      rebuild: ([secrets = []]) => {
        const built = buildRuntimeKeys(secrets);
        this.keys.replace(built);
        this.#logIssues(built.issues);
      },
      onSynced: () => {
        this.keys.ready = true;
        this.#log.info('runtime API keys synced', { deployments: this.keys.deployments });
      },
    });
    this.#group.start();
  }

  async stop(): Promise<void> {
    await this.#group?.stop();
  }

  /** Logged when they appear and when they clear; a Secret's name, never a key. */
  #logIssues(issues: readonly RuntimeKeyIssue[]): void {
    const next = new Set(issues.map((i) => JSON.stringify(i)));
    for (const i of issues)
      if (!this.#issues.has(JSON.stringify(i))) this.#log.warn('runtime key Secret ignored', { ...i });
    this.#issues = next;
  }
}
