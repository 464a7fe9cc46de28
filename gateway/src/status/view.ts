// The status view: what /status shows and /status.json returns, built by a
// pure function from a snapshot of the gateway's state (status/snapshot.ts
// collects it). Rates are 0..1, or null when nothing was measured yet: an
// endpoint that served nothing has no hit rate, not a hit rate of zero.

import { z } from 'zod';
import type { TenantDirectory } from '../tenancy/tenant.ts';
import type { AdmissionSnapshot } from '../admission/index.ts';
import type { RuntimeLoad } from '../endpoints/book.ts';
import {
  WarmupGate,
  computeRoutableEndpoints,
  isHeldForWarmup,
  namespaceOf,
  type ModelRoute,
  type RouteEndpoint,
} from '../routing/table.ts';
import type { UpstreamFailureReason } from '../metrics/index.ts';
import type { DiscoveryIssue } from '../discovery/build-table.ts';
import type { L3UnitStatus } from '../kv-index/shared-l3.ts';
import type { EndpointActivity, ErrorRecord } from './activity.ts';
import { QualificationView } from '../discovery/qualification-view.ts';

const Count = z.number().int().nonnegative();
const Rate = z.number().min(0).max(1).nullable();

export const ErrorView = z.object({
  /** ISO 8601 */
  at: z.string(),
  status: z.number().int(),
  code: z.string(),
  message: z.string(),
});

export const EndpointStatus = z.object({
  id: z.string(),
  url: z.string(),
  role: z.enum(['standalone', 'prefill', 'decode']),
  ready: z.boolean(),
  verified: z.boolean(),
  /** Ready, verified, of a routable role and not held for warm-up: the gateway sends it generation. */
  routable: z.boolean(),
  /**
   * Its warm-up, when its CachePolicy declares one: warming (held from user traffic), warmed,
   * timed-out or none-warmed (both routed anyway), with the reason; null when not gated.
   */
  warmup: z
    .object({
      state: z.enum([WarmupGate.warming, WarmupGate.warmed, WarmupGate.timedOut, WarmupGate.noneWarmed]),
      message: z.string(),
    })
    .nullable(),
  fingerprint: z.string(),
  /** Its fingerprint is the deployment's current one (false during a rollout). */
  isCurrent: z.boolean(),
  inFlight: Count,
  /** `sglang:num_queue_reqs` from its /metrics; null when not scraped. */
  runtimeQueue: Count.nullable(),
  /** `sglang:token_usage`; null when not scraped. */
  kvUsage: Rate,
  /** Routing decisions that chose it (retries included). */
  routed: Count,
  /** Share of those decisions with a predicted prefix match. */
  predictedHitRate: Rate,
  /** Answers it gave that the gateway passed on (not reused ones). */
  served: Count,
  promptTokens: Count,
  cachedTokens: Count,
  /** cachedTokens / promptTokens, as the runtime reported them. */
  cacheHitRate: Rate,
  lastError: ErrorView.nullable(),
  /** Attempts to it that failed since the gateway started, by reason (retried ones included). */
  failedAttempts: z.object({ connect: Count, timeout: Count, status: Count, interrupted: Count }),
  /** Why this replica leaves it out of every pick for now (a refused or reset connection, or `draining`: its /ready said 503); null when it does not. */
  down: z.string().nullable(),
  /** Its KV index from the runtime's events; null when the runtime publishes none. */
  kvIndex: z
    .object({
      /** Routing reads the cache from the index (else from the response-corrected tree). */
      usable: z.boolean(),
      /** Why not, when not; when usable, why it is partial (a floor beside the tree), if it is. */
      reason: z.string(),
      blocks: Count,
      lagMs: Count.nullable(),
    })
    .nullable(),
});

