// The CacheHealthy condition from what was measured: pure, one Deployment.
//
// It compares the runtimes' own hit rate (their counters over the window)
// with what the gateway's routing expected cached for the same window, and
// names the likely cause of a gap. A full HiCache host tier is normal for a
// cache; it is a fault only when hits are lost to it, so it is the reason
// only beside a gap. Too little traffic to judge is Unknown, not healthy.
import type { CacheHealthStatus, Condition, DeploymentStatus } from '#api';
import { findCondition } from '../../../manager/conditions.ts';
import type { HostTier } from './runtime-sample.ts';

export const CacheHealthReason = {
  Healthy: 'Healthy',
  /** No ready, verified endpoint that prefills (scaled to zero, or starting). */
  NoEndpoints: 'NoEndpoints',
  /** Fewer than two readings yet (the operator just started, or leads since moments ago). */
  Measuring: 'Measuring',
  NotEnoughTraffic: 'NotEnoughTraffic',
  MetricsUnavailable: 'MetricsUnavailable',
  /** The operator is told to compare with the gateway and could read no replica's report. */
  GatewayUnreadable: 'GatewayUnreadable',
  EventsLagging: 'EventsLagging',
  HostTierFull: 'HostTierFull',
  PredictionGap: 'PredictionGap',
} as const;

/** Prompt tokens in the window, on each side, before a hit rate is judged. */
export const MIN_PROMPT_TOKENS = 1_000;
/** A gap: the runtimes hit at least this much less than predicted (absolute)... */
export const GAP_ABSOLUTE = 0.1;
/** ...and less than this share of the prediction. */
export const GAP_RELATIVE = 0.8;
/**
 * A gap already reported ends only when the runtimes come this much closer than the bounds that
 * opened it (within 0.07 absolute, or at 0.85 of the prediction): a hit rate hovering at a bound
 * must not flip the condition, with an event each time, on every pass.
 */
export const GAP_HYSTERESIS = { absolute: 0.03, relative: 0.05 } as const;
/** A host tier this full, beside a gap, is the gap's likely cause. */
export const HOST_TIER_FULL = 0.95;
/** An endpoint's event index may be unusable this long (a new subscription, a replay) before it counts. */
export const EVENTS_GRACE_MS = 60_000;

export interface EndpointEventsView {
  readonly usable: boolean;
  readonly reason: string;
  /** How long the gateway has reported it unusable, as far as the operator has seen. */
  readonly unusableForMs: number;
}

/** An endpoint's own counters over the window. */
export interface RuntimeDelta {
  readonly promptTokens: number;
  readonly cachedTokens: number;
  readonly seconds: number;
}

/** One prefilling endpoint (standalone or prefill) that is ready and verified. */
export interface EndpointCacheObservation {
  readonly pod: string;
  /** Its counters over the window; undefined until two readings exist. */
  readonly delta: RuntimeDelta | undefined;
  readonly host: HostTier | undefined;
  /** Why the last /metrics read failed; undefined when it succeeded. */
  readonly scrapeError: string | undefined;
  /** The gateway's view of its KV-event index; undefined: it publishes none, or the gateway does not say. */
  readonly events: EndpointEventsView | undefined;
}

export type GatewayObservation =
  | { readonly kind: 'off' }
  | { readonly kind: 'unreachable'; readonly error: string }
  /** `prediction` undefined: no gateway replica routed this Deployment in the window. */
  | {
      readonly kind: 'read';
      readonly prediction: { readonly promptTokens: number; readonly predictedTokens: number } | undefined;
    };

export interface CacheHealthObservation {
  readonly windowSeconds: number;
  readonly endpoints: readonly EndpointCacheObservation[];
  readonly gateway: GatewayObservation;
  /** Where the host tier is sized in this Deployment's spec, for the HostTierFull advice. */
  readonly hostTierField: string;
  /** The reason of this Deployment's previous assessment, if any: a gap it reported holds longer. */
  readonly previousReason?: string | undefined;
}

export interface CacheHealthAssessment {
  readonly condition: Pick<Condition, 'status' | 'reason' | 'message'>;
  readonly cache: CacheHealthStatus | undefined;
}

