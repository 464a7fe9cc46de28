// How the Deployment controller sees the pods of LeaderWorkerSet groups: one endpoint per
// group, the leader (the only rank that serves HTTP; a worker answers /health only, as
// SGLang's non-zero-rank nodes do), Ready only while its whole group is. Pure.
import { buildPodView, type PodObject, type PodView } from '../meta/pod-view.ts';
import {
  LWS_GROUP_INDEX_LABEL,
  LWS_SET_NAME_LABEL,
  LWS_SIZE_ANNOTATION,
  LWS_WORKER_INDEX_LABEL,
} from './leader-worker-set.ts';

/** A pod of a group other than its leader; undefined index: not a group pod at all. */
export function isGroupWorker(pod: PodObject): boolean {
  const index = pod.metadata?.labels?.[LWS_WORKER_INDEX_LABEL];
  return index !== undefined && index !== '0';
}

/** The set and group index a pod of a group belongs to: the same for its leader and its workers. */
export function groupOf(pod: PodObject): string {
  const labels = pod.metadata?.labels ?? {};
  return `${labels[LWS_SET_NAME_LABEL] ?? ''}/${labels[LWS_GROUP_INDEX_LABEL] ?? ''}`;
}

/**
 * The pods that are endpoints, as views: every pod outside a group, and each group's leader,
 * ready only when all `size - 1` of its workers are there and ready too.
 */
export function buildEndpointViews(pods: readonly PodObject[]): PodView[] {
  const readyWorkers = new Map<string, number>();
  for (const pod of pods) {
    if (!isGroupWorker(pod)) continue;
    if (buildPodView(pod)?.ready !== true) continue;
    readyWorkers.set(groupOf(pod), (readyWorkers.get(groupOf(pod)) ?? 0) + 1);
  }
  const views: PodView[] = [];
  for (const pod of pods) {
    if (isGroupWorker(pod)) continue;
    const view = buildPodView(pod);
    if (!view) continue;
    const size = Number(pod.metadata?.annotations?.[LWS_SIZE_ANNOTATION] ?? '1');
    const isLeader = pod.metadata?.labels?.[LWS_WORKER_INDEX_LABEL] === '0';
    const groupReady = !isLeader || (readyWorkers.get(groupOf(pod)) ?? 0) >= size - 1;
    views.push({ ...view, ready: view.ready && groupReady });
  }
  return views;
}