export const DeploymentStatus = z.object({
  model: z.string(),
  deployment: z.string(),
  fingerprint: z.string(),
  policy: z.string(),
  /** Its share of the served name in a weighted split (0..1); null when it serves the name alone. */
  trafficShare: z.number().nullable(),
  /** Other namespaces whose Deployments serve the same name (each keeps its own claim); empty: none. */
  sharedWith: z.array(z.string()),
  admission: z.object({
    limit: Count,
    maxConcurrency: Count,
    inFlight: Count,
    queued: Count,
    maxQueue: Count,
    draining: z.boolean(),
  }),
  routing: z.object({
    promptTokens: Count,
    matchedTokens: Count,
    /** Prompt tokens the policy predicted cached where it routed them. */
    predictedTokenHitRate: Rate,
  }),
  reuse: z.object({
    enabled: z.boolean(),
    ttlSeconds: Count,
    fromStore: Count,
    sharedInFlight: Count,
    fresh: Count,
  }),
  routableEndpoints: Count,
  /**
   * Its shared HiCache L3 directories as the gateway models them (ADR 0034: from its replicas'
   * host-tier stores), one per role and identity: blocks held, their tokens, and the endpoints
   * sharing it. Empty: no reachable L3 tier.
   */
  l3: z.array(
    z.object({
      role: z.string(),
      fingerprint: z.string(),
      blocks: Count,
      tokens: Count,
      endpoints: z.array(z.string()),
    }),
  ),
  endpoints: z.array(EndpointStatus),
  /** The last error the gateway answered itself for this deployment. */
  lastError: ErrorView.nullable(),
});

export const AuthStatus = z.object({
  /** open: no API keys are checked; keys: a tenant's key is needed (401 without). */
  mode: z.enum(['open', 'keys']),
  tenants: z.array(
    z.object({
      id: z.string(),
      deployments: z.array(z.string()),
      requestsPerMinute: z.number().nullable(),
      tokensPerMinute: z.number().nullable(),
      priority: z.number(),
    }),
  ),
  /** Tenants or keys left out, and why (a missing Secret, a short or shared key). */
  issues: z.array(z.object({ tenant: z.string(), code: z.string(), message: z.string() })),
});

/** A Deployment, policy or endpoint discovery left out of the routing table, and why. */
export const DiscoveryIssueView = z.object({
  code: z.string(),
  /** `Kind namespace/name` of the object. */
  path: z.string(),
  model: z.string().nullable(),
  message: z.string(),
});

export const StatusView = z.object({
  generatedAt: z.string(),
  auth: AuthStatus,
  /** What discovery left out of the table (empty with a static --routes table). */
  discoveryIssues: z.array(DiscoveryIssueView),
  deployments: z.array(DeploymentStatus),
  /** Qualifications in the watched namespaces, as plotted (empty with a static --routes table). */
  qualifications: z.array(QualificationView),
});

export type ErrorView = z.infer<typeof ErrorView>;
export type EndpointStatus = z.infer<typeof EndpointStatus>;
export type DeploymentStatus = z.infer<typeof DeploymentStatus>;
export type StatusView = z.infer<typeof StatusView>;
export type AuthStatus = z.infer<typeof AuthStatus>;
export type DiscoveryIssueView = z.infer<typeof DiscoveryIssueView>;

export interface DecisionCounts {
  readonly routed: number;
  readonly predictedHits: number;
}

