// Whether the cluster serves LeaderWorkerSets (the lws CRD installed): multi-node Deployments
// need it, and without it the operator says so in status instead of failing its applies. The
// operator keeps no LWS informer: one on a resource the API server does not serve never syncs,
// and every controller waits for its informers.
import { isNotFound, type KubeClient } from '#kube/client.ts';
import { Resources } from '#kube/resources.ts';

/** The condition reason (and Event) of a multi-node Deployment the cluster cannot run yet. */
export const LEADER_WORKER_SET_MISSING = 'LeaderWorkerSetMissing';

export const LEADER_WORKER_SET_MISSING_MESSAGE =
  'parallelism.nodes above 1 runs each replica as a LeaderWorkerSet (leaderworkerset.x-k8s.io/v1), which this cluster does not serve: install LeaderWorkerSet (sigs.k8s.io/lws v0.7.0 or later; docs/operations.md) or set parallelism.nodes to 1';

/** A seen answer stands this long; a missing API is asked again at every pass. */
const AVAILABLE_FOR_MS = 5 * 60_000;

export class LeaderWorkerSetApi {
  private availableUntil = 0;
  private readonly probe: (namespace: string) => Promise<boolean>;
  private readonly now: () => number;

  constructor(probe: (namespace: string) => Promise<boolean>, now: () => number = Date.now) {
    this.probe = probe;
    this.now = now;
  }

  static forClient(client: KubeClient): LeaderWorkerSetApi {
    // In the Deployment's namespace: a namespaced install may list nothing cluster-wide.
    return new LeaderWorkerSetApi(async (namespace) => {
      try {
        await client.list(Resources.leaderWorkerSets, { namespace, limit: 1 });
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
