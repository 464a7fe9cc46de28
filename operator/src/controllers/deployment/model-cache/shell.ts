// The I/O of model delivery (ADR 0016): reads the cache, its Job and the Job's pods from the
// informers (and a running fetch's progress, progress-reader.ts), lets plan.ts and owners.ts
// decide, and makes their writes. The Deployment
// reconciler calls `deliver` before it applies workloads, and applies them only when the
// plan says the files are ready.
import type { DeploymentResource } from '#api';
import { ApiError, type KubeClient } from '#kube/client.ts';
import type { Manager, Watch } from '../../../manager/manager.ts';
import type { KubeObject, ObjectKey } from '#kube/objects.ts';
import type { ResourceCache } from '../../../manager/cache.ts';
import { Resources } from '#kube/resources.ts';
import type { ModelCacheConfig } from './objects.ts';
import {
  ANNOTATION_VERIFIED,
  buildFetchJobName,
  buildModelCacheName,
  buildVerifyJobName,
  computeModelCacheKey,
  computeStagedKey,
  fetchedSourceOf,
  LABEL_MODEL_CACHE,
  LABEL_VERIFY_FOR,
} from './names.ts';
import { computeCacheOwners, computeConcerned, planCacheOwners, type CacheUser } from './owners.ts';
import { DEFAULT_FETCH_PROGRESS_PERIOD_MS, FetchProgressReader } from './progress-reader.ts';
import { checksOnNode, computeNodeKey } from './pod-model.ts';
import { LABEL_DEPLOYMENT } from '../meta/labels.ts';
import {
  planModelDelivery,
  type FetchPodObject,
  type JobObject,
  type ModelCacheAction,
  type ModelDeliveryPlan,
  type PvcObject,
} from './plan.ts';

type RootObject = KubeObject & DeploymentResource;

export interface ModelDelivery {
  /** Plans this Deployment's model delivery and makes the plan's writes (and its namespace's owner fixes). */
  deliver(root: DeploymentResource, now: Date): Promise<ModelDeliveryPlan>;
  /**
   * After a Deployment went: the caches of its namespace get their owner lists fixed, and one no
   * Deployment uses any more is deleted. The garbage collector would delete it too, through the
   * owner references, but it cannot while it has not yet learned the CRD (a fresh
   * controller-manager learns new kinds at its next discovery, and backs off meanwhile).
   */
  collect(namespace: string): Promise<void>;
  /** The caches, Jobs and fetch pods, mapped to the Deployments that use them: the controller's extra watches. */
  readonly watches: readonly Watch[];
}

const isConflict = (e: unknown): boolean => e instanceof ApiError && e.code === 409;

/** A Deployment as a cache user; its spec read loosely: one that fails validation still has a model. */
function toUser(o: RootObject): CacheUser | undefined {
  if (o.metadata?.deletionTimestamp) return undefined;
  const spec = o.spec as DeploymentResource['spec'] | undefined;
  // A node cache (cache: Node) uses no shared claim: one left from before is not kept for it.
  const fetched = spec?.model?.source?.download ?? spec?.model?.source?.objectStore;
  const key = spec && fetched && fetched.cache !== 'Node' ? computeModelCacheKey(spec) : undefined;
  return { name: o.metadata?.name ?? '', uid: o.metadata?.uid ?? '', key };
}

/** The verify Job a pvc source needs now; undefined for other sources. */
function currentVerifyJob(root: DeploymentResource): string | undefined {
  return root.spec.model.source.pvc
    ? buildVerifyJobName(root.metadata.name ?? '', computeStagedKey(root.spec))
    : undefined;
}