const round2 = (x: number): number => Math.round(x * 100) / 100;
const roundSignificant = (x: number): number => (x > 0 ? Number(x.toPrecision(2)) : 0);
const percent = (x: number): string => `${Math.round(x * 100)}%`;

function describePrediction(gateway: GatewayObservation, predicted: number | undefined): string {
  if (predicted !== undefined) return `routing expected ${predicted.toFixed(2)}`;
  if (gateway.kind === 'off') return 'the operator reads no gateway (--gateway-admin-url)';
  return 'the gateway routed too little here to compare';
}

interface Figures {
  readonly measured: readonly EndpointCacheObservation[];
  readonly failed: readonly EndpointCacheObservation[];
  readonly promptTokens: number;
  readonly hitRate: number | undefined;
  readonly predicted: number | undefined;
  readonly fullest: { readonly pod: string; readonly usage: number } | undefined;
  readonly cache: CacheHealthStatus;
}

/** The window's sums over the endpoints, the prediction to compare, and the status figures. */
function computeFigures(obs: CacheHealthObservation): Figures {
  const measured = obs.endpoints.filter((e) => e.delta !== undefined);
  const failed = obs.endpoints.filter((e) => e.scrapeError !== undefined);
  const promptTokens = measured.reduce((n, e) => n + (e.delta?.promptTokens ?? 0), 0);
  const cachedTokens = measured.reduce((n, e) => n + (e.delta?.cachedTokens ?? 0), 0);
  const fullest = obs.endpoints
    .flatMap((e) =>
      e.host && e.host.totalTokens > 0 ? [{ pod: e.pod, usage: e.host.usedTokens / e.host.totalTokens }] : [],
    )
    .sort((a, b) => b.usage - a.usage)[0];
  const prediction = obs.gateway.kind === 'read' ? obs.gateway.prediction : undefined;
  const predicted =
    prediction && prediction.promptTokens >= MIN_PROMPT_TOKENS
      ? prediction.predictedTokens / prediction.promptTokens
      : undefined;
  const hitRate = promptTokens > 0 ? cachedTokens / promptTokens : undefined;
  // Two significant digits, like the rates: steady traffic leaves status (and its writes) alone.
  const cache: CacheHealthStatus = {
    windowSeconds: obs.windowSeconds,
    promptTokens: roundSignificant(promptTokens),
    ...(hitRate !== undefined ? { hitRate: round2(hitRate) } : {}),
    ...(predicted !== undefined ? { predictedHitRate: round2(predicted) } : {}),
    ...(fullest ? { hostTierUsage: round2(fullest.usage) } : {}),
  };
  return { measured, failed, promptTokens, hitRate, predicted, fullest, cache };
}

/** Routing expected `predicted` and the runtimes hit `hitRate`: a gap, with hysteresis once reported. */
function isGap(predicted: number, hitRate: number, previousReason: string | undefined): boolean {
  const reported =
    previousReason === CacheHealthReason.PredictionGap || previousReason === CacheHealthReason.HostTierFull;
  const absolute = GAP_ABSOLUTE - (reported ? GAP_HYSTERESIS.absolute : 0);
  const relative = GAP_RELATIVE + (reported ? GAP_HYSTERESIS.relative : 0);
  return predicted - hitRate >= absolute && hitRate < relative * predicted;
}

const verdict = (
  status: Condition['status'],
  reason: string,
  message: string,
  cache?: CacheHealthStatus,
): CacheHealthAssessment => ({ condition: { status, reason, message }, cache });

