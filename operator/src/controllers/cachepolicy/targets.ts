import type { CachePolicyResource, CachePolicyStatus, Condition, DeploymentResource } from '#api';
import { comparePolicyAge } from '#api/cache-binding.ts';
import { computeCacheSalt } from '#sglang/salt.ts';
import { setCondition } from '../../manager/conditions.ts';

export const PolicyReason = {
  Accepted: 'Accepted',
  TargetNotFound: 'TargetNotFound',
  Conflicted: 'Conflicted',
  AllTargetsAccepted: 'AllTargetsAccepted',
  SomeTargetsRefused: 'SomeTargetsRefused',
} as const;

export type TargetStatus = NonNullable<CachePolicyStatus['targets']>[number];

/** The policy that governs a Deployment: the oldest in its namespace that targets it. */
export function findGoverningPolicy(
  deploymentName: string,
  policies: readonly CachePolicyResource[],
): CachePolicyResource | undefined {
  return [...policies]
    .filter((p) => p.spec.targetRefs.some((r) => r.name === deploymentName))
    .sort(comparePolicyAge)[0];
}

export interface PolicyObservation {
  policy: CachePolicyResource;
  /** Every CachePolicy in the namespace, this one included. */
  policies: readonly CachePolicyResource[];
  deployments: ReadonlyMap<string, DeploymentResource>;
}

export function computeTargetStatus(obs: PolicyObservation, name: string): TargetStatus {
  const target = obs.deployments.get(name);
  if (!target) {
    return {
      name,
      accepted: false,
      reason: PolicyReason.TargetNotFound,
      message: `Deployment ${name} not found in this namespace`,
    };
  }
  const governing = findGoverningPolicy(name, obs.policies);
  if (governing && governing.metadata.name !== obs.policy.metadata.name) {
    return {
      name,
      accepted: false,
      reason: PolicyReason.Conflicted,
      message: `Deployment ${name} is governed by the older CachePolicy ${governing.metadata.name ?? ''}`,
    };
  }
  return {
    name,
    accepted: true,
    reason: PolicyReason.Accepted,
    deploymentId: target.spec.deploymentId,
    ...(target.status?.identity?.fingerprint ? { fingerprint: target.status.identity.fingerprint } : {}),
    cacheSalt: computeCacheSalt(obs.policy.spec.cacheNamespace, target.spec.deploymentId),
    ...(target.status?.cache?.hitRate !== undefined ? { hitRate: target.status.cache.hitRate } : {}),
  };
}

/** One reason when every target was refused for it, else the general one. */
function computeRefusalReason(refused: readonly TargetStatus[], total: number): string {
  const reasons = new Set(refused.map((t) => t.reason));
  const [only] = reasons;
  return reasons.size === 1 && refused.length === total && only ? only : PolicyReason.SomeTargetsRefused;
}

export function computePolicyStatus(obs: PolicyObservation, now: Date): CachePolicyStatus {
  const names = [...new Set(obs.policy.spec.targetRefs.map((r) => r.name))];
  const targets = names.map((n) => computeTargetStatus(obs, n));
  const refused = targets.filter((t) => !t.accepted);
  const generation = obs.policy.metadata.generation;
  const next: Omit<Condition, 'lastTransitionTime'> =
    refused.length === 0
      ? {
          type: 'Accepted',
          status: 'True',
          reason: PolicyReason.AllTargetsAccepted,
          message: `${targets.length} target(s) accepted`,
        }
      : {
          type: 'Accepted',
          status: 'False',
          reason: computeRefusalReason(refused, targets.length),
          message: refused.map((t) => t.message ?? t.reason).join('; '),
        };
  const { conditions } = setCondition(
    obs.policy.status?.conditions ?? [],
    { ...next, ...(generation !== undefined ? { observedGeneration: generation } : {}) },
    now,
  );
  return { ...(generation !== undefined ? { observedGeneration: generation } : {}), conditions, targets };
}
