// The Authorization header of a request to a runtime: the API key of the
// runtime's Deployment and fingerprint (discovery/runtime-keys.ts), for the
// endpoint at that base URL in the routing table. Looked up by URL because
// that is what every upstream call carries (upstream/answer.ts); the URL →
// (deployment, fingerprint) index is rebuilt only when the table's routes
// change (they are replaced whole), the key itself is read at each call, so a
// new key applies at once. No key known: no header (a runtime without
// --api-key needs none). The header goes to the runtime only: never logged,
// never on /status or in a metric.

import type { RoutingTable } from '../routing/table.ts';
import type { RuntimeKeyDirectory } from '../discovery/runtime-keys.ts';

interface RuntimeOf {
  readonly deployment: string;
  readonly fingerprint: string;
}

export class RuntimeAuthorization {
  readonly #table: RoutingTable;
  readonly #keys: RuntimeKeyDirectory;
  #indexed: readonly unknown[] = [];
  #byUrl = new Map<string, RuntimeOf>();

  constructor(table: RoutingTable, keys: RuntimeKeyDirectory) {
    this.#table = table;
    this.#keys = keys;
  }

  /** `Bearer <key>` for the runtime at `baseUrl` (an endpoint's url), or undefined. */
  headerFor(baseUrl: string): string | undefined {
    const runtime = this.#index().get(baseUrl);
    const key = runtime && this.#keys.keyFor(runtime.deployment, runtime.fingerprint);
    return key ? `Bearer ${key}` : undefined;
  }

  #index(): ReadonlyMap<string, RuntimeOf> {
    const routes = this.#table.list();
    const prev = this.#indexed;
    if (prev.length === routes.length && routes.every((r, i) => r === prev[i])) return this.#byUrl;
    const byUrl = new Map<string, RuntimeOf>();
    for (const route of routes)
      for (const e of route.endpoints)
        byUrl.set(e.url, { deployment: route.deployment, fingerprint: e.fingerprint });
    this.#indexed = routes;
    this.#byUrl = byUrl;
    return byUrl;
  }
}
