// Model delivery of one Deployment, planned from what was observed (ADR 0016):
//
//   hostPath source ─────────────────────────────────▶ PreStaged (ModelReady=True, not checked)
//   pvc source: no Job ──createJob (verify)──▶ Verifying ──Job Complete──recordVerified (on
//               the Job)──▶ Verified; ──Job Failed──▶ Failed, as a fetch
//   download: no cache ──createCache──▶ cache, no Job ──createJob──▶ Fetching (with the
//             running pod's progress, when read: bytes, files, a fraction)
//   Fetching ──Job Complete, result digests = spec──recordVerified──▶ Verified (ModelReady=True)
//            ──Job Failed──▶ Failed: ModelDigestMismatch (the first bad file) | SourceUnreadable
//                                    (401/403/404) | FetchFailed (the cause)
//   a cache that carries the verified record ─────────▶ Verified, whatever became of its Job
//
// The verified record on the cache (an annotation the operator writes, never the Job) is what
// restarts, rollouts and scale-ups read: no second fetch, no request to the hub. A Job that
// completed without a readable result is not trusted: SGLang never starts on files nobody
// vouched for. The Job is created once and never changed (its template is immutable); a failed
// one stays until someone deletes it, and then a new one is made.
import type { V1Job, V1OwnerReference, V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import { z } from 'zod';
import type { DeploymentSpec, ModelDeliveryStatus } from '#api';
import type { FetchProgress } from '#api/model-fetch-progress.ts';
import type { KubeObject } from '#kube/objects.ts';
import { buildFetchJob, buildModelCachePvc, buildVerifyJob, type ModelCacheConfig } from './objects.ts';
import {
  ANNOTATION_VERIFIED,
  buildFetchJobName,
  buildModelCacheName,
  buildVerifyJobName,
  computeModelCacheKey,
  computeStagedKey,
  computeTokenizerSubpath,
  describeFetchedSource,
  fetchedSourceOf,
} from './names.ts';
import {
  computeFetchAttempts,
  computeNodeChecks,
  type FetchAttempt,
  type FetchResult,
  type NodeCheck,
} from './result.ts';
import { refuseInsecureEndpoint } from './endpoint-transport.ts';
import { checksOnNode } from './pod-model.ts';

export const ModelReason = {
  Verified: 'Verified',
  PreStaged: 'PreStaged',
  Pending: 'Pending',
  Fetching: 'Fetching',
  Verifying: 'Verifying',
  ModelDigestMismatch: 'ModelDigestMismatch',
  FetchFailed: 'FetchFailed',
  SourceUnreadable: 'SourceUnreadable',
  FetcherNotConfigured: 'FetcherNotConfigured',
  /** An http:// endpoint whose host the operator does not list (endpoint-transport.ts). */
  InsecureEndpoint: 'InsecureEndpoint',
} as const;
export type ModelReason = (typeof ModelReason)[keyof typeof ModelReason];

export type PvcObject = KubeObject & Pick<V1PersistentVolumeClaim, 'spec' | 'status'>;
export type JobObject = KubeObject & Pick<V1Job, 'spec' | 'status'>;
export type FetchPodObject = KubeObject & Pick<V1Pod, 'spec' | 'status'>;

export const VerifiedRecord = z.object({
  digest: z.string(),
  tokenizerDigest: z.string(),
  files: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  verifiedAt: z.string(),
  job: z.string(),
});
export type VerifiedRecord = z.infer<typeof VerifiedRecord>;

export type ModelCacheAction =
  | { readonly kind: 'createCache'; readonly pvc: V1PersistentVolumeClaim }
  | { readonly kind: 'createJob'; readonly job: V1Job }
  | {
      readonly kind: 'recordVerified';
      /** Where the record goes: the download's cache claim, or a pvc source's verify Job. */
      readonly on: 'cache' | 'job';
      readonly name: string;
      readonly record: VerifiedRecord;
    };

export interface ModelDeliveryObservation {
  readonly namespace: string;
  readonly spec: DeploymentSpec;
  /** The operator's fetch settings; undefined: it runs without a fetch image. */
  readonly config: ModelCacheConfig | undefined;
  /** The cache PVC of this spec's key, from the cache. */
  readonly cache: PvcObject | undefined;
  readonly job: JobObject | undefined;
  /** The Job's pods. */
  readonly pods: readonly FetchPodObject[];
  /** The Deployment's SGLang pods that check the files on their node (pod-model.ts). */
  readonly nodePods?: readonly FetchPodObject[] | undefined;
  /** What those pods' init containers last said of their progress, by pod name. */
  readonly nodeProgress?: ReadonlyMap<string, FetchProgress> | undefined;
  /** What the Job's running pod last said of its progress; undefined: not read (yet). */
  readonly progress?: FetchProgress | undefined;
  /** Every Deployment that uses this key: the cache's owners. */
  readonly owners: V1OwnerReference[];
  /** The Deployment planned for: a pvc source's verify Job is its own. */
  readonly deployment: { readonly name: string; readonly uid: string };
  readonly now: Date;
}

export interface ModelDeliveryPlan {
  /** The files are there and verified (or pre-staged): the workloads may be applied. */
  readonly ready: boolean;
  readonly status: ModelDeliveryStatus;
  readonly condition: { status: 'True' | 'False'; reason: ModelReason; message: string };
  readonly actions: readonly ModelCacheAction[];
}

/** The verified record on a cache (or a verify Job), when it is one for these digests. */
export function readVerifiedRecord(
  holder: KubeObject | undefined,
  spec: DeploymentSpec,
): VerifiedRecord | undefined {
  const text = holder?.metadata?.annotations?.[ANNOTATION_VERIFIED];
  if (text === undefined) return undefined;
  try {
    const r = VerifiedRecord.safeParse(JSON.parse(text));
    if (!r.success) return undefined;
    const same = r.data.digest === spec.model.digest && r.data.tokenizerDigest === spec.model.tokenizerDigest;
    return same ? r.data : undefined;
  } catch {
    return undefined;
  }
}

const jobCondition = (job: JobObject | undefined, type: string) =>
  job?.status?.conditions?.find((c) => c.type === type && c.status === 'True');

function planFailure(
  base: ModelDeliveryStatus,
  reason: ModelReason,
  message: string,
  extra: Partial<ModelDeliveryStatus> = {},
): ModelDeliveryPlan {
  return {
    ready: false,
    status: { ...base, phase: 'Failed', reason, message, ...extra },
    condition: { status: 'False', reason, message },
    actions: [],
  };
}

/** The condition reason of a fetcher's failure reason (fetch-reasons.ts). */
export function computeFailureReason(fetcherReason: string): ModelReason {
  switch (fetcherReason) {
    case 'ModelDigestMismatch':
    case 'UnexpectedFiles':
      return ModelReason.ModelDigestMismatch;
    case 'HubUnauthorized':
    case 'HubNotFound':
    case 'StoreUnauthorized':
    case 'StoreNotFound':
    case 'StoreInvalidListing':
      return ModelReason.SourceUnreadable;
    default:
      return ModelReason.FetchFailed;
  }
}

function describeFailure(result: Extract<FetchResult, { ok: false }>): string {
  const file = result.path ? `file ${result.path}: ` : '';
  return `${result.reason}: ${file}${result.message}`;
}

const lastFailed = (attempts: readonly FetchAttempt[]) =>
  [...attempts].reverse().find((a) => a.phase === 'Failed');

/** What a Job of model delivery is for: where its verdict is recorded, and what it did. */
interface JobTarget {
  readonly on: 'cache' | 'job';
  /** The object the record goes on. */
  readonly name: string;
  /** Where the files are, in words (a message's). */
  readonly where: string;
  readonly verb: 'fetch' | 'verify';
}

function planFinished(
  obs: ModelDeliveryObservation,
  base: ModelDeliveryStatus,
  jobName: string,
  target: JobTarget,
): ModelDeliveryPlan {
  const attempts = computeFetchAttempts(obs.pods);
  const retry = `delete Job ${jobName} to ${target.verb} again`;
  if (jobCondition(obs.job, 'Complete')) {
    const done = [...attempts].reverse().find((a) => a.phase === 'Succeeded' && a.result?.ok);
    const result = done?.result;
    if (!result?.ok)
      return planFailure(
        base,
        ModelReason.FetchFailed,
        `Job ${jobName} completed but its pod left no ${target.verb} result: the files are not trusted; ${retry}`,
      );
    if (result.digest !== obs.spec.model.digest || result.tokenizerDigest !== obs.spec.model.tokenizerDigest)
      return planFailure(
        base,
        ModelReason.ModelDigestMismatch,
        `Job ${jobName} verified digests ${result.digest} / ${result.tokenizerDigest}, not the pinned ${obs.spec.model.digest} / ${obs.spec.model.tokenizerDigest}`,
      );
    const record: VerifiedRecord = {
      digest: result.digest,
      tokenizerDigest: result.tokenizerDigest,
      files: result.files,
      bytes: result.bytes,
      verifiedAt: obs.now.toISOString(),
      job: jobName,
    };
    return {
      ...planVerified(base, record, target.where),
      actions: [{ kind: 'recordVerified', on: target.on, name: target.name, record }],
    };
  }
  const failed = lastFailed(attempts);
  const result = failed?.result;
  if (result && !result.ok) {
    const reason = computeFailureReason(result.reason);
    return planFailure(
      base,
      reason,
      `${describeFailure(result)}; ${retry}`,
      result.path ? { path: result.path } : {},
    );
  }
  const why = jobCondition(obs.job, 'Failed');
  return planFailure(
    base,
    ModelReason.FetchFailed,
    `Job ${jobName} failed (${why?.reason ?? 'Failed'}: ${why?.message ?? 'no message'}) and its pods left no result; ${retry}`,
  );
}

function planVerified(base: ModelDeliveryStatus, record: VerifiedRecord, where: string): ModelDeliveryPlan {
  return {
    ready: true,
    status: {
      ...base,
      phase: 'Verified',
      reason: ModelReason.Verified,
      files: record.files,
      bytesTotal: record.bytes,
      bytesDone: record.bytes,
      progress: 1,
      digest: record.digest,
      tokenizerDigest: record.tokenizerDigest,
      verifiedAt: record.verifiedAt,
    },
    condition: {
      status: 'True',
      reason: ModelReason.Verified,
      message: `${record.files} files (${record.bytes} bytes) in ${where} match ${record.digest}`,
    },
    actions: [],
  };
}

const MIB = 1024 * 1024;
const formatMiB = (bytes: number): string => `${(bytes / MIB).toFixed(bytes < 10 * MIB ? 1 : 0)} MiB`;

/** A fetch's progress in words: where it is, a whole percent, the bytes and the files. */
export function describeProgress(p: FetchProgress): string {
  const percent = p.bytesTotal > 0 ? Math.floor((100 * p.bytesDone) / p.bytesTotal) : 0;
  return `${p.phase}, ${percent}% (${formatMiB(p.bytesDone)} of ${formatMiB(p.bytesTotal)}), ${p.filesDone} of ${p.filesTotal} files`;
}

/** The status fields of a fetch's progress; the fraction in hundredths, as the message's percent moves. */
function buildProgressStatus(p: FetchProgress | undefined): Partial<ModelDeliveryStatus> {
  if (!p || p.bytesTotal === 0) return {};
  return {
    files: p.filesTotal,
    bytesTotal: p.bytesTotal,
    bytesDone: p.bytesDone,
    progress: Math.floor((100 * p.bytesDone) / p.bytesTotal) / 100,
  };
}

function planRunning(
  obs: ModelDeliveryObservation,
  base: ModelDeliveryStatus,
  jobName: string,
  target: JobTarget,
): ModelDeliveryPlan {
  const attempts = computeFetchAttempts(obs.pods);
  const failed = lastFailed(attempts);
  // A pvc source's claim is the user's: its binding is not ours to wait for (the Job's pod is).
  const bound = target.on === 'job' || obs.cache?.status?.phase === 'Bound';
  const progress = bound ? obs.progress : undefined;
  const fetching =
    target.verb === 'fetch'
      ? `Job ${jobName} fetches ${describeFetchedSource(obs.spec)}`
      : `Job ${jobName} verifies the files on ${target.where}`;
  const message = !bound
    ? `waiting for the cache volume ${base.cache ?? ''} to be bound (ReadWriteMany, storage class ${obs.cache?.spec?.storageClassName ?? 'the default'})`
    : failed?.result && !failed.result.ok
      ? `Job ${jobName} ${target.verb === 'fetch' ? 'fetches' : 'verifies'} again after attempt ${attempts.indexOf(failed) + 1} failed: ${describeFailure(failed.result)}`
      : progress
        ? `${fetching}: ${describeProgress(progress)}`
        : fetching;
  const working = target.verb === 'fetch' ? ModelReason.Fetching : ModelReason.Verifying;
  const reason = bound ? working : ModelReason.Pending;
  return {
    ready: false,
    status: {
      ...base,
      phase: bound ? working : 'Pending',
      reason,
      message,
      ...buildProgressStatus(progress),
    },
    condition: { status: 'False', reason, message },
    actions: [],
  };
}

/** A model Job's course: made (`build`) when missing, then running, then finished. */
function planJob(
  obs: ModelDeliveryObservation,
  base: ModelDeliveryStatus,
  target: JobTarget,
  jobName: string,
  what: string,
  build: () => V1Job,
): ModelDeliveryPlan {
  if (!obs.job) {
    const message = `starting Job ${jobName} to ${what}`;
    return {
      ready: false,
      status: { ...base, reason: ModelReason.Pending, message },
      condition: { status: 'False', reason: ModelReason.Pending, message },
      actions: [{ kind: 'createJob', job: build() }],
    };
  }
  if (jobCondition(obs.job, 'Complete') || jobCondition(obs.job, 'Failed'))
    return planFinished(obs, base, jobName, target);
  return planRunning(obs, base, jobName, target);
}

/** A pvc source: its files verified once by a Job of this Deployment, the record on that Job. */
function planStaged(obs: ModelDeliveryObservation): ModelDeliveryPlan {
  const { spec } = obs;
  const pvc = spec.model.source.pvc;
  const where = `PersistentVolumeClaim ${pvc?.claimName ?? ''}${pvc?.subPath ? ` (subPath ${pvc.subPath})` : ''}`;
  if (!obs.config) {
    const message = `model files on ${where}, mounted as they are: their digest is not checked (the operator runs without --model-fetch-image, which verifies them)`;
    return {
      ready: true,
      status: { phase: 'PreStaged', reason: ModelReason.PreStaged, message },
      condition: { status: 'True', reason: ModelReason.PreStaged, message },
      actions: [],
    };
  }
  const { config } = obs;
  const key = computeStagedKey(spec);
  const jobName = buildVerifyJobName(obs.deployment.name, key);
  const base: ModelDeliveryStatus = { phase: 'Pending', job: jobName };
  const target: JobTarget = { on: 'job', name: jobName, where, verb: 'verify' };
  const tokenizer = computeTokenizerSubpath(spec);
  if (!tokenizer.ok)
    return planFailure(
      base,
      ModelReason.SourceUnreadable,
      `model.tokenizerPath ${tokenizer.path} is outside the claim's files: with source.pvc, leave it out or name a directory under /models`,
    );
  const record = readVerifiedRecord(obs.job, spec);
  if (record) return planVerified(base, record, where);
  return planJob(obs, base, target, jobName, `verify the files on ${where}`, () =>
    buildVerifyJob({
      namespace: obs.namespace,
      key,
      name: jobName,
      spec,
      tokenizerSubpath: tokenizer.subpath,
      config,
      deployment: obs.deployment,
    }),
  );
}

/** The pod whose init container got furthest, with what it said; undefined when none said. */
function findFurthest(
  checks: readonly NodeCheck[],
  progress: ReadonlyMap<string, FetchProgress> | undefined,
): { check: NodeCheck; progress: FetchProgress } | undefined {
  const fraction = (p: FetchProgress): number => (p.bytesTotal > 0 ? p.bytesDone / p.bytesTotal : 0);
  let best: { check: NodeCheck; progress: FetchProgress } | undefined;
  for (const check of checks) {
    const p = progress?.get(check.pod);
    if (p && (!best || fraction(p) > fraction(best.progress))) best = { check, progress: p };
  }
  return best;
}

/**
 * Files checked on each node by the pods' init container (a Node download cache, a verified
 * hostPath): the workloads are applied at once, since the pods do the checking; SGLang starts
 * in a pod only after its init container verified its node's files. The verdict is the pods'.
 */
function planOnNode(obs: ModelDeliveryObservation): ModelDeliveryPlan {
  const { spec } = obs;
  const verb = fetchedSourceOf(spec) ? 'fetch' : 'verify';
  const base: ModelDeliveryStatus = { phase: 'Pending' };
  const tokenizer = computeTokenizerSubpath(spec);
  if (!tokenizer.ok)
    return planFailure(
      base,
      ModelReason.SourceUnreadable,
      `model.tokenizerPath ${tokenizer.path} is outside the model's files: leave it out or name a directory under /models`,
    );
  const checks = computeNodeChecks(obs.nodePods ?? []);
  const how =
    verb === 'fetch'
      ? 'each node fetches the files once, by the first pod there, and every pod verifies them before SGLang starts'
      : "every pod verifies its node's copy before SGLang starts";
  const failed = checks.find((c) => c.result && !c.result.ok);
  if (failed?.result && !failed.result.ok) {
    const reason = computeFailureReason(failed.result.reason);
    const message = `pod ${failed.pod} on node ${failed.node}: ${describeFailure(failed.result)}; SGLang does not start there (its init container is retried: fix the node's files, or delete the pod)`;
    return {
      ...planFailure(base, reason, message, failed.result.path ? { path: failed.result.path } : {}),
      ready: true,
    };
  }
  const verified = checks.filter(
    (c) =>
      c.result?.ok &&
      c.result.digest === spec.model.digest &&
      c.result.tokenizerDigest === spec.model.tokenizerDigest,
  );
  const counts = `${verified.length} of ${checks.length} pods verified`;
  const first = verified[0]?.result;
  if (first?.ok) {
    const message = `${how}: ${counts}, ${first.files} files (${first.bytes} bytes) matching ${first.digest}`;
    return {
      ready: true,
      status: {
        phase: 'Verified',
        reason: ModelReason.Verified,
        message,
        files: first.files,
        bytesTotal: first.bytes,
        bytesDone: first.bytes,
        progress: 1,
        digest: first.digest,
        tokenizerDigest: first.tokenizerDigest,
      },
      condition: { status: 'True', reason: ModelReason.Verified, message },
      actions: [],
    };
  }
  const reason = verb === 'fetch' ? ModelReason.Fetching : ModelReason.Verifying;
  const furthest = findFurthest(checks, obs.nodeProgress);
  const message = `${how}: ${counts} yet${furthest ? `; pod ${furthest.check.pod} on node ${furthest.check.node}: ${describeProgress(furthest.progress)}` : ''}`;
  return {
    ready: true,
    status: { phase: reason, reason, message, ...buildProgressStatus(furthest?.progress) },
    condition: { status: 'False', reason, message },
    actions: [],
  };
}

export function planModelDelivery(obs: ModelDeliveryObservation): ModelDeliveryPlan {
  const { spec } = obs;
  const source = spec.model.source;
  // Before anything that would hand a fetcher (a Job, or a pod's init container) the token.
  const insecure = refuseInsecureEndpoint(spec, obs.config?.insecureEndpointHosts ?? []);
  if (insecure) return planFailure({ phase: 'Pending' }, ModelReason.InsecureEndpoint, insecure);
  if (checksOnNode(spec, obs.config)) return planOnNode(obs);
  if (source.pvc) return planStaged(obs);
  if (!fetchedSourceOf(spec)) {
    const why =
      source.hostPath?.verify === false
        ? 'hostPath.verify is false'
        : 'the operator runs without --model-fetch-image, which verifies them';
    const message = `model files on node path ${source.hostPath?.path ?? ''}, mounted as they are: their digest is not checked (${why})`;
    return {
      ready: true,
      status: { phase: 'PreStaged', reason: ModelReason.PreStaged, message },
      condition: { status: 'True', reason: ModelReason.PreStaged, message },
      actions: [],
    };
  }
  const key = computeModelCacheKey(spec);
  const cacheName = buildModelCacheName(key);
  const jobName = buildFetchJobName(key);
  const base: ModelDeliveryStatus = { phase: 'Pending', cache: cacheName, job: jobName };
  const tokenizer = computeTokenizerSubpath(spec);
  if (!tokenizer.ok)
    return planFailure(
      base,
      ModelReason.SourceUnreadable,
      `model.tokenizerPath ${tokenizer.path} is outside the fetched files: with source.${source.download ? 'download' : 'objectStore'}, leave it out or name a directory under /models`,
    );
  const record = readVerifiedRecord(obs.cache, spec);
  const target: JobTarget = { on: 'cache', name: cacheName, where: cacheName, verb: 'fetch' };
  if (record) return planVerified(base, record, cacheName);
  if (!obs.config)
    return planFailure(
      base,
      ModelReason.FetcherNotConfigured,
      'the operator runs without --model-fetch-image: download and objectStore sources cannot be fetched (the chart sets it)',
    );
  if (!obs.cache?.metadata?.uid) {
    const pvc = buildModelCachePvc(obs.namespace, key, spec, obs.config, obs.owners);
    const message = `creating the model cache ${cacheName}`;
    return {
      ready: false,
      status: { ...base, reason: ModelReason.Pending, message },
      condition: { status: 'False', reason: ModelReason.Pending, message },
      actions: [{ kind: 'createCache', pvc }],
    };
  }
  const { config } = obs;
  const cache = { name: cacheName, uid: obs.cache.metadata.uid };
  return planJob(obs, base, target, jobName, `fetch ${describeFetchedSource(spec)}`, () =>
    buildFetchJob({
      namespace: obs.namespace,
      key,
      spec,
      tokenizerSubpath: tokenizer.subpath,
      config,
      cache,
    }),
  );
}
