// Reads each running fetcher's progress (its GET /progress on the pod IP, ADR 0016): a fetch or
// verify Job's pod, and an SGLang pod's init container filling its node's cache (ADR 0019).
// Off the reconcile loop, every period while this operator leads; it queues the Deployments
// concerned when a fetch moved on (a new phase, a file finished, a whole percent), so
// `status.model` shows bytes and progress while it runs. A pod that cannot be read keeps
// its last reading until it stops running: progress is a view, never a verdict (the result
// still comes from the termination message only).
import type { Logger } from '#kube/logger.ts';
import { mapLimited } from '../../../manager/map-limited.ts';
import { LeaderPeriodicWorker } from '../../../manager/periodic.ts';
import { FETCH_PROGRESS_PATH, FetchProgress } from '#api/model-fetch-progress.ts';
import { getJson } from '../../../sglang-client/client.ts';
import { buildEndpointUrl } from '#sglang/endpoint-url.ts';
import { FETCH_CONTAINER } from './names.ts';
import { FETCH_PROGRESS_PORT_NAME } from './objects.ts';
import type { FetchPodObject } from './plan.ts';

const READS_AT_ONCE = 8;
const READ_TIMEOUT_MS = 2_000;
export const DEFAULT_FETCH_PROGRESS_PERIOD_MS = 5_000;

export interface ProgressTarget {
  /**
   * namespace/Job name for a Job's pod (the progress is the Job's, whichever of its pods runs
   * now); namespace/pod:name for an SGLang pod's init container.
   */
  readonly job: string;
  readonly pod: FetchPodObject;
  readonly url: string;
}

const jobKey = (namespace: string, job: string): string => `${namespace}/${job}`;
const podKey = (namespace: string, pod: string): string => `${namespace}/pod:${pod}`;

/**
 * Where a running fetcher serves its progress: a Job pod's container, or an SGLang pod's init
 * container while it runs; undefined for a pod with neither.
 */
function findProgressUrl(pod: FetchPodObject, inJob: boolean): string | undefined {
  const ip = pod.status?.podIP;
  const containers = inJob ? pod.spec?.containers : pod.spec?.initContainers;
  const port = containers
    ?.find((c) => c.name === FETCH_CONTAINER)
    ?.ports?.find((p) => p.name === FETCH_PROGRESS_PORT_NAME)?.containerPort;
  const initRunning = pod.status?.initContainerStatuses?.some(
    (c) => c.name === FETCH_CONTAINER && c.state?.running !== undefined,
  );
  const running =
    pod.status?.phase === 'Running' && !pod.metadata?.deletionTimestamp && (inJob || initRunning);
  return running && ip && port !== undefined
    ? `${buildEndpointUrl(ip, port)}${FETCH_PROGRESS_PATH}`
    : undefined;
}

/** Pure: the fetchers to read: the newest running pod of each Job, and each SGLang pod's init container. */
export function findProgressTargets(pods: readonly FetchPodObject[]): ProgressTarget[] {
  const byJob = new Map<string, ProgressTarget & { created: string }>();
  for (const pod of pods) {
    const job = pod.metadata?.labels?.['job-name'];
    const url = findProgressUrl(pod, job !== undefined);
    if (!url) continue;
    const namespace = pod.metadata?.namespace ?? '';
    const key = job !== undefined ? jobKey(namespace, job) : podKey(namespace, pod.metadata?.name ?? '');
    const created = String(pod.metadata?.creationTimestamp ?? '');
    const before = byJob.get(key);
    if (before && before.created >= created) continue;
    byJob.set(key, { job: key, pod, url, created });
  }
  return [...byJob.values()].map(({ job, pod, url }) => ({ job, pod, url }));
}

/** Pure: what a change must touch to be shown (bytes within a percent are not a status write). */
export function summarizeProgress(p: FetchProgress): string {
  const percent = p.bytesTotal > 0 ? Math.floor((100 * p.bytesDone) / p.bytesTotal) : 0;
  return `${p.phase} ${p.filesDone}/${p.filesTotal} ${percent}% of ${p.bytesTotal}`;
}

export interface FetchProgressReaderOptions {
  /** The fetch pods (the model cache's informer). */
  readonly pods: () => readonly FetchPodObject[];
  readonly isLeader: () => boolean;
  /** The fetch of this pod moved on: queue the Deployments that use its cache. */
  readonly onChanged: (pod: FetchPodObject) => void;
  readonly periodMs: number;
  readonly logger: Logger;
  readonly signal: AbortSignal;
}

export class FetchProgressReader extends LeaderPeriodicWorker {
  readonly #opts: FetchProgressReaderOptions;
  readonly #progress = new Map<string, FetchProgress>();

  constructor(opts: FetchProgressReaderOptions) {
    super({ ...opts, what: 'fetch progress pass' });
    this.#opts = opts;
  }

  /** The last progress read of a Job's running pod; undefined before the first or once none runs. */
  progressOf(namespace: string, job: string): FetchProgress | undefined {
    return this.#progress.get(jobKey(namespace, job));
  }

  /** The last progress read of an SGLang pod's init container; undefined once it ended. */
  progressOfPod(namespace: string, pod: string): FetchProgress | undefined {
    return this.#progress.get(podKey(namespace, pod));
  }

  protected override forget(): void {
    this.#progress.clear();
  }

  /** One pass over the running fetch pods. */
  protected override async lead(): Promise<void> {
    const targets = findProgressTargets(this.#opts.pods());
    const live = new Set(targets.map((t) => t.job));
    for (const job of this.#progress.keys()) if (!live.has(job)) this.#progress.delete(job);
    await mapLimited(targets, READS_AT_ONCE, async (t) => {
      const read = await getJson(t.url, FetchProgress, {
        timeoutMs: READ_TIMEOUT_MS,
        signal: this.#opts.signal,
      });
      // 204 (nothing reported yet) reads as "not JSON": no progress to show, as an unreachable pod.
      if (!read.ok) return void this.#opts.logger.debug('fetch progress unread', { error: read.error });
      const before = this.#progress.get(t.job);
      this.#progress.set(t.job, read.value);
      if (!before || summarizeProgress(before) !== summarizeProgress(read.value)) this.#opts.onChanged(t.pod);
    });
  }
}
