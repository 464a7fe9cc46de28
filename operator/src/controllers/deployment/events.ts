import type { Condition, DeploymentStatus, Endpoint } from '#api';

export interface PlannedEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

function byPod(endpoints: readonly Endpoint[] | undefined): Map<string, Endpoint> {
  return new Map((endpoints ?? []).map((e) => [e.pod, e]));
}

function planEndpointEvents(previous: DeploymentStatus | undefined, next: DeploymentStatus): PlannedEvent[] {
  const before = byPod(previous?.endpoints);
  return (next.endpoints ?? []).flatMap((e): PlannedEvent[] => {
    const old = before.get(e.pod);
    if (e.verified && !(old?.verified ?? false)) {
      return [
        {
          type: 'Normal',
          reason: 'EndpointVerified',
          message: `pod ${e.pod} (${e.role}) at ${e.ip}:${e.port} reports the declared identity`,
        },
      ];
    }
    if (e.reason === 'NotOwned' && old?.reason !== 'NotOwned')
      return [{ type: 'Warning', reason: 'PodNotOwned', message: `pod ${e.pod}: ${e.message ?? ''}` }];
    const newMismatch =
      e.reason === 'IdentityMismatch' && (old?.reason !== 'IdentityMismatch' || old.message !== e.message);
    return newMismatch
      ? [
          {
            type: 'Warning',
            reason: 'IdentityMismatch',
            message: `pod ${e.pod}: ${e.message ?? ''}; the gateway will not route to it`,
          },
        ]
      : [];
  });
}

/**
 * A model that cannot be delivered is announced once per reason, with the file or the cause
 * (its message); its verified delivery once. Waiting (Pending, Fetching) is no news.
 */
function planModelEvents(c: Condition): PlannedEvent[] {
  if (c.status === 'False' && c.reason !== 'Pending' && c.reason !== 'Fetching')
    return [{ type: 'Warning', reason: c.reason, message: c.message }];
  if (c.status === 'True' && c.reason === 'Verified')
    return [{ type: 'Normal', reason: 'ModelVerified', message: c.message }];
  return [];
}

function planConditionEvents(previous: DeploymentStatus | undefined, next: DeploymentStatus): PlannedEvent[] {
  const prevConds = new Map((previous?.conditions ?? []).map((c) => [c.type, c]));
  return (next.conditions ?? []).flatMap((c): PlannedEvent[] => {
    const old = prevConds.get(c.type);
    if (old && old.status === c.status && old.reason === c.reason) return [];
    if (c.type === 'Ready' && (c.status === 'True' || old !== undefined)) {
      const ready = c.status === 'True';
      return [
        { type: ready ? 'Normal' : 'Warning', reason: ready ? 'Ready' : 'NotReady', message: c.message },
      ];
    }
    if (c.type === 'Progressing' && c.status === 'False')
      return [{ type: 'Warning', reason: c.reason, message: c.message }];
    if (c.type === 'ModelReady') return planModelEvents(c);
    // Another namespace served the name first (served-name.ts): said once, when it starts.
    if (c.type === 'ServedNameShared' && c.status === 'True')
      return [{ type: 'Warning', reason: c.reason, message: c.message }];
    // A cache fault is announced once, and its end once (Unknown is only "not measured yet").
    if (c.type === 'CacheHealthy' && c.status === 'False')
      return [{ type: 'Warning', reason: c.reason, message: c.message }];
    if (c.type === 'CacheHealthy' && c.status === 'True' && old?.status === 'False')
      return [{ type: 'Normal', reason: 'CacheHealthy', message: c.message }];
    return [];
  });
}

/** Reasons an L3 tier is on its way, not at fault: no event for them. */
const L3_ON_ITS_WAY = new Set(['ClaimPending', 'StoreStarting']);

/** An L3 tier that turns unreachable for a fault (l3/status.ts, l3/mooncake-status.ts), once per reason; its return once. */
function planL3Events(previous: DeploymentStatus | undefined, next: DeploymentStatus): PlannedEvent[] {
  const before = new Map((previous?.l3 ?? []).map((t) => [t.role, t]));
  return (next.l3 ?? []).flatMap((t): PlannedEvent[] => {
    const old = before.get(t.role);
    if (!t.reachable && t.reason && !L3_ON_ITS_WAY.has(t.reason) && old?.reason !== t.reason)
      return [
        {
          type: 'Warning',
          reason: `L3${t.reason}`,
          message: `${t.role} L3 (${t.backend}): ${t.message ?? ''}`,
        },
      ];
    if (t.reachable && old && !old.reachable && old.reason && !L3_ON_ITS_WAY.has(old.reason))
      return [
        { type: 'Normal', reason: 'L3Reachable', message: `${t.role} L3 (${t.backend}) is reachable again` },
      ];
    return [];
  });
}

/**
 * The events a person should see for a status change: endpoints newly verified
 * or refused, condition flips, and an L3 tier at fault. Pure; the shell emits them after the status
 * write succeeded, so an event never announces a state that was not stored.
 */
export function planEvents(previous: DeploymentStatus | undefined, next: DeploymentStatus): PlannedEvent[] {
  return [
    ...planEndpointEvents(previous, next),
    ...planConditionEvents(previous, next),
    ...planL3Events(previous, next),
  ];
}
