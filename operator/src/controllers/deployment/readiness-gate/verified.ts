// The pod readiness gate the operator sets (ADR 0025): a rendered SGLang pod is Ready only once
// the operator verified its runtime, so an apps Deployment's rolling update or scale-down, which
// counts Ready pods as available, keeps the old pods until new ones are routable. The kubelet
// ANDs the gate into Ready; the operator writes the condition (pods/status) from what it verified:
// True for a verified runtime (a group's workers follow their leader), False when verification
// failed or the pod is being deleted (draining). Pure: the patches are the reconciler's.
import type { V1PodCondition, V1PodReadinessGate } from '@kubernetes/client-node';
import type { Endpoint } from '#api';
import { EndpointReason } from '../meta/endpoint-reasons.ts';
import { groupOf, isGroupWorker } from '../multi-node/groups.ts';
import { LWS_WORKER_INDEX_LABEL } from '../multi-node/leader-worker-set.ts';
import type { PodObject } from '../meta/pod-view.ts';

export const VERIFIED_CONDITION = 'cacheroute.dev/verified';

/** The readinessGates every rendered SGLang pod carries. */
export const VERIFIED_READINESS_GATES: V1PodReadinessGate[] = [{ conditionType: VERIFIED_CONDITION }];

export const VerifiedReason = {
  Verified: 'Verified',
  /** Still True: one re-verification of a verified runtime failed; the next failure turns it False. */
  RecheckFailed: 'RecheckFailed',
  Draining: 'Draining',
  NotVerified: 'NotVerified',
} as const;

// Reasons a pod never marked True is not written to for: not up yet, or going (not Ready either way).
const NOT_STARTED: ReadonlySet<string> = new Set([
  'NotReady',
  VerifiedReason.NotVerified,
  VerifiedReason.Draining,
]);

/** The condition one pod should carry, and whether it differs from the one it carries. */
export interface VerifiedConditionChange {
  pod: string;
  condition: { type: string; status: 'True' | 'False'; reason: string; message: string };
}

function hasGate(pod: PodObject): boolean {
  return pod.spec?.readinessGates?.some((g) => g.conditionType === VERIFIED_CONDITION) ?? false;
}

function currentCondition(pod: PodObject): V1PodCondition | undefined {
  return pod.status?.conditions?.find((c) => c.type === VERIFIED_CONDITION);
}

/** What the endpoint of a pod (a worker: of its group's leader) says of its runtime. */
function decide(pod: PodObject, endpoint: Endpoint | undefined): VerifiedConditionChange['condition'] {
  const type = VERIFIED_CONDITION;
  if (pod.metadata?.deletionTimestamp)
    return { type, status: 'False', reason: VerifiedReason.Draining, message: 'the pod is being deleted' };
  if (endpoint?.verified)
    return {
      type,
      status: 'True',
      reason: VerifiedReason.Verified,
      message: 'the operator read back the runtime it declared',
    };
  return {
    type,
    status: 'False',
    reason: endpoint?.reason ?? VerifiedReason.NotVerified,
    message: endpoint?.message ?? 'the runtime is not verified yet',
  };
}

/**
 * A verified pod whose re-verification could not be done (a timeout, a refused connection: not a
 * runtime that answered with another identity) stays True once, marked RecheckFailed, so one
 * transient failure does not take a healthy pod out of its Service; a second in a row turns it
 * False. The mark lives on the pod's own condition: it survives an operator restart.
 */
function tolerateOnce(
  decided: VerifiedConditionChange['condition'],
  current: V1PodCondition | undefined,
): VerifiedConditionChange['condition'] {
  if (decided.status !== 'False' || decided.reason !== EndpointReason.VerificationFailed) return decided;
  if (current?.status !== 'True' || current.reason !== VerifiedReason.Verified) return decided;
  return {
    type: decided.type,
    status: 'True',
    reason: VerifiedReason.RecheckFailed,
    message: `a re-verification failed (${decided.message}); False if the next one fails too`,
  };
}

/**
 * The gated pods whose condition must change: `pods` the Deployment's own, `endpoints` this
 * pass's. A pod never marked stays unmarked while it is merely not started (absent is not Ready
 * already); a False that only repeats the reason is not written again.
 */
export function planVerifiedConditions(
  pods: readonly PodObject[],
  endpoints: readonly Endpoint[],
): VerifiedConditionChange[] {
  const byPod = new Map(endpoints.map((e) => [e.pod, e]));
  const leaders = new Map<string, string>();
  for (const pod of pods)
    if (pod.metadata?.labels?.[LWS_WORKER_INDEX_LABEL] === '0')
      leaders.set(groupOf(pod), pod.metadata.name ?? '');
  const changes: VerifiedConditionChange[] = [];
  for (const pod of pods) {
    if (!hasGate(pod)) continue;
    const name = pod.metadata?.name ?? '';
    const source = isGroupWorker(pod) ? leaders.get(groupOf(pod)) : name;
    const current = currentCondition(pod);
    const condition = tolerateOnce(
      decide(pod, source === undefined ? undefined : byPod.get(source)),
      current,
    );
    if (current === undefined && NOT_STARTED.has(condition.reason)) continue;
    if (current?.status === condition.status && current.reason === condition.reason) continue;
    changes.push({ pod: name, condition });
  }
  return changes;
}

/** The strategic merge patch of a pod's status that sets one condition (merged by type). */
export function buildConditionPatch(
  pod: PodObject | undefined,
  condition: VerifiedConditionChange['condition'],
  now: Date,
): object {
  const current = pod ? currentCondition(pod) : undefined;
  const transition =
    current?.status === condition.status && current.lastTransitionTime
      ? current.lastTransitionTime
      : now.toISOString();
  return { status: { conditions: [{ ...condition, lastTransitionTime: transition }] } };
}