export function assessCacheHealth(obs: CacheHealthObservation): CacheHealthAssessment {
  const { endpoints } = obs;
  if (endpoints.length === 0)
    return verdict(
      'Unknown',
      CacheHealthReason.NoEndpoints,
      'no ready, verified endpoint that prefills to measure',
    );

  const lagging = endpoints.filter(
    (e) => e.events && !e.events.usable && e.events.unusableForMs >= EVENTS_GRACE_MS,
  );
  const { measured, failed, promptTokens, hitRate, predicted, fullest, cache } = computeFigures(obs);

  if (lagging.length > 0)
    return verdict(
      'False',
      CacheHealthReason.EventsLagging,
      `the gateway routes ${lagging.map((e) => `${e.pod} (${e.events?.reason ?? ''})`).join(', ')} from its ` +
        "approximate tree, not from the runtime's KV events: check that the gateway reaches the pods' event " +
        'ports (NetworkPolicy) and is not starved of CPU',
      cache,
    );
  if (measured.length === 0 && failed.length === endpoints.length)
    return verdict(
      'Unknown',
      CacheHealthReason.MetricsUnavailable,
      `/metrics could not be read: ${failed.map((e) => `${e.pod}: ${e.scrapeError ?? ''}`).join('; ')}`,
    );
  if (measured.length === 0)
    return verdict(
      'Unknown',
      CacheHealthReason.Measuring,
      'measuring: a hit rate needs two readings of /metrics',
    );
  if (hitRate === undefined || promptTokens < MIN_PROMPT_TOKENS)
    return verdict(
      'Unknown',
      CacheHealthReason.NotEnoughTraffic,
      `${cache.promptTokens} prompt tokens in the last ${cache.windowSeconds} s; the hit rate is judged from ${MIN_PROMPT_TOKENS}`,
      cache,
    );

  const observed = `the runtimes hit ${hitRate.toFixed(2)} of ${cache.promptTokens} prompt tokens in the last ${cache.windowSeconds} s`;
  if (obs.gateway.kind === 'unreachable')
    return verdict(
      'Unknown',
      CacheHealthReason.GatewayUnreadable,
      `${observed}; no gateway replica's cache report could be read (${obs.gateway.error}), so routing's ` +
        "predictions and KV events cannot be judged: the operator must reach the gateway's admin port " +
        '(--gateway-admin-url; the chart admits it through networkPolicy.metricsFrom)',
      cache,
    );
  const gap = predicted !== undefined && isGap(predicted, hitRate, obs.previousReason);
  if (gap && fullest && fullest.usage >= HOST_TIER_FULL)
    return verdict(
      'False',
      CacheHealthReason.HostTierFull,
      `${observed} where routing expected ${predicted.toFixed(2)}, and ${fullest.pod}'s HiCache host tier is ` +
        `${percent(fullest.usage)} full: prefixes are evicted before they are reused; give the host tier more ` +
        `memory (${obs.hostTierField}.ratio or sizeGB) or add replicas`,
      cache,
    );
  if (gap)
    return verdict(
      'False',
      CacheHealthReason.PredictionGap,
      `${observed} where routing expected ${predicted.toFixed(2)}: requests go where the gateway believes ` +
        "their prefix is cached and it is not; check the gateway's /status (tokenizer, KV events per " +
        "endpoint) and the runtimes' KV usage (evictions under memory pressure)",
      cache,
    );
  const host = fullest ? `; host tier ${percent(fullest.usage)} full at ${fullest.pod}` : '';
  const unread = failed.length > 0 ? `; /metrics unread at ${failed.map((e) => e.pod).join(', ')}` : '';
  return verdict(
    'True',
    CacheHealthReason.Healthy,
    `${observed}; ${describePrediction(obs.gateway, predicted)}${host}${unread}`,
    cache,
  );
}

const NOT_MEASURED: CacheHealthAssessment = {
  condition: { status: 'Unknown', reason: CacheHealthReason.Measuring, message: 'not measured yet' },
  cache: undefined,
};

/**
 * What to write: the fresh assessment, except while it is only Measuring (an operator that just
 * started or took the lead has no readings yet), when the verdict status already holds stands. A
 * restart then writes nothing until it has measured, and a verdict never flaps through Unknown.
 */
export function chooseCacheVerdict(
  fresh: CacheHealthAssessment | undefined,
  previous: DeploymentStatus | undefined,
): CacheHealthAssessment {
  if (fresh && fresh.condition.reason !== CacheHealthReason.Measuring) return fresh;
  const standing = findCondition(previous?.conditions, 'CacheHealthy');
  if (standing && standing.reason !== CacheHealthReason.Measuring)
    return {
      condition: { status: standing.status, reason: standing.reason, message: standing.message },
      cache: previous?.cache,
    };
  return fresh ?? NOT_MEASURED;
}