export function buildModelDelivery(opts: {
  manager: Manager;
  client: KubeClient;
  roots: ResourceCache<RootObject>;
  config: ModelCacheConfig | undefined;
  /** Queues a Deployment's reconcile (its fetch moved on). */
  enqueue: (key: ObjectKey) => void;
}): ModelDelivery {
  const { manager, client, roots, config } = opts;
  const caches = manager.informer<PvcObject>(Resources.persistentVolumeClaims, LABEL_MODEL_CACHE);
  const jobs = manager.informer<JobObject>(Resources.jobs, LABEL_MODEL_CACHE);
  const pods = manager.informer<FetchPodObject>(Resources.pods, LABEL_MODEL_CACHE);

  const usersOf = (namespace: string): CacheUser[] =>
    roots.list({ namespace }).flatMap((o) => toUser(o) ?? []);

  const toUsers = (o: KubeObject): ObjectKey[] => computeConcerned(o, usersOf(o.metadata?.namespace ?? ''));

  // Without a fetch image no Job runs: nothing to read.
  const progress = config
    ? new FetchProgressReader({
        pods: () => pods.list(),
        isLeader: () => manager.isLeader(),
        onChanged: (pod) => {
          for (const key of toUsers(pod)) opts.enqueue(key);
        },
        periodMs: config.progressPeriodMs ?? DEFAULT_FETCH_PROGRESS_PERIOD_MS,
        logger: manager.logger.child({ component: 'model-fetch-progress' }),
        signal: manager.stopSignal,
      })
    : undefined;
  progress?.start();

  async function run(namespace: string, action: ModelCacheAction): Promise<void> {
    switch (action.kind) {
      case 'createCache':
        // Created, never applied again: a PVC's spec is immutable once bound, and a second
        // Deployment's size or class must not fight the first's.
        await client
          .create(Resources.persistentVolumeClaims, action.pvc as unknown as KubeObject)
          .catch((e: unknown) => {
            if (!isConflict(e)) throw e;
          });
        return;
      case 'createJob':
        await client.create(Resources.jobs, action.job as unknown as KubeObject).catch((e: unknown) => {
          if (!isConflict(e)) throw e;
        });
        return;
      case 'recordVerified':
        await client.patch(
          action.on === 'cache' ? Resources.persistentVolumeClaims : Resources.jobs,
          namespace,
          action.name,
          { metadata: { annotations: { [ANNOTATION_VERIFIED]: JSON.stringify(action.record) } } },
          'merge',
        );
        return;
    }
  }

  async function fixOwners(namespace: string, users: readonly CacheUser[]): Promise<void> {
    for (const a of planCacheOwners(caches.list({ namespace }), users)) {
      if (a.kind === 'deleteCache') {
        manager.logger.info('model cache no Deployment uses is deleted', { namespace, cache: a.cache });
        // The Job and its pods first: a pod that mounts the claim holds it (owners.ts).
        await client.delete(Resources.jobs, namespace, a.job, { propagationPolicy: 'Background' });
        await client.delete(Resources.persistentVolumeClaims, namespace, a.cache, { uid: a.uid });
      } else
        // A merge patch replaces the whole list: exactly the users, in their order.
        await client.patch(
          Resources.persistentVolumeClaims,
          namespace,
          a.cache,
          { metadata: { ownerReferences: a.owners } },
          'merge',
        );
    }
  }

  /** A Deployment's verify Jobs of files it no longer pins (another claim, other digests): deleted. */
  async function dropStaleVerifyJobs(root: DeploymentResource, current: string | undefined): Promise<void> {
    const namespace = root.metadata.namespace ?? '';
    const stale = jobs
      .list({ namespace, labels: { [LABEL_VERIFY_FOR]: root.metadata.name ?? '' } })
      .filter((j) => j.metadata?.name !== current);
    for (const j of stale)
      await client.delete(Resources.jobs, namespace, j.metadata?.name ?? '', {
        propagationPolicy: 'Background',
      });
  }

  async function deliver(root: DeploymentResource, now: Date): Promise<ModelDeliveryPlan> {
    const namespace = root.metadata.namespace ?? '';
    const users = usersOf(namespace);
    await fixOwners(namespace, users);
    const download = fetchedSourceOf(root.spec) !== undefined;
    const key = download ? computeModelCacheKey(root.spec) : '';
    const verifyJob = currentVerifyJob(root);
    await dropStaleVerifyJobs(root, verifyJob);
    const jobName = download ? buildFetchJobName(key) : verifyJob;
    const job = jobName !== undefined ? jobs.get(namespace, jobName) : undefined;
    const nodePods = checksOnNode(root.spec, config)
      ? pods.list({
          namespace,
          labels: {
            [LABEL_MODEL_CACHE]: computeNodeKey(root.spec),
            [LABEL_DEPLOYMENT]: root.metadata.name ?? '',
          },
        })
      : undefined;
    const plan = planModelDelivery({
      namespace,
      spec: root.spec,
      config,
      cache: download ? caches.get(namespace, buildModelCacheName(key)) : undefined,
      job,
      pods: job ? pods.list({ namespace, labels: { 'job-name': job.metadata?.name ?? '' } }) : [],
      progress: job ? progress?.progressOf(namespace, job.metadata?.name ?? '') : undefined,
      nodePods,
      nodeProgress: new Map(
        (nodePods ?? []).flatMap((p) => {
          const read = progress?.progressOfPod(namespace, p.metadata?.name ?? '');
          return read ? [[p.metadata?.name ?? '', read] as const] : [];
        }),
      ),
      owners: computeCacheOwners(key, users),
      deployment: { name: root.metadata.name ?? '', uid: root.metadata.uid ?? '' },
      now,
    });
    for (const a of plan.actions) await run(namespace, a);
    return plan;
  }

  return {
    deliver,
    collect: (namespace) => fixOwners(namespace, usersOf(namespace)),
    watches: [
      { resource: Resources.persistentVolumeClaims, labelSelector: LABEL_MODEL_CACHE, map: toUsers },
      { resource: Resources.jobs, labelSelector: LABEL_MODEL_CACHE, map: toUsers },
      // A fetch pod's result lands with its end; the Job's status follows, but not always in a
      // new version of the Job.
      { resource: Resources.pods, labelSelector: LABEL_MODEL_CACHE, map: toUsers },
    ],
  };
}
