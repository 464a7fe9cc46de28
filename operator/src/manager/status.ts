// Status through the status subresource, written only when it changed, always with
// observedGeneration, at most once a reconcile pass. The write is a PUT carrying the
// object's resourceVersion: if the cache was stale the server answers 409 and the key
// is retried with a fresh view, instead of overwriting a newer status.
import type { KubeClient } from '#kube/client.ts';
import { deepEqual } from './equal.ts';
import type { KubeObject } from '#kube/objects.ts';
import type { ResourceType } from '#kube/resources.ts';

export type StatusWithGeneration<S> = S & { observedGeneration: number };

// Pure: the status to write (undefined when nothing changed).
export function computeStatusUpdate<S extends object>(
  obj: KubeObject,
  next: S,
): StatusWithGeneration<S> | undefined {
  const status = { ...next, observedGeneration: obj.metadata?.generation ?? 0 };
  // JSON round-trip drops undefined members, as the server would.
  const normalised = JSON.parse(JSON.stringify(status)) as StatusWithGeneration<S>;
  return deepEqual(obj['status'] ?? {}, normalised) ? undefined : normalised;
}

export async function writeStatusIfChanged<T extends KubeObject, S extends object>(
  client: KubeClient,
  rt: ResourceType,
  obj: T,
  next: S,
): Promise<{ written: boolean; object: T }> {
  const status = computeStatusUpdate(obj, next);
  if (!status) return { written: false, object: obj };
  const object = await client.replace<T>(rt, { ...obj, status }, { subresource: 'status' });
  return { written: true, object };
}
