// A pod's graceful termination as a kubelet runs it (kuberuntime's killContainer): the
// container's preStop hook (here its `sleep` action) within the grace period, then SIGTERM,
// then SIGKILL once the grace period is over, with at least two seconds between SIGTERM and
// SIGKILL however long the hook took (minimumGracePeriodInSeconds). The runtime's SIGTERM
// handling is its own: SGLang, and the simulator after it (test/sim/sigterm.ts), answer 503 to
// health checks, keep serving what arrives, and exit once no request is left.
import type { PodObject } from '../../operator/src/controllers/deployment/meta/pod-view.ts';

/** A kubelet's default grace when the pod names none (terminationGracePeriodSeconds). */
export const DEFAULT_GRACE_SECONDS = 30;
/** What a kubelet leaves between SIGTERM and SIGKILL even when preStop used the whole grace. */
export const MINIMUM_GRACE_AFTER_PRESTOP_MS = 2_000;

export interface TerminationPlan {
  /** The preStop sleep, capped by the grace period. */
  preStopMs: number;
  /** From the start of preStop to SIGKILL. */
  graceMs: number;
}

/**
 * The plan for a pod being deleted. `graceSeconds`: the deletion's own grace as first seen
 * (deletionGracePeriodSeconds; a later grace-0 delete, KWOK's, does not shorten it), else the
 * pod's terminationGracePeriodSeconds.
 */
export function planTermination(pod: PodObject, container: string, graceSeconds?: number): TerminationPlan {
  const spec = pod.spec;
  const grace = graceSeconds ?? spec?.terminationGracePeriodSeconds ?? DEFAULT_GRACE_SECONDS;
  const graceMs = Math.max(0, grace) * 1000;
  const hook = spec?.containers.find((c) => c.name === container)?.lifecycle?.preStop?.sleep?.seconds ?? 0;
  return { preStopMs: Math.min(Math.max(0, hook) * 1000, graceMs), graceMs };
}

export interface TerminatingRuntime {
  /** SIGTERM: resolves once the runtime exited on its own. */
  sigterm(): Promise<void>;
  /** SIGKILL: resolves once it is gone. */
  sigkill(): Promise<void>;
}

/** How the runtime ended: on its own after SIGTERM, or killed at the end of the grace period. */
export type TerminationOutcome = 'exited' | 'killed';

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted || ms <= 0) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * Runs the plan against one runtime: preStop sleep, SIGTERM, SIGKILL at the end of the grace
 * period if it has not exited. `signal` aborted (the kubelet stopping): SIGKILL at once.
 */
export async function runTermination(
  plan: TerminationPlan,
  runtime: TerminatingRuntime,
  signal: AbortSignal,
): Promise<TerminationOutcome> {
  const started = Date.now();
  await sleep(plan.preStopMs, signal);
  if (plan.graceMs === 0 || signal.aborted) {
    await runtime.sigkill();
    return 'killed';
  }
  const leftMs = Math.max(plan.graceMs - (Date.now() - started), MINIMUM_GRACE_AFTER_PRESTOP_MS);
  const deadline = new AbortController();
  const onAbort = (): void => deadline.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    const outcome = await Promise.race([
      runtime.sigterm().then(() => 'exited' as const),
      sleep(leftMs, deadline.signal).then(() => 'killed' as const),
    ]);
    // SIGKILL either way: after an exit it only reclaims what the process held (sockets, timers).
    await runtime.sigkill();
    return outcome;
  } finally {
    deadline.abort();
    signal.removeEventListener('abort', onAbort);
  }
}
