// Whether an endpoint waits for its warm-up before it takes user traffic. Pure:
// a Deployment, its governing CachePolicy (with status) and the wall clock in,
// a verdict per endpoint out.
//
// The rule, when the policy declares spec.warmup (and routeAfterSeconds > 0):
// 1. An endpoint that prefills (standalone or prefill; a decode endpoint gets its
//    KV from prefill and never waits) is warmed when the policy's status has a
//    Warmed entry for its container instance: its pod AND its restart count (a
//    restarted container lost its cache; the operator warms it again).
// 2. Otherwise it is held (not offered user traffic) until routeAfterSeconds
//    after its warm-up became due (the entry's `since`, which the operator sets
//    when it first sees the instance serving; before the operator wrote one, the
//    endpoint's verifiedAt). After that it is routed anyway: timed-out.
// 3. A Deployment never loses all its prefilling endpoints to warm-up: when none
//    is warmed or timed out, every held one is routed (none-warmed), so a model
//    that is starting, or whose warm-up is failing, keeps serving.
// The gateway's clock and the operator's may disagree by their skew; the bound
// is minutes, the skew is expected to be far smaller.

import type { CachePolicyResource, DeploymentResource } from '#api';
import { WarmupGate, type RouteEndpointWarmup } from '../routing/table.ts';

type StatusEndpoint = NonNullable<NonNullable<DeploymentResource['status']>['endpoints']>[number];

export interface WarmupVerdicts {
  /** By pod name; endpoints without a verdict are not gated. */
  readonly byPod: ReadonlyMap<string, RouteEndpointWarmup>;
  /** Wall-clock ms when a verdict changes by time alone (a held endpoint times out); absent: never. */
  readonly wakeAt?: number;
}

const NONE: WarmupVerdicts = { byPod: new Map() };

type WarmupEntry = NonNullable<
  NonNullable<NonNullable<CachePolicyResource['status']>['targets']>[number]['warmup']
>[number];

/** One endpoint's verdict by rules 1 and 2, and when it ends by time alone. */
function computeVerdict(
  e: StatusEndpoint,
  entry: WarmupEntry | undefined,
  routeAfterMs: number,
  nowMs: number,
): { verdict: RouteEndpointWarmup; wakeAt?: number } {
  if (entry?.state === 'Warmed')
    return { verdict: { state: WarmupGate.warmed, message: `warmed at ${entry.warmedAt ?? entry.since}` } };
  const since = Date.parse(entry?.since ?? e.verifiedAt ?? '');
  const detail = entry?.message ? `: ${entry.message}` : '';
  const state = entry ? `warm-up ${entry.state}${detail}` : 'warm-up not started';
  if (!Number.isFinite(since) || nowMs >= since + routeAfterMs)
    return {
      verdict: {
        state: WarmupGate.timedOut,
        message: `${state}; routed anyway: not warmed within routeAfterSeconds (${routeAfterMs / 1000} s)`,
      },
    };
  // A fixed deadline, not the time left: an unchanged verdict keeps the route object unchanged.
  const until = new Date(since + routeAfterMs).toISOString();
  return {
    verdict: {
      state: WarmupGate.warming,
      message: `${state}; held from user traffic until warmed, or until ${until} (routeAfterSeconds ${routeAfterMs / 1000})`,
    },
    wakeAt: since + routeAfterMs,
  };
}

export function computeWarmupVerdicts(
  d: DeploymentResource,
  policy: CachePolicyResource | undefined,
  endpoints: readonly StatusEndpoint[],
  nowMs: number,
): WarmupVerdicts {
  const routeAfterMs = (policy?.spec.warmup?.routeAfterSeconds ?? 0) * 1000;
  if (!policy?.spec.warmup || routeAfterMs <= 0) return NONE;
  const target = policy.status?.targets?.find((t) => t.name === d.metadata.name && t.accepted);
  const entries = target?.warmup ?? [];
  const verdicts = new Map<string, RouteEndpointWarmup>();
  const wakes: number[] = [];
  for (const e of endpoints) {
    if (e.role === 'decode') continue;
    const entry = entries.find((w) => w.pod === e.pod && w.restartCount === (e.restartCount ?? 0));
    const { verdict, wakeAt } = computeVerdict(e, entry, routeAfterMs, nowMs);
    verdicts.set(e.pod, verdict);
    if (wakeAt !== undefined) wakes.push(wakeAt);
  }
  const gated = [...verdicts.values()];
  if (gated.length > 0 && gated.every((v) => v.state === WarmupGate.warming)) {
    for (const [pod, v] of verdicts)
      verdicts.set(pod, {
        state: WarmupGate.noneWarmed,
        message: `${v.message.slice(0, v.message.indexOf(';'))}; routed anyway: no endpoint of this deployment is warmed yet, and refusing traffic would be worse`,
      });
  }
  return wakes.length > 0 ? { byPod: verdicts, wakeAt: Math.min(...wakes) } : { byPod: verdicts };
}
