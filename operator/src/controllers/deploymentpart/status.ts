// A DeploymentPart's status: the pods of its part, and the selector an HPA
// needs to accept it as a scale target. Pure.
import type { DeploymentPartResource, DeploymentPartStatus } from '#api';
import { buildPodView, type PodObject } from '../deployment/meta/pod-view.ts';
import { buildSelectorLabels } from '../deployment/meta/labels.ts';

/** A label selector in the string form the scale subresource carries (`a=b,c=d`). */
export function formatSelector(labels: Readonly<Record<string, string>>): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

/** From the pods of the part's Deployment (any role): those of this part count. */
export function computePartStatus(
  part: DeploymentPartResource,
  pods: readonly PodObject[],
): DeploymentPartStatus {
  const views = pods
    .map(buildPodView)
    .filter((v) => v !== undefined && v.role === part.spec.part && !v.terminating);
  return {
    ...(part.metadata.generation !== undefined ? { observedGeneration: part.metadata.generation } : {}),
    replicas: views.length,
    readyReplicas: views.filter((v) => v?.ready).length,
    // An HPA refuses a scale target without a selector (InvalidSelector).
    selector: formatSelector(buildSelectorLabels(part.spec.deployment, part.spec.part)),
  };
}
