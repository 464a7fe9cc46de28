// The JSON shapes of Kubernetes objects as they travel over the wire (timestamps are
// strings). The generated types of @kubernetes/client-node turn timestamps into Date
// through its serializer; our client speaks plain JSON, so it uses these.
import type { V1OwnerReference } from '@kubernetes/client-node';

export interface ManagedFieldsEntry {
  manager?: string;
  operation?: 'Apply' | 'Update';
  apiVersion?: string;
  time?: string;
  fieldsType?: string;
  fieldsV1?: FieldsV1;
  subresource?: string;
}

// The set of fields a manager owns: nested maps of `f:name`, `k:{...}`, `v:...`, `i:n`, `.`.
export interface FieldsV1 {
  [path: string]: FieldsV1;
}

export type OwnerReference = V1OwnerReference;

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  managedFields?: ManagedFieldsEntry[];
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  [field: string]: unknown;
}

export interface KubeList<T extends KubeObject = KubeObject> {
  apiVersion?: string;
  kind?: string;
  metadata?: { resourceVersion?: string; continue?: string; remainingItemCount?: number };
  items: T[];
}

// metav1.Status, returned with errors and in watch ERROR events.
export interface KubeStatus {
  kind?: 'Status';
  status?: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  code?: number;
  details?: { name?: string; group?: string; kind?: string; causes?: { message?: string; field?: string }[] };
}

export const WatchEventType = {
  added: 'ADDED',
  modified: 'MODIFIED',
  deleted: 'DELETED',
  bookmark: 'BOOKMARK',
  error: 'ERROR',
} as const;
export type WatchEventType = (typeof WatchEventType)[keyof typeof WatchEventType];

export interface WatchEvent<T extends KubeObject = KubeObject> {
  type: WatchEventType;
  object: T;
}

export interface ObjectKey {
  namespace: string;
  name: string;
}

// `namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc).
export function formatKey(key: ObjectKey): string {
  return key.namespace ? `${key.namespace}/${key.name}` : key.name;
}

export function parseKey(key: string): ObjectKey {
  const slash = key.indexOf('/');
  return slash < 0
    ? { namespace: '', name: key }
    : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

export function keyOf(obj: KubeObject): ObjectKey {
  return { namespace: obj.metadata?.namespace ?? '', name: obj.metadata?.name ?? '' };
}

export function cacheKeyOf(obj: KubeObject): string {
  return formatKey(keyOf(obj));
}

// The controller owner reference from owner to an object it creates: deleting the owner
// cascades (garbage collector), blockOwnerDeletion orders foreground deletion, and the
// controller flag is what lets a controller refuse to adopt what another one made. A
// missing name or uid stays empty rather than throwing: planners also render manifests
// that were never stored (make render), and the API server refuses an empty uid.
export function controllerReference(owner: {
  apiVersion: string;
  kind: string;
  metadata?: { name?: string | undefined; uid?: string | undefined } | undefined;
}): OwnerReference {
  const { apiVersion, kind } = owner;
  return {
    apiVersion,
    kind,
    name: owner.metadata?.name ?? '',
    uid: owner.metadata?.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** A ConfigMap or a Secret: an object whose payload is string data. */
export type DataObject = KubeObject & { data?: Record<string, string> };

/**
 * ConfigMap `name` in `owner`'s namespace holding `data`, labelled `labels` and controlled by
 * `owner`: garbage-collected with it, no finalizer.
 */
export function buildOwnedConfigMap(
  owner: Parameters<typeof controllerReference>[0] & { metadata?: { namespace?: string | undefined } },
  name: string,
  labels: Record<string, string>,
  data: Record<string, string>,
): DataObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name,
      namespace: owner.metadata?.namespace ?? '',
      labels,
      ownerReferences: [controllerReference(owner)],
    },
    data,
  };
}

export function controllerOf(obj: KubeObject): OwnerReference | undefined {
  return obj.metadata?.ownerReferences?.find((r) => r.controller === true);
}