export interface StatusSnapshot {
  /** Wall-clock milliseconds since the epoch. */
  readonly now: number;
  readonly routes: readonly ModelRoute[];
  /** By deployment; absent until the deployment's first request. */
  readonly admission: ReadonlyMap<string, AdmissionSnapshot>;
  /** By endpoint id. */
  readonly inFlight: ReadonlyMap<string, number>;
  readonly runtimeLoad: ReadonlyMap<string, RuntimeLoad>;
  readonly decisions: ReadonlyMap<string, DecisionCounts>;
  readonly activity: ReadonlyMap<string, EndpointActivity>;
  /** By endpoint id: its KV index, when it publishes events. */
  readonly kvIndex: ReadonlyMap<string, EndpointStatus['kvIndex']>;
  /** The shared L3 directories the gateway models (kv-index/shared-l3.ts); absent: none. */
  readonly l3?: readonly L3UnitStatus[];
  /** By endpoint id: why a failed connection took it out of picks, while that holds. */
  readonly down: ReadonlyMap<string, string>;
  /** By endpoint id, then reason. */
  readonly failures: ReadonlyMap<string, Readonly<Partial<Record<UpstreamFailureReason, number>>>>;
  /** By model. */
  readonly routingTokens: ReadonlyMap<string, { readonly prompt: number; readonly matched: number }>;
  /** By model, then reuse source (store, inflight, fresh). */
  readonly reuse: ReadonlyMap<string, Readonly<Record<string, number>>>;
  /** By deployment. */
  readonly deploymentErrors: ReadonlyMap<string, ErrorRecord>;
  readonly tenants: TenantDirectory;
  readonly discoveryIssues: readonly DiscoveryIssue[];
  readonly qualifications?: readonly QualificationView[];
}

/** The route's weight over its served name's total (ADR 0008); null outside a split. */
function computeTrafficShare(route: ModelRoute, routes: readonly ModelRoute[]): number | null {
  if (route.weight === undefined) return null;
  const total = routes
    .filter((r) => r.model === route.model && namespaceOf(r) === namespaceOf(route))
    .reduce((n, r) => n + (r.weight ?? 0), 0);
  return total > 0 ? route.weight / total : 0;
}

export function buildStatusView(s: StatusSnapshot): StatusView {
  return {
    generatedAt: new Date(s.now).toISOString(),
    auth: {
      mode: s.tenants.mode,
      tenants: s.tenants.tenants().map((t) => ({
        id: t.id,
        deployments: [...t.deployments].sort(compare),
        requestsPerMinute: t.limits.requestsPerMinute ?? null,
        tokensPerMinute: t.limits.tokensPerMinute ?? null,
        priority: t.priority,
      })),
      issues: s.tenants.issues().map((i) => ({ ...i })),
    },
    discoveryIssues: s.discoveryIssues.map(buildDiscoveryIssueView),
    deployments: [...s.routes]
      .sort((a, b) => compare(a.model, b.model))
      .map((route) => buildDeploymentStatus(route, s)),
    qualifications: [...(s.qualifications ?? [])],
  };
}

function buildDiscoveryIssueView(i: DiscoveryIssue): DiscoveryIssueView {
  const model = 'model' in i ? i.model : null;
  switch (i.code) {
    case 'DuplicateModel':
      return { code: i.code, path: i.path, model, message: `the name is served by ${i.servedBy}` };
    case 'NotRoutable':
      return { code: i.code, path: i.path, model, message: `${i.reason}: ${i.message}` };
    default:
      return { code: i.code, path: i.path, model, message: i.message };
  }
}

function buildDeploymentStatus(route: ModelRoute, s: StatusSnapshot): DeploymentStatus {
  const tokens = s.routingTokens.get(route.model) ?? { prompt: 0, matched: 0 };
  const reuse = s.reuse.get(route.model) ?? {};
  const routable = new Set(computeRoutableEndpoints(route).map((e) => e.id));
  // Prefill/decode pairs: both roles receive generation when ready and verified.
  for (const e of route.endpoints)
    if (e.ready && e.verified && e.role !== 'standalone' && !isHeldForWarmup(e)) routable.add(e.id);
  const lastError = s.deploymentErrors.get(route.deployment);
  return {
    model: route.model,
    deployment: route.deployment,
    fingerprint: route.fingerprint,
    policy: route.routing.policy,
    trafficShare: computeTrafficShare(route, s.routes),
    sharedWith: [...(route.sharedWith ?? [])],
    admission: buildAdmissionStatus(route, s.admission.get(route.deployment)),
    routing: {
      promptTokens: round(tokens.prompt),
      matchedTokens: round(tokens.matched),
      predictedTokenHitRate: ratio(tokens.matched, tokens.prompt),
    },
    reuse: {
      enabled: route.reuse.enabled,
      ttlSeconds: route.reuse.ttlSeconds,
      fromStore: round(reuse['store'] ?? 0),
      sharedInFlight: round(reuse['inflight'] ?? 0),
      fresh: round(reuse['fresh'] ?? 0),
    },
    routableEndpoints: routable.size,
    l3: (s.l3 ?? [])
      .filter((u) => u.deployment === route.deployment)
      .map((u) => ({
        role: u.role,
        fingerprint: u.fingerprint,
        blocks: u.blocks,
        tokens: u.blocks * u.blockSize,
        endpoints: [...u.endpoints],
      })),
    endpoints: [...route.endpoints]
      .sort((a, b) => compare(a.id, b.id))
      .map((e) => buildEndpointStatus(e, route, routable.has(e.id), s)),
    lastError: lastError ? buildErrorView(lastError) : null,
  };
}

