// The owner reference and metadata of every object the operator makes for a Deployment: what
// lets the garbage collector delete them with it and the controller refuse to adopt others.
import { API_VERSION, type DeploymentResource } from '#api';
import { controllerReference, type OwnerReference } from '#kube/objects.ts';

/** The metadata of every object the operator makes for a Deployment: in its namespace, owned by it. */
export function buildOwnedMetadata(
  root: DeploymentResource,
  name: string,
  labels: Record<string, string>,
): { name: string; namespace: string; labels: Record<string, string>; ownerReferences: OwnerReference[] } {
  return {
    name,
    namespace: root.metadata.namespace ?? 'default',
    labels,
    ownerReferences: [controllerReference({ ...root, apiVersion: API_VERSION, kind: 'Deployment' })],
  };
}
