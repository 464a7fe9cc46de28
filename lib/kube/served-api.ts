// Whether the API server serves a resource whose CRD is optional (LeaderWorkerSets, GIE's
// InferencePools): the operator then says so on its objects instead of failing its applies. It
// keeps no informer on such a resource: one on a resource the API server does not serve never
// syncs, and every controller waits for its informers.
import { isNotFound, type KubeClient } from './client.ts';
import type { ResourceType } from './resources.ts';

/** A seen answer stands this long; a missing API is asked again at every pass. */
const AVAILABLE_FOR_MS = 5 * 60_000;

export class ServedApi {
  private availableUntil = 0;
  private readonly probe: (namespace: string) => Promise<boolean>;
  private readonly now: () => number;

  constructor(probe: (namespace: string) => Promise<boolean>, now: () => number = Date.now) {
    this.probe = probe;
    this.now = now;
  }

  static forClient(client: KubeClient, resource: ResourceType): ServedApi {
    // In the object's namespace: a namespaced install may list nothing cluster-wide.
    return new ServedApi(async (namespace) => {
      try {
        await client.list(resource, { namespace, limit: 1 });
        return true;
      } catch (err) {
        if (isNotFound(err)) return false;
        throw err;
      }
    });
  }

  async available(namespace: string): Promise<boolean> {
    if (this.now() < this.availableUntil) return true;
    const yes = await this.probe(namespace);
    this.availableUntil = yes ? this.now() + AVAILABLE_FOR_MS : 0;
    return yes;
  }

  /** An apply found the API gone (the CRD removed): ask again next time. */
  forget(): void {
    this.availableUntil = 0;
  }
}
