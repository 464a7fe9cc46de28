// Whether a pod is one of this Deployment's own, by ownership rather than by its labels: anyone
// who may create pods in the namespace can copy the labels, and the operator sends the runtime
// API key to the pods it verifies. A pod is the Deployment's when its controller chain, each link
// read back and matched by uid, climbs through the workloads that run SGLang pods (a ReplicaSet
// and the apps/v1 Deployment the operator applied; a StatefulSet and the LeaderWorkerSet it
// applied; a group's worker: its StatefulSet, the leader pod, then as the leader) to the
// cacheroute Deployment itself. The chain is checked before any request to the pod, so a pod
// without it never receives the key and is never verified.
import { API_VERSION } from '#api/resources.ts';
import { controllerOf, type KubeObject } from '#kube/objects.ts';
import { Resources, type ResourceType } from '#kube/resources.ts';

const LWS = 'leaderworkerset.x-k8s.io/v1/LeaderWorkerSet';

/** The objects that may link a pod to its Deployment, by apiVersion and kind. */
const LINKS: ReadonlyMap<string, ResourceType> = new Map<string, ResourceType>([
  ['apps/v1/ReplicaSet', Resources.replicaSets],
  ['apps/v1/StatefulSet', Resources.statefulSets],
  ['apps/v1/Deployment', Resources.deployments],
  ['v1/Pod', Resources.pods],
  [LWS, Resources.leaderWorkerSets],
]);

/**
 * The chains, from the pod's controller up to the object right under the Deployment: what the
 * operator applies (desired.ts) and what their controllers make of it. A group's worker pods
 * belong to a StatefulSet the group's leader pod controls.
 */
const CHAINS: readonly (readonly string[])[] = [
  ['apps/v1/ReplicaSet', 'apps/v1/Deployment'],
  ['apps/v1/StatefulSet', LWS],
  ['apps/v1/StatefulSet', 'v1/Pod', 'apps/v1/StatefulSet', LWS],
];

const startsWith = (chain: readonly string[], path: readonly string[]): boolean =>
  path.every((link, i) => chain[i] === link);

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
  const path: string[] = [];
  let current = { obj: pod, kind: 'Pod', name: pod.metadata?.name ?? '' };
  for (;;) {
    const here = describe(current.kind, current.name);
    const ref = controllerOf(current.obj);
    if (!ref) return { owned: false, reason: `${here} has no controller` };
    if (ref.apiVersion === API_VERSION && ref.kind === 'Deployment') {
      if (ref.uid !== rootUid)
        return { owned: false, reason: `${here} is controlled by another Deployment (${ref.name})` };
      if (!CHAINS.some((c) => c.length === path.length && startsWith(c, path)))
        return {
          owned: false,
          reason: `${here} names this Deployment as its controller, but it applies no ${current.kind}`,
        };
      return { owned: true };
    }
    const link = `${ref.apiVersion}/${ref.kind}`;
    const resource = LINKS.get(link);
    if (!resource || !CHAINS.some((c) => startsWith(c, [...path, link])))
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
    path.push(link);
    current = { obj: owner, kind: ref.kind, name: ref.name };
  }
}

/**
 * A ReadOwner for one reconcile pass: each object read once however many pods name it, the kinds
 * the operator caches (apps/v1 Deployments, its pods) from its cache and the rest with a GET.
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
