// A pod's Ready condition as the kubelet's status manager computes it with readiness gates
// (pkg/kubelet/status/generate.go GeneratePodReadyCondition): Ready only when its containers
// are ready AND every gate's condition is there and True. KWOK's pod-ready stage would mark a
// gated pod Ready at once, its gates True with it (kwok-stages.ts changes that); the
// sim-kubelet recomputes Ready whenever a gated pod changes, as the kubelet does on a pod update.
import type { PodObject } from '../../operator/src/controllers/deployment/meta/pod-view.ts';

export interface ReadyCondition {
  type: 'Ready';
  status: 'True' | 'False';
  reason?: string;
  message?: string;
}

/** The Ready a gated pod should have, or undefined when it has no readiness gates (KWOK's Ready stands). */
export function computeGatedReady(pod: PodObject): ReadyCondition | undefined {
  const gates = pod.spec?.readinessGates ?? [];
  if (gates.length === 0) return undefined;
  const conditions = pod.status?.conditions ?? [];
  const isTrue = (type: string): boolean => conditions.some((c) => c.type === type && c.status === 'True');
  if (!isTrue('ContainersReady'))
    return { type: 'Ready', status: 'False', reason: 'ContainersNotReady', message: 'containers not ready' };
  const missing = gates.map((g) => g.conditionType).filter((t) => !isTrue(t));
  if (missing.length > 0)
    return {
      type: 'Ready',
      status: 'False',
      reason: 'ReadinessGatesNotReady',
      message: `the status of pod readiness gate${missing.length > 1 ? 's' : ''} ${missing.map((t) => `"${t}"`).join(', ')} is not "True"`,
    };
  return { type: 'Ready', status: 'True' };
}

/** The status patch (strategic merge, by type) that brings Ready to `want`; undefined: it is already. */
export function buildReadyPatch(pod: PodObject, want: ReadyCondition, now: Date): object | undefined {
  const current = pod.status?.conditions?.find((c) => c.type === 'Ready');
  if (current?.status === want.status && (current.reason ?? undefined) === want.reason) return undefined;
  const transition =
    current?.status === want.status && current.lastTransitionTime
      ? current.lastTransitionTime
      : now.toISOString();
  return {
    status: {
      conditions: [
        { reason: null, message: null, ...want, lastTransitionTime: transition, lastProbeTime: null },
      ],
    },
  };
}
