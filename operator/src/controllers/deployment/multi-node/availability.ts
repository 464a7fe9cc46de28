// Whether the cluster serves LeaderWorkerSets (the lws CRD installed): multi-node Deployments
// need it, and without it the operator says so in status instead of failing its applies
// (lib/kube/served-api.ts).
import type { KubeClient } from '#kube/client.ts';
import { Resources } from '#kube/resources.ts';
import { ServedApi } from '#kube/served-api.ts';

/** The condition reason (and Event) of a multi-node Deployment the cluster cannot run yet. */
export const LEADER_WORKER_SET_MISSING = 'LeaderWorkerSetMissing';

export const LEADER_WORKER_SET_MISSING_MESSAGE =
  'parallelism.nodes above 1 runs each replica as a LeaderWorkerSet (leaderworkerset.x-k8s.io/v1), which this cluster does not serve: install LeaderWorkerSet (sigs.k8s.io/lws v0.7.0 or later; docs/operations.md) or set parallelism.nodes to 1';

/** Whether this cluster serves LeaderWorkerSets (kept a while once seen; lib/kube/served-api.ts). */
export function leaderWorkerSetApi(client: KubeClient): ServedApi {
  return ServedApi.forClient(client, Resources.leaderWorkerSets);
}