function buildAdmissionStatus(
  route: ModelRoute,
  adm: AdmissionSnapshot | undefined,
): DeploymentStatus['admission'] {
  const cfg = route.admission;
  if (!adm)
    return {
      limit: cfg.maxConcurrency,
      maxConcurrency: cfg.maxConcurrency,
      inFlight: 0,
      queued: 0,
      maxQueue: cfg.maxQueue,
      draining: false,
    };
  return {
    limit: adm.limit,
    maxConcurrency: cfg.maxConcurrency,
    inFlight: adm.inFlight,
    queued: adm.queued,
    maxQueue: cfg.maxQueue,
    draining: adm.draining,
  };
}

function buildEndpointStatus(
  e: RouteEndpoint,
  route: ModelRoute,
  routable: boolean,
  s: StatusSnapshot,
): EndpointStatus {
  const load = s.runtimeLoad.get(e.id);
  const d = s.decisions.get(e.id) ?? { routed: 0, predictedHits: 0 };
  const a = s.activity.get(e.id) ?? { served: 0, promptTokens: 0, cachedTokens: 0, lastError: undefined };
  return {
    id: e.id,
    url: e.url,
    role: e.role,
    ready: e.ready,
    verified: e.verified,
    routable,
    warmup: e.warmup ? { state: e.warmup.state, message: e.warmup.message } : null,
    fingerprint: e.fingerprint,
    isCurrent: e.fingerprint === route.fingerprint,
    inFlight: s.inFlight.get(e.id) ?? 0,
    runtimeQueue: load ? round(load.queued) : null,
    kvUsage: load?.tokenUsage === undefined ? null : clamp01(load.tokenUsage),
    routed: round(d.routed),
    predictedHitRate: ratio(d.predictedHits, d.routed),
    served: a.served,
    promptTokens: a.promptTokens,
    cachedTokens: a.cachedTokens,
    cacheHitRate: ratio(a.cachedTokens, a.promptTokens),
    lastError: a.lastError ? buildErrorView(a.lastError) : null,
    failedAttempts: buildFailedAttempts(s.failures.get(e.id)),
    down: s.down.get(e.id) ?? null,
    kvIndex: s.kvIndex.get(e.id) ?? null,
  };
}

function buildFailedAttempts(
  f: Readonly<Partial<Record<UpstreamFailureReason, number>>> | undefined,
): EndpointStatus['failedAttempts'] {
  return {
    connect: round(f?.connect ?? 0),
    timeout: round(f?.timeout ?? 0),
    status: round(f?.status ?? 0),
    interrupted: round(f?.interrupted ?? 0),
  };
}

function buildErrorView(e: ErrorRecord): ErrorView {
  return { at: new Date(e.at).toISOString(), status: e.status, code: e.code, message: e.message };
}

function ratio(part: number, whole: number): number | null {
  return whole > 0 ? clamp01(part / whole) : null;
}

function clamp01(x: number): number {
  return Math.min(1, Math.max(0, x));
}

function round(x: number): number {
  return Math.max(0, Math.round(x));
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
