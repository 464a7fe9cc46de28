import type { Condition, DeploymentResource, DeploymentStatus, Endpoint } from '#api';
import { removeCondition, setConditions, type ConditionInput } from '../../manager/conditions.ts';
import type { CacheHealthAssessment } from './cache-health/assess.ts';
import type { PodObject } from './meta/pod-view.ts';
import { computeImageDigest } from './fingerprint.ts';
import { LABEL_DEPLOYMENT } from './meta/labels.ts';
import type { RoleEngine } from './roles.ts';
import type { ModelDeliveryPlan } from './model-cache/plan.ts';
import { SERVED_NAME_SHARED, type SharedNameVerdict } from './served-name.ts';

export const ConditionType = {
  Ready: 'Ready',
  Progressing: 'Progressing',
  IdentityVerified: 'IdentityVerified',
  Degraded: 'Degraded',
  CacheHealthy: 'CacheHealthy',
  ModelReady: 'ModelReady',
  /** Set only while a Deployment of another namespace served the same name first (served-name.ts). */
  ServedNameShared: SERVED_NAME_SHARED,
} as const;

export const Reason = {
  AllReplicasVerified: 'AllReplicasVerified',
  WaitingForVerifiedReplicas: 'WaitingForVerifiedReplicas',
  ScaledToZero: 'ScaledToZero',
  ModelNotReady: 'ModelNotReady',
  Complete: 'Complete',
  RollingOut: 'RollingOut',
  Unschedulable: 'Unschedulable',
  IdentityChangedWithoutNewId: 'IdentityChangedWithoutNewId',
  Verified: 'Verified',
  IdentityMismatch: 'IdentityMismatch',
  Pending: 'Pending',
  AsExpected: 'AsExpected',
  VerifiedEndpoints: 'VerifiedEndpoints',
  NoVerifiedEndpoints: 'NoVerifiedEndpoints',
  PrefillDecodePaired: 'PrefillDecodePaired',
  NoVerifiedPrefill: 'NoVerifiedPrefill',
  NoVerifiedDecode: 'NoVerifiedDecode',
  NoSameRevisionPair: 'NoSameRevisionPair',
} as const;

/** Container states that mean a pod will not come up without a person. */
const STUCK_WAITING_REASONS = new Set([
  'ImagePullBackOff',
  'ErrImagePull',
  'InvalidImageName',
  'CrashLoopBackOff',
  'CreateContainerConfigError',
  'CreateContainerError',
]);

export interface PodTrouble {
  pod: string;
  reason: string;
  message: string;
}

/** What Kubernetes says is keeping a pod from serving, in its own words. */
export function computePodTrouble(pod: PodObject): PodTrouble | undefined {
  const name = pod.metadata?.name ?? '';
  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable') {
    return { pod: name, reason: Reason.Unschedulable, message: scheduled.message ?? 'no node fits the pod' };
  }
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  for (const s of statuses) {
    const waiting = s.state?.waiting;
    if (waiting?.reason && STUCK_WAITING_REASONS.has(waiting.reason)) {
      return {
        pod: name,
        reason: waiting.reason,
        message: `${s.name}: ${waiting.message ?? waiting.reason}`,
      };
    }
  }
  return undefined;
}

export interface StatusObservation {
  root: DeploymentResource;
  engines: readonly RoleEngine[];
  fingerprint: string;
  /** Set when the spec changed the fingerprint but kept deploymentId: nothing was applied. */
  identityConflict: { accepted: string; refused: string } | undefined;
  endpoints: readonly Endpoint[];
  troubles: readonly PodTrouble[];
  podCount: number;
  /** The cache's last assessment (cache-health/); undefined: the operator does not measure caches. */
  cache?: CacheHealthAssessment | undefined;
  /**
   * The model's delivery (model-cache/plan.ts); undefined when it was not planned this pass (an
   * identity conflict): the previous ModelReady and status.model stay.
   */
  model?: Pick<ModelDeliveryPlan, 'ready' | 'status' | 'condition'> | undefined;
  /** What keeps the workloads from being applied at all (e.g. multi-node without LeaderWorkerSet). */
  blocked?: { reason: string; message: string } | undefined;
  /** Another namespace served this Deployment's model name first (served-name.ts). */
  sharedName?: SharedNameVerdict | undefined;
}

function countBy(endpoints: readonly Endpoint[], pred: (e: Endpoint) => boolean): number {
  return endpoints.filter(pred).length;
}

function summarizeProfile(engines: readonly RoleEngine[]): string {
  if (engines.length === 1) return engines[0]?.profile ?? 'dense';
  return `pd:${engines.map((e) => e.profile).join('/')}`;
}

