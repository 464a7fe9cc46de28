// Wake from zero, pure: a Deployment with wakeOnDemand and replicas 0 runs
// wake.replicas while the gateway tier has wanted it within wake.idleSeconds,
// and 0 otherwise. The demand comes from the watcher's memory (watcher.ts) or,
// after a restart, from status.wake.demandAt; status keeps it coarsely (at
// most one write per quarter of the idle time while busy): a new leader may
// put a Deployment to sleep up to that much early (until the next request
// wakes it), and there is no status write every read.
//
// A prefill/decode pair is routable only with both parts up: it sleeps when
// both parts are declared at 0, and both parts wake and sleep together. The
// woken replicas go only into what is rendered, as for a standalone Deployment:
// the Deployment's spec and each DeploymentPart's spec.replicas (its
// autoscaler's, ADR 0015) are not written, and a part someone scaled above
// wake.replicas keeps its own.
import { declaresSleep, WakeSettings, type DeploymentResource, type DeploymentStatus } from '#api';

export interface WakeInput {
  readonly spec: Pick<DeploymentResource['spec'], 'replicas' | 'wakeOnDemand' | 'wake' | 'disaggregation'>;
  readonly status: DeploymentStatus['wake'];
  /** The last time the watcher saw the tier want it (ms), if it has. */
  readonly demandMs: number | undefined;
  readonly nowMs: number;
  /** The operator reads the gateway tier for demand (--gateway-admin-url); false: nothing can wake it. */
  readonly watching: boolean;
}

export interface WakePlan {
  /**
   * While it follows demand, the replicas to run (each part's, with disaggregation): wake.replicas
   * awake, 0 asleep. Undefined: it does not follow demand, and runs what its spec says.
   */
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
  if (!declaresSleep(spec)) return { replicas: undefined, status: undefined, recheckAfterMs: undefined };
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

/**
 * The Deployment as rendered under its wake plan: a standalone one runs the plan's replicas; each
 * part of a pair runs at least them (what its DeploymentPart says, already in `root`, otherwise).
 */
export function withWokenReplicas(root: DeploymentResource, plan: WakePlan): DeploymentResource {
  const woken = plan.replicas;
  if (woken === undefined) return root;
  const d = root.spec.disaggregation;
  if (!d) return root.spec.replicas === woken ? root : { ...root, spec: { ...root.spec, replicas: woken } };
  if (d.prefill.replicas >= woken && d.decode.replicas >= woken) return root;
  const part = <P extends typeof d.prefill>(p: P): P => ({ ...p, replicas: Math.max(p.replicas, woken) });
  return {
    ...root,
    spec: { ...root.spec, disaggregation: { ...d, prefill: part(d.prefill), decode: part(d.decode) } },
  };
}
