// A pod of a Deployment read back through the labels the operator put on it (labels.ts).
import type { V1Pod } from '@kubernetes/client-node';
import type { EndpointRole } from '#api';
import { EndpointRole as EndpointRoleSchema } from '#api';
import type { KubeObject } from '#kube/objects.ts';
import { LABEL_FINGERPRINT, LABEL_ROLE } from './labels.ts';

/** A pod as the Deployment controller sees it: the facts verification depends on. */
export interface PodView {
  name: string;
  uid: string;
  role: EndpointRole;
  ip: string | undefined;
  ready: boolean;
  fingerprint: string;
  restartCount: number;
  terminating: boolean;
}

/** A pod as the API server sends it (timestamps are strings, not client-node's Dates). */
export type PodObject = KubeObject & Pick<V1Pod, 'spec' | 'status'>;

export function buildPodView(pod: PodObject): PodView | undefined {
  const role = EndpointRoleSchema.safeParse(pod.metadata?.labels?.[LABEL_ROLE]);
  if (!role.success || !pod.metadata?.name) return undefined;
  const ready = isContainersReady(pod);
  const restartCount = (pod.status?.containerStatuses ?? []).reduce((n, c) => n + c.restartCount, 0);
  return {
    name: pod.metadata.name,
    uid: pod.metadata.uid ?? '',
    role: role.data,
    ip: pod.status?.podIP,
    ready: ready && pod.status?.phase === 'Running' && !pod.metadata.deletionTimestamp,
    fingerprint: pod.metadata.labels?.[LABEL_FINGERPRINT] ?? '',
    restartCount,
    terminating: pod.metadata.deletionTimestamp !== undefined,
  };
}

/**
 * Whether the pod's containers are ready (their readiness probes pass): ContainersReady, not Ready,
 * which also waits for the pod's readiness gates, the operator's verified gate among them
 * (readiness-gate/), set only after this view led to a verification. A pod without the
 * condition (a stand-in kubelet's) is read by its Ready.
 */
export function isContainersReady(pod: PodObject): boolean {
  const conditions = pod.status?.conditions ?? [];
  const containers = conditions.find((c) => c.type === 'ContainersReady');
  if (containers) return containers.status === 'True';
  return conditions.some((c) => c.type === 'Ready' && c.status === 'True');
}
