// Who keeps a shared cache alive (ADR 0016). A cache serves every Deployment of its namespace
// that pins its digests, so it has no controller: each of them is an owner reference (none
// with `controller`), and the garbage collector deletes the cache (and its Job, which the cache
// controls) once every owner is gone. A Deployment that moves to other files stops being an
// owner at its next pass; a cache left with no user is deleted then, by the operator, since
// the collector never deletes an object whose owner list is empty. Its Job goes first: a pod
// that mounts a claim, even a finished one, holds it (pvc-protection), and the Job's pods
// would otherwise wait for the claim to go, which waits for them.
import type { V1OwnerReference } from '@kubernetes/client-node';
import type { KubeObject, ObjectKey } from '#kube/objects.ts';
import { LABEL_DEPLOYMENT } from '../meta/labels.ts';
import { buildCacheOwners } from './objects.ts';
import { buildFetchJobName, LABEL_MODEL_CACHE, LABEL_VERIFY_FOR } from './names.ts';
import type { PvcObject } from './plan.ts';

export interface CacheUser {
  readonly name: string;
  readonly uid: string;
  /** computeModelCacheKey of its spec; undefined: no download source. */
  readonly key: string | undefined;
}

export type OwnerAction =
  | { readonly kind: 'setOwners'; readonly cache: string; readonly owners: V1OwnerReference[] }
  | { readonly kind: 'deleteCache'; readonly cache: string; readonly uid: string; readonly job: string };

/**
 * The Deployments an event of a model-cache object concerns: an SGLang pod that checks its
 * node's files (pod-model.ts), its own Deployment, whose ModelReady is that pod's verdict; a
 * verify Job and its pods, the Deployment it verifies for; a shared cache, its fetch Job and
 * their pods, every Deployment of the namespace that pins its digests (`users`).
 */
export function computeConcerned(o: KubeObject, users: readonly CacheUser[]): ObjectKey[] {
  const namespace = o.metadata?.namespace ?? '';
  const labels = o.metadata?.labels ?? {};
  const owner = labels[LABEL_DEPLOYMENT];
  if (owner !== undefined) return [{ namespace, name: owner }];
  const verifyFor = labels[LABEL_VERIFY_FOR];
  if (verifyFor !== undefined) return [{ namespace, name: verifyFor }];
  const key = labels[LABEL_MODEL_CACHE];
  return users.filter((u) => u.key === key).map((u) => ({ namespace, name: u.name }));
}

/** The owner references a cache of `key` should carry: its users, in a fixed order. */
export function computeCacheOwners(key: string, users: readonly CacheUser[]): V1OwnerReference[] {
  return buildCacheOwners(users.filter((u) => u.key === key));
}

const sameOwners = (a: readonly V1OwnerReference[] | undefined, b: readonly V1OwnerReference[]): boolean =>
  (a ?? [])
    .map((r) => r.uid)
    .sort()
    .join(',') === b.map((r) => r.uid).join(',');

/** For the caches of one namespace: whose owner list is stale, and which no Deployment uses any more. */
export function planCacheOwners(caches: readonly PvcObject[], users: readonly CacheUser[]): OwnerAction[] {
  return caches.flatMap((cache): OwnerAction[] => {
    const key = cache.metadata?.labels?.[LABEL_MODEL_CACHE];
    const name = cache.metadata?.name ?? '';
    if (!key || cache.metadata?.deletionTimestamp) return [];
    const owners = computeCacheOwners(key, users);
    if (owners.length === 0)
      return [
        { kind: 'deleteCache', cache: name, uid: cache.metadata?.uid ?? '', job: buildFetchJobName(key) },
      ];
    return sameOwners(cache.metadata?.ownerReferences, owners)
      ? []
      : [{ kind: 'setOwners', cache: name, owners }];
  });
}
