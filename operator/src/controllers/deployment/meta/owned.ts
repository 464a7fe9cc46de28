// The owner reference and metadata of every object the operator makes for a Deployment: what
// lets the garbage collector delete them with it and the controller refuse to adopt others.
import type { V1OwnerReference } from '@kubernetes/client-node';
import { API_VERSION, type DeploymentResource } from '#api';

export function buildOwnerReference(root: DeploymentResource): V1OwnerReference {
  return {
    apiVersion: API_VERSION,
    kind: 'Deployment',
    name: root.metadata.name ?? '',
    uid: root.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The metadata of every object the operator makes for a Deployment: in its namespace, owned by it. */
export function buildOwnedMetadata(
  root: DeploymentResource,
  name: string,
  labels: Record<string, string>,
): { name: string; namespace: string; labels: Record<string, string>; ownerReferences: V1OwnerReference[] } {
  return {
    name,
    namespace: root.metadata.namespace ?? 'default',
    labels,
    ownerReferences: [buildOwnerReference(root)],
  };
}
