// Wake from zero, pure: a Deployment with wakeOnDemand and replicas 0 runs
// wake.replicas while the gateway tier has wanted it within wake.idleSeconds,
// and 0 otherwise. The demand comes from the watcher's memory (watcher.ts) or,
// after a restart, from status.wake.demandAt; status keeps it coarsely (at
// most one write per quarter of the idle time while busy): a new leader may
// put a Deployment to sleep up to that much early (until the next request
// wakes it), and there is no status write every read.
import { WakeSettings, type DeploymentResource, type DeploymentStatus } from '../../../api/index.ts';

export interface WakeInput {
  readonly spec: Pick<DeploymentResource['spec'], 'replicas' | 'wakeOnDemand' | 'wake'>;
  readonly status: DeploymentStatus['wake'];
  /** The last time the watcher saw the tier want it (ms), if it has. */
  readonly demandMs: number | undefined;
  readonly nowMs: number;
  /** The operator reads the gateway tier for demand (--gateway-admin-url); false: nothing can wake it. */
  readonly watching: boolean;
}

export interface WakePlan {
  /** The replicas to run: spec.replicas, or wake.replicas while awake. */
  readonly replicas: number | undefined;
  /** status.wake; undefined: the Deployment does not wake on demand (or is not at 0). */
  readonly status: DeploymentStatus['wake'];
  /** Reconcile again by then, to sleep on time. */
  readonly recheckAfterMs: number | undefined;
}

const parseTime = (at: string | undefined): number | undefined => {
  const ms = at === undefined ? NaN : Date.parse(at);
  return Number.isFinite(ms) ? ms : undefined;
};

export function planWake(input: WakeInput): WakePlan {
  const { spec } = input;
  if (spec.wakeOnDemand !== true || (spec.replicas ?? 1) > 0)
    return { replicas: spec.replicas, status: undefined, recheckAfterMs: undefined };
  if (!input.watching)
    return {
      replicas: 0,
      status: {
        awake: false,
        message:
          'nothing can wake it: this operator does not read the gateway tier (--gateway-admin-url; the chart sets it with operator.cacheHealth.readGateway or operator.metricsApi)',
      },
      recheckAfterMs: undefined,
    };
  const settings = spec.wake ?? WakeSettings.parse({});
  const idleMs = settings.idleSeconds * 1000;
  const recorded = parseTime(input.status?.demandAt);
  const demand = Math.max(input.demandMs ?? -Infinity, recorded ?? -Infinity);
  const awake = Number.isFinite(demand) && input.nowMs - demand < idleMs;
  // Written again only when it moved a quarter of the idle time: after a restart, at most that early.
  const demandAt =
    recorded !== undefined && demand - recorded < idleMs / 4 && input.status?.awake === awake
      ? input.status.demandAt
      : Number.isFinite(demand)
        ? new Date(demand).toISOString()
        : undefined;
  return {
    replicas: awake ? settings.replicas : 0,
    status: { awake, ...(demandAt !== undefined ? { demandAt } : {}) },
    recheckAfterMs: awake ? Math.max(1000, demand + idleMs - input.nowMs) : undefined,
  };
}
