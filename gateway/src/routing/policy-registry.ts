// One routing policy per deployment, built from its CachePolicy's routing
// settings and rebuilt only when they change. Routes are replaced whole on
// change, so the same route object means the same settings and endpoints:
// the hot path compares identities and skips re-serializing the settings.

import type { ModelRoute } from './table.ts';
import { canonicalJson } from '../reuse/index.ts';
import { buildPolicy } from '../policies/factory.ts';
import type { EndpointView, Policy } from '../policies/policy.ts';

interface Entry {
  readonly key: string;
  readonly policy: Policy;
  synced: ModelRoute | undefined;
}

export class PolicyRegistry {
  readonly #entries = new Map<string, Entry>();

  /** The deployment's policy, told of the route's endpoints when they may have changed. */
  policyFor(route: ModelRoute, view: (e: ModelRoute['endpoints'][number]) => EndpointView): Policy {
    let entry = this.#entries.get(route.deployment);
    if (entry?.synced === route) return entry.policy;
    const key = canonicalJson(route.routing);
    if (entry?.key !== key) {
      entry = { key, policy: buildPolicy(route.routing), synced: undefined };
      this.#entries.set(route.deployment, entry);
    }
    entry.policy.syncEndpoints?.(route.endpoints.map(view));
    entry.synced = route;
    return entry.policy;
  }

  /** The policy a deployment's requests use, once it has served one. */
  policyOf(deployment: string): Policy | undefined {
    return this.#entries.get(deployment)?.policy;
  }

  /** Periodic housekeeping of every policy (tree eviction). */
  maintain(now: number): void {
    for (const { policy } of this.#entries.values()) policy.maintain?.(now);
  }
}