function computeRoutable(
  engines: readonly RoleEngine[],
  endpoints: readonly Endpoint[],
): NonNullable<DeploymentStatus['routable']> {
  const serving = endpoints.filter((e) => e.ready && e.verified);
  if (engines.length === 1) {
    return serving.length > 0
      ? { value: true, reason: Reason.VerifiedEndpoints, message: `${serving.length} verified endpoint(s)` }
      : { value: false, reason: Reason.NoVerifiedEndpoints, message: 'no endpoint is ready and verified' };
  }
  const prefill = new Set(serving.filter((e) => e.role === 'prefill').map((e) => e.fingerprint));
  const decode = serving.filter((e) => e.role === 'decode').map((e) => e.fingerprint);
  const hisparse = engines.some((e) => e.role === 'decode' && e.profile === 'hisparse');
  if (prefill.size === 0) {
    return {
      value: false,
      reason: Reason.NoVerifiedPrefill,
      message: hisparse
        ? 'HiSparse decode takes requests only through the prefill/decode ingress: no verified prefill endpoint'
        : 'no verified prefill endpoint',
    };
  }
  if (decode.length === 0)
    return { value: false, reason: Reason.NoVerifiedDecode, message: 'no verified decode endpoint' };
  // The gateway never pairs revisions: a prefill and a decode must share a fingerprint.
  if (!decode.some((f) => prefill.has(f))) {
    return {
      value: false,
      reason: Reason.NoSameRevisionPair,
      message: 'no prefill and decode endpoints of the same fingerprint',
    };
  }
  return {
    value: true,
    reason: Reason.PrefillDecodePaired,
    message: 'verified prefill and decode endpoints of one revision',
  };
}

// Kept from the previous status when delivery was not planned this pass (an identity conflict).
const modelStatus = (model: StatusObservation['model'], previous: DeploymentStatus['model']) => {
  const m = model?.status ?? previous;
  return m ? { model: m } : {};
};
/** The conditions set only when there is something to say: a cache verdict, a shared served name. */
const occasionalConditions = (obs: StatusObservation) => [
  ...(obs.cache ? [{ type: ConditionType.CacheHealthy, ...obs.cache.condition }] : []),
  ...(obs.sharedName
    ? [{ type: ConditionType.ServedNameShared, status: 'True' as const, ...obs.sharedName }]
    : []),
];
const cacheStatus = (cache: CacheHealthAssessment | undefined) =>
  cache?.cache ? { cache: cache.cache } : {};

/**
 * The conditions set; CacheHealthy removed when caches are not measured (no stale verdict stays),
 * ServedNameShared when the name is no longer served first elsewhere.
 */
function settleConditions(
  previous: DeploymentStatus['conditions'],
  next: readonly ConditionInput[],
  measuringCaches: boolean,
  now: Date,
): Condition[] {
  let set = setConditions(previous, next, now).conditions;
  if (!measuringCaches) set = removeCondition(set, ConditionType.CacheHealthy).conditions;
  if (!next.some((c) => c.type === ConditionType.ServedNameShared))
    set = removeCondition(set, ConditionType.ServedNameShared).conditions;
  return set;
}

/** Ready: replicas serving and verified, and never before the model files are (model-cache/). */
function computeReady(
  desired: number,
  verified: number,
  enoughPerRole: boolean,
  model: StatusObservation['model'],
): { status: Condition['status']; reason: string; message: string } {
  if (desired === 0) return { status: 'False', reason: Reason.ScaledToZero, message: 'replicas is 0' };
  if (model && !model.ready)
    return {
      status: 'False',
      reason: Reason.ModelNotReady,
      message: `model files not ready: ${model.condition.message}`,
    };
  const message = `${verified} of ${desired} replicas serving and verified`;
  return enoughPerRole
    ? { status: 'True', reason: Reason.AllReplicasVerified, message }
    : { status: 'False', reason: Reason.WaitingForVerifiedReplicas, message };
}

type ConditionVerdict = { status: Condition['status']; reason: string; message: string };

/** Progressing: refused or blocked or stuck on a pod (False), else rolling out or complete. */
function computeProgressing(
  obs: StatusObservation,
  counts: { desired: number; updated: number; verified: number },
): ConditionVerdict {
  const { desired, updated, verified } = counts;
  const trouble = obs.troubles[0];
  if (obs.identityConflict)
    return {
      status: 'False',
      reason: Reason.IdentityChangedWithoutNewId,
      message: `the spec now renders fingerprint ${obs.identityConflict.refused} but deploymentId ${obs.root.spec.deploymentId} was accepted with ${obs.identityConflict.accepted}: change deploymentId to roll out a new identity; nothing was applied`,
    };
  if (obs.blocked) return { status: 'False', reason: obs.blocked.reason, message: obs.blocked.message };
  if (trouble)
    return { status: 'False', reason: trouble.reason, message: `pod ${trouble.pod}: ${trouble.message}` };
  if (updated < desired || verified < desired || obs.podCount > desired)
    return {
      status: 'True',
      reason: Reason.RollingOut,
      message: `${updated} of ${desired} replicas on fingerprint ${obs.fingerprint}, ${verified} verified`,
    };
  return {
    status: 'True',
    reason: Reason.Complete,
    message: `all ${desired} replicas on fingerprint ${obs.fingerprint}`,
  };
}

