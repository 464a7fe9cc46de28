// Whether a pod is one of this Deployment's own, by ownership rather than by its labels: anyone
// who may create pods in the namespace can copy the labels, and the operator sends the runtime
// API key to the pods it verifies. A pod is the Deployment's when its controller chain, each link
// read back and matched by uid, climbs through the workloads that run SGLang pods (a ReplicaSet
// and the apps/v1 Deployment the operator applied; a StatefulSet and the LeaderWorkerSet it
// applied) to the cacheroute Deployment itself. The chain is checked before any request to the
// pod, so a pod without it never receives the key and is never verified.
import { API_VERSION } from '#api/resources.ts';
import { controllerOf, type KubeObject } from '#kube/objects.ts';
import { Resources, type ResourceType } from '#kube/resources.ts';

/** The links between a pod and its Deployment, by apiVersion and kind. */
const LINKS: ReadonlyMap<string, ResourceType> = new Map<string, ResourceType>([
  ['apps/v1/ReplicaSet', Resources.replicaSets],
  ['apps/v1/StatefulSet', Resources.statefulSets],
  ['apps/v1/Deployment', Resources.deployments],
  ['leaderworkerset.x-k8s.io/v1/LeaderWorkerSet', Resources.leaderWorkerSets],
]);

/** What the operator applies under a Deployment (desired.ts): only these may sit right under it. */
const APPLIED = new Set(['apps/v1/Deployment', 'leaderworkerset.x-k8s.io/v1/LeaderWorkerSet']);

/** pod -> ReplicaSet -> Deployment -> root, or pod -> StatefulSet -> LeaderWorkerSet -> root. */
const MAX_LINKS = 2;

/** Reads one link of the chain; undefined when it does not exist. */
export type ReadOwner = (
  resource: ResourceType,
  namespace: string,
  name: string,
) => Promise<KubeObject | undefined>;

export type Ownership = { owned: true } | { owned: false; reason: string };

const describe = (kind: string, name: string): string => `${kind} ${name}`;

/** Whether `pod`'s controller chain leads, uid by uid, to the Deployment with `rootUid`. */
export async function checkOwnership(pod: KubeObject, rootUid: string, read: ReadOwner): Promise<Ownership> {
  const namespace = pod.metadata?.namespace ?? '';
  let current = { obj: pod, kind: 'Pod', apiVersion: 'v1', name: pod.metadata?.name ?? '' };
  for (let links = 0; ; links++) {
    const here = describe(current.kind, current.name);
    const ref = controllerOf(current.obj);
    if (!ref) return { owned: false, reason: `${here} has no controller` };
    const typeKey = `${ref.apiVersion}/${ref.kind}`;
    if (ref.apiVersion === API_VERSION && ref.kind === 'Deployment') {
      if (ref.uid !== rootUid)
        return { owned: false, reason: `${here} is controlled by another Deployment (${ref.name})` };
      if (links === 0 || !APPLIED.has(`${current.apiVersion}/${current.kind}`))
        return {
          owned: false,
          reason: `${here} names this Deployment as its controller, but it applies no ${current.kind}`,
        };
      return { owned: true };
    }
    const resource = LINKS.get(typeKey);
    if (!resource || links >= MAX_LINKS)
      return {
        owned: false,
        reason: `${here} is controlled by ${describe(ref.kind, ref.name)}, no workload of this Deployment`,
      };
    const owner = await read(resource, namespace, ref.name);
    if (!owner)
      return {
        owned: false,
        reason: `${here} names ${describe(ref.kind, ref.name)} as its controller, which does not exist`,
      };
    if (owner.metadata?.uid !== ref.uid)
      return {
        owned: false,
        reason: `${here} names ${describe(ref.kind, ref.name)} uid ${ref.uid} as its controller; that ${ref.kind} has another uid`,
      };
    current = { obj: owner, kind: ref.kind, apiVersion: ref.apiVersion, name: ref.name };
  }
}

/**
 * A ReadOwner for one reconcile pass: each object read once however many pods name it, apps/v1
 * Deployments from the operator's own cache (it watches them) and the rest with a GET.
 */
export function memoizeReads(
  get: (resource: ResourceType, namespace: string, name: string) => Promise<KubeObject | undefined>,
  cached: { resource: ResourceType; get(namespace: string, name: string): KubeObject | undefined }[] = [],
): ReadOwner {
  const seen = new Map<string, Promise<KubeObject | undefined>>();
  return (resource, namespace, name) => {
    const fromCache = cached.find((c) => c.resource === resource);
    if (fromCache) return Promise.resolve(fromCache.get(namespace, name));
    const key = `${resource.group}/${resource.resource}/${namespace}/${name}`;
    let read = seen.get(key);
    if (!read) {
      read = get(resource, namespace, name);
      seen.set(key, read);
    }
    return read;
  };
}
