import type { CachePolicyResource, DeploymentResource } from './index.ts';
import { computeCacheSalt } from '#sglang/salt.ts';

/**
 * The cache namespace of a Deployment no CachePolicy governs: its Kubernetes
 * namespace. A `cacheNamespace` cannot contain `/`, so no policy can collide.
 */
export const DEFAULT_CACHE_NAMESPACE_PREFIX = 'kubernetes-namespace/';

/** Older first, then by name: the same order on every operator and gateway replica. */
export function comparePolicyAge(a: CachePolicyResource, b: CachePolicyResource): number {
  const ta = a.metadata.creationTimestamp ?? '';
  const tb = b.metadata.creationTimestamp ?? '';
  if (ta !== tb) return ta < tb ? -1 : 1;
  return (a.metadata.name ?? '').localeCompare(b.metadata.name ?? '');
}

/**
 * The policy that accepted this Deployment. Status alone could be stale after
 * a targetRefs edit, so the spec must still name the Deployment too.
 */
export function findAcceptingPolicy(
  d: DeploymentResource,
  policies: readonly CachePolicyResource[],
): CachePolicyResource | undefined {
  const name = d.metadata.name ?? '';
  return policies
    .filter(
      (p) =>
        p.metadata.namespace === d.metadata.namespace &&
        p.spec.targetRefs.some((r) => r.name === name) &&
        (p.status?.targets ?? []).some((t) => t.name === name && t.accepted),
    )
    .sort(comparePolicyAge)[0];
}

/**
 * The cache_salt for requests to a Deployment, for the gateway and for Tasks
 * alike: the status salt while it was computed for the current deploymentId;
 * recomputed from the spec when the status lags an identity change, so a new
 * identity never runs under the old identity's salt.
 */
export function computeDeploymentSalt(
  d: DeploymentResource,
  policy: CachePolicyResource | undefined,
): string {
  const id = d.spec.deploymentId;
  if (!policy) return computeCacheSalt(`${DEFAULT_CACHE_NAMESPACE_PREFIX}${d.metadata.namespace ?? ''}`, id);
  const target = policy.status?.targets?.find((t) => t.name === d.metadata.name && t.accepted);
  const isCurrent = target?.deploymentId === undefined || target.deploymentId === id;
  if (target?.cacheSalt && isCurrent) return target.cacheSalt;
  return computeCacheSalt(policy.spec.cacheNamespace, id);
}