/** IdentityVerified: False on a mismatch, True once every ready endpoint is verified. */
function computeIdentityVerified(
  mismatched: readonly Endpoint[],
  ready: number,
  verified: number,
): ConditionVerdict {
  if (mismatched.length > 0)
    return {
      status: 'False',
      reason: Reason.IdentityMismatch,
      message: mismatched.map((e) => `${e.pod}: ${e.message ?? ''}`).join('; '),
    };
  if (ready === 0)
    return { status: 'Unknown', reason: Reason.Pending, message: 'no ready endpoint to verify yet' };
  if (verified === ready)
    return { status: 'True', reason: Reason.Verified, message: `${verified} ready endpoint(s) verified` };
  return {
    status: 'Unknown',
    reason: Reason.Pending,
    message: `${verified} of ${ready} ready endpoints verified`,
  };
}

/** The faults that make the Deployment Degraded (an unschedulable pod only holds up Progressing). */
function computeDegradedBy(obs: StatusObservation, mismatched: readonly Endpoint[]): string[] {
  return [
    ...(obs.identityConflict ? ['identity changed without a new deploymentId'] : []),
    ...(obs.blocked ? [obs.blocked.message] : []),
    ...mismatched.map((e) => `${e.pod} reports another identity`),
    ...obs.troubles.filter((t) => t.reason !== Reason.Unschedulable).map((t) => `${t.pod}: ${t.reason}`),
  ];
}

/** The whole status of a Deployment from what was observed: pure, `now` injected. */
export function computeStatus(obs: StatusObservation, now: Date): DeploymentStatus {
  const { root, engines, endpoints } = obs;
  const previous = root.status ?? {};
  const generation = root.metadata.generation;
  const desired = engines.reduce((n, e) => n + e.replicas, 0);
  const ready = countBy(endpoints, (e) => e.ready);
  const verified = countBy(endpoints, (e) => e.ready && e.verified);
  const updated = countBy(endpoints, (e) => e.fingerprint === obs.fingerprint);
  const mismatched = endpoints.filter((e) => e.reason === 'IdentityMismatch');
  const enoughPerRole = engines.every(
    (eng) => countBy(endpoints, (e) => e.role === eng.role && e.ready && e.verified) >= eng.replicas,
  );

  const next: ConditionInput[] = [];
  const cond = (type: string, status: Condition['status'], reason: string, message: string) =>
    next.push({
      type,
      status,
      reason,
      message,
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
    });

  const readiness = computeReady(desired, verified, enoughPerRole, obs.model);
  cond(ConditionType.Ready, readiness.status, readiness.reason, readiness.message);

  const progressing = computeProgressing(obs, { desired, updated, verified });
  cond(ConditionType.Progressing, progressing.status, progressing.reason, progressing.message);
  const identityVerified = computeIdentityVerified(mismatched, ready, verified);
  cond(
    ConditionType.IdentityVerified,
    identityVerified.status,
    identityVerified.reason,
    identityVerified.message,
  );
  const degradedBy = computeDegradedBy(obs, mismatched);
  if (degradedBy.length > 0) cond(ConditionType.Degraded, 'True', 'Degraded', degradedBy.join('; '));
  else cond(ConditionType.Degraded, 'False', Reason.AsExpected, 'no fault observed');

  const model = obs.model?.condition;
  if (model) cond(ConditionType.ModelReady, model.status, model.reason, model.message);
  for (const c of occasionalConditions(obs)) cond(c.type, c.status, c.reason, c.message);
  const conditions = settleConditions(previous.conditions, next, obs.cache !== undefined, now);

  const acceptedFingerprint = obs.identityConflict ? obs.identityConflict.accepted : obs.fingerprint;
  return {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    conditions,
    profile: summarizeProfile(engines),
    replicas: obs.podCount,
    readyReplicas: ready,
    verifiedReplicas: verified,
    updatedReplicas: updated,
    selector: `${LABEL_DEPLOYMENT}=${root.metadata.name ?? ''}`,
    identity: (obs.identityConflict ? previous.identity : undefined) ?? {
      deploymentId: root.spec.deploymentId,
      fingerprint: acceptedFingerprint,
      modelDigest: root.spec.model.digest,
      tokenizerDigest: root.spec.model.tokenizerDigest,
      imageDigest: computeImageDigest(root.spec.runtime.image),
    },
    endpoints: [...endpoints].sort((a, b) => a.pod.localeCompare(b.pod)),
    routable: computeRoutable(engines, endpoints),
    ...modelStatus(obs.model, previous.model),
    ...cacheStatus(obs.cache),
  };
}
