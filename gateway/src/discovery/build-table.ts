// The routing table from Kubernetes state, as plain data: the Deployments and
// CachePolicies of the watched namespaces in, one ModelRoute per served model
// name out, with the reasons for everything left out. No I/O; the watcher
// (watcher.ts) feeds it the informer caches and swaps the result in.
//
// Rules, in order:
// 1. Objects are validated with the API's zod schemas; an invalid one is left
//    out (an issue says why). A Deployment being deleted is left out.
// 2. Endpoints fail closed: only `ready && verified` ones, only roles the spec
//    declares (standalone, or prefill + decode), only with an IP. A PD
//    deployment keeps only endpoints whose fingerprint has both roles, so the
//    policy never picks a prefill that has no decode of its revision.
// 3. `status.routable` gates generation: not true (or absent: fail closed) →
//    the model stays listed with no endpoints (503 GW_NO_ENDPOINT, "try
//    later"), not 404 ("no such model"). HiSparse decode alone and unpaired PD
//    deployments are not routable by the operator's status.
// 4. The governing CachePolicy is the one whose status accepts the Deployment
//    (and whose spec still targets it); the oldest wins if stale status shows
//    two, as the operator decides. Its salt is the status `cacheSalt`.
//    Without one: zod defaults for routing/admission/reuse and a salt derived
//    from the Kubernetes namespace (DEFAULT_CACHE_NAMESPACE_PREFIX), which no
//    CachePolicy can produce since cacheNamespace is a DNS label.
// 5. A served name belongs to its namespace (issue 30): in each namespace the
//    oldest Deployment serving it (creationTimestamp, then name) keeps the
//    name, the others of that namespace are refused. Never chosen by health:
//    a name must not move because one Deployment is momentarily unready.
//    Except a weighted split (ADR 0008): when the oldest sets
//    spec.traffic.weight, the Deployments of its namespace that serve the
//    name and set a weight share it by weight. Another namespace serving the
//    same name takes nothing away: each claim stays in the table, a tenant
//    reaches only its own namespace's (routing/lookup.ts), an open gateway
//    asks the client to name the namespace, and every claim but the oldest
//    is reported (SharedModelName) and carries the others on its route.
// 6. Warm-up (warmup-gate.ts): where the governing CachePolicy declares
//    spec.warmup, a prefilling endpoint not yet warmed is held from user
//    traffic for at most routeAfterSeconds, and a Deployment none of whose
//    endpoints is warmed keeps them all. Held endpoints stay in the route,
//    marked (RouteEndpoint.warmup), so /status shows them and their KV events
//    are indexed before their first request; `wakeAt` says when a hold ends by
//    time alone, so the watcher rebuilds then.
// 7. What a runtime reported is held to its Deployment's spec (lib/api/event-bounds.ts):
//    an endpoint whose events are out of bounds is left out (an issue says
//    why), and a Deployment whose route cannot be built at all is left out
//    alone: one Deployment's status never stops the others' routing.

import { isDeepStrictEqual } from 'node:util';
import {
  declaresSleep,
  Admission,
  ResultReuse,
  RoutingSettings,
  validateResource,
  type CachePolicyResource,
  type DeploymentResource,
  type EndpointEvents,
  WakeSettings,
} from '#api';
import { computeDeploymentSalt, findAcceptingPolicy } from '#api/cache-binding.ts';
import { checkEndpointEvents } from '#api/event-bounds.ts';
import { computeWarmupVerdicts } from './warmup-gate.ts';
import {
  EndpointRole,
  namespaceOf,
  type ModelRoute,
  type RouteEndpoint,
  type RouteEndpointEvents,
} from '../routing/table.ts';
import { buildEndpointUrl, formatHost } from '#sglang/endpoint-url.ts';

/** Prefix of the cache namespace used when no CachePolicy governs a Deployment. */
export { DEFAULT_CACHE_NAMESPACE_PREFIX } from '#api/cache-binding.ts';

export const DiscoveryIssueCode = {
  InvalidObject: 'InvalidObject',
  DuplicateModel: 'DuplicateModel',
  SharedModelName: 'SharedModelName',
  NotRoutable: 'NotRoutable',
  /** An endpoint reported more than its Deployment declared (lib/api/event-bounds.ts): left out. */
  RuntimeOutOfBounds: 'RuntimeOutOfBounds',
  /** Building the Deployment's route failed: the Deployment is left out, the others stay. */
  RouteBuildFailed: 'RouteBuildFailed',
} as const;

export type DiscoveryIssue =
  | {
      readonly code: typeof DiscoveryIssueCode.InvalidObject;
      /** `Kind namespace/name` of the refused object. */
      readonly path: string;
      readonly message: string;
    }
  | {
      readonly code: typeof DiscoveryIssueCode.DuplicateModel;
      readonly path: string;
      readonly model: string;
      /** namespace/name of the Deployment that keeps the name. */
      readonly servedBy: string;
    }
  | {
      readonly code: typeof DiscoveryIssueCode.SharedModelName;
      /** The younger claim (the oldest is not reported: it was there first). */
      readonly path: string;
      readonly model: string;
      /** namespace/name of the oldest Deployment in another namespace that serves the name. */
      readonly firstClaimedBy: string;
      readonly message: string;
    }
  | {
      readonly code: typeof DiscoveryIssueCode.NotRoutable;
      readonly path: string;
      readonly model: string;
      readonly reason: string;
      readonly message: string;
    }
  | {
      readonly code:
        typeof DiscoveryIssueCode.RuntimeOutOfBounds | typeof DiscoveryIssueCode.RouteBuildFailed;
      readonly path: string;
      readonly model: string;
      readonly message: string;
    };

/** What building one Deployment's route reports besides the route. */
interface BuildContext {
  /** Wall clock, epoch ms, for warm-up holds. */
  readonly now: number | undefined;
  readonly onWake: (at: number) => void;
  readonly onIssue: (issue: DiscoveryIssue) => void;
}

export interface DiscoveryInput {
  /** Deployment objects as the informer holds them (unvalidated). */
  readonly deployments: readonly unknown[];
  readonly policies: readonly unknown[];
  /** Wall clock, epoch ms, for warm-up holds; absent: a hold never times out by itself. */
  readonly now?: number;
}

export interface DiscoveredTable {
  /** Sorted by model name. */
  readonly routes: readonly ModelRoute[];
  readonly issues: readonly DiscoveryIssue[];
  /** Wall-clock ms when a warm-up hold ends by time alone: rebuild then. Absent: none. */
  readonly wakeAt?: number;
}

interface Candidate {
  readonly route: ModelRoute;
  readonly created: string;
}

export function buildRoutingTable(input: DiscoveryInput): DiscoveredTable {
  const issues: DiscoveryIssue[] = [];
  const deployments = parseAll(input.deployments, 'Deployment', issues) as DeploymentResource[];
  const policies = parseAll(input.policies, 'CachePolicy', issues) as CachePolicyResource[];
  const candidates: Candidate[] = [];
  const wakes: number[] = [];
  const ctx: BuildContext = {
    now: input.now,
    onWake: (at) => wakes.push(at),
    onIssue: (i) => issues.push(i),
  };
  for (const d of deployments) {
    if (d.metadata.deletionTimestamp) continue;
    const route = tryBuildModelRoute(d, findAcceptingPolicy(d, policies), ctx);
    if (!route) continue;
    const routable = d.status?.routable;
    if (routable?.value !== true) {
      issues.push({
        code: DiscoveryIssueCode.NotRoutable,
        path: `Deployment ${route.deployment}`,
        model: route.model,
        reason: routable?.reason ?? 'NoStatus',
        message: routable?.message ?? 'the operator has not reported status.routable yet',
      });
    }
    candidates.push({ route, created: d.metadata.creationTimestamp ?? '' });
  }
  const routes = planModelNames(candidates, issues);
  return wakes.length > 0 ? { routes, issues, wakeAt: Math.min(...wakes) } : { routes, issues };
}

/** buildModelRoute, or undefined with an issue when it throws: the other Deployments still route. */
function tryBuildModelRoute(
  d: DeploymentResource,
  policy: CachePolicyResource | undefined,
  ctx: BuildContext,
): ModelRoute | undefined {
  try {
    return buildModelRoute(d, policy, ctx);
  } catch (err) {
    ctx.onIssue({
      code: DiscoveryIssueCode.RouteBuildFailed,
      path: `Deployment ${d.metadata.namespace ?? ''}/${d.metadata.name ?? ''}`,
      model: d.spec.model.servedName,
      message: `its route could not be built: ${err instanceof Error ? err.message : String(err)}`,
    });
    return undefined;
  }
}

/** What the gateway needs of one Deployment, with its governing policy's settings. */
function buildModelRoute(
  d: DeploymentResource,
  policy: CachePolicyResource | undefined,
  ctx: BuildContext,
): ModelRoute {
  const namespace = d.metadata.namespace ?? '';
  const routable = d.status?.routable?.value === true;
  return {
    model: d.spec.model.servedName,
    deployment: `${namespace}/${d.metadata.name ?? ''}`,
    fingerprint: d.status?.identity?.fingerprint ?? '',
    salt: computeDeploymentSalt(d, policy),
    ...(d.spec.traffic ? { weight: d.spec.traffic.weight } : {}),
    ...buildPolicySettings(policy),
    endpoints: routable ? buildRouteEndpoints(d, policy, ctx) : [],
    ...buildL3Roles(d),
    ...(declaresSleep(d.spec)
      ? { wake: { holdMs: (d.spec.wake ?? WakeSettings.parse({})).holdSeconds * 1000 } }
      : {}),
  };
}

/** The roles whose shared L3 tier the operator reports reachable: the gateway credits what it holds. */
function buildL3Roles(d: DeploymentResource): Pick<ModelRoute, 'l3Roles'> {
  const roles = [...new Set((d.status?.l3 ?? []).filter((t) => t.reachable).map((t) => t.role))];
  return roles.length > 0 ? { l3Roles: roles } : {};
}

/** The governing CachePolicy's settings for the route; the defaults without one. */
function buildPolicySettings(
  policy: CachePolicyResource | undefined,
): Pick<ModelRoute, 'sharePrefixesAcrossTenants' | 'routing' | 'admission' | 'reuse' | 'requests'> {
  if (!policy)
    return {
      routing: RoutingSettings.parse({}),
      admission: Admission.parse({}),
      reuse: ResultReuse.parse({}),
    };
  const spec = policy.spec;
  return {
    ...(spec.tenancy.sharePrefixes ? { sharePrefixesAcrossTenants: true } : {}),
    routing: spec.routing,
    admission: spec.admission,
    reuse: spec.resultReuse,
    requests: spec.requests,
  };
}

export function buildRouteEndpoints(
  d: DeploymentResource,
  policy: CachePolicyResource | undefined,
  ctx: BuildContext,
): RouteEndpoint[] {
  const namespace = d.metadata.namespace ?? '';
  const disaggregation = d.spec.disaggregation;
  const roles: readonly string[] = disaggregation
    ? [EndpointRole.prefill, EndpointRole.decode]
    : [EndpointRole.standalone];
  const serving = (d.status?.endpoints ?? []).filter(
    (e) => e.ready && e.verified && e.ip !== '' && roles.includes(e.role) && isWithinSpec(d, e, ctx),
  );
  const kept = disaggregation ? keepPairable(serving) : serving;
  const now = ctx.now;
  const warmup = computeWarmupVerdicts(d, policy, kept, now ?? Number.NEGATIVE_INFINITY);
  if (warmup.wakeAt !== undefined && now !== undefined) ctx.onWake(warmup.wakeAt);
  return kept.map((e) => {
    const gate = warmup.byPod.get(e.pod);
    return {
      // Pod names are unique per namespace only; the gateway's load maps are global.
      id: `${namespace}/${e.pod}`,
      url: buildEndpointUrl(e.ip, e.port),
      role: e.role,
      fingerprint: e.fingerprint ?? '',
      verified: e.verified,
      ready: e.ready,
      ...(e.role === EndpointRole.prefill && disaggregation
        ? { bootstrapPort: e.bootstrapPort ?? disaggregation.bootstrapPort }
        : {}),
      // A new IP (recreated pod) or a container restart is a new process with an empty cache.
      generation: `${e.ip}#${e.restartCount ?? 0}`,
      ...(e.events ? { events: buildEventAddresses(e.ip, e.events) } : {}),
      ...(gate ? { warmup: gate } : {}),
      // Verified (the runtime reported what its spec declared): the gateway stamps a priority.
      ...(e.reported?.priorityScheduling === true ? { priorityScheduling: true } : {}),
    };
  });
}

/** Status publishes ports (the runtime binds a wildcard); subscribers dial the pod IP, rank r on base + r. */
export function buildEventAddresses(ip: string, ev: EndpointEvents): RouteEndpointEvents {
  const host = formatHost(ip);
  const range = (base: number): string[] =>
    Array.from({ length: Math.max(1, ev.ranks) }, (_, r) => `tcp://${host}:${base + r}`);
  return {
    kv: range(ev.port),
    topic: ev.topic,
    blockSize: ev.blockSize,
    ...(ev.replayPort !== undefined ? { replay: range(ev.replayPort) } : {}),
    ...(ev.loadPort !== undefined ? { load: range(ev.loadPort), loadTopic: ev.loadTopic ?? 'load' } : {}),
  };
}

type StatusEndpoint = NonNullable<NonNullable<DeploymentResource['status']>['endpoints']>[number];

/** The endpoint reported nothing its spec does not allow; else an issue says what, and it is left out. */
function isWithinSpec(d: DeploymentResource, e: StatusEndpoint, ctx: BuildContext): boolean {
  const reason = e.events && checkEndpointEvents(e.events, d.spec.parallelism.data);
  if (reason === undefined) return true;
  const namespace = d.metadata.namespace ?? '';
  ctx.onIssue({
    code: DiscoveryIssueCode.RuntimeOutOfBounds,
    path: `Deployment ${namespace}/${d.metadata.name ?? ''}`,
    model: d.spec.model.servedName,
    message: `endpoint ${namespace}/${e.pod} ${reason}: left out of routing`,
  });
  return false;
}

function keepPairable(endpoints: readonly StatusEndpoint[]): StatusEndpoint[] {
  const fingerprintsOf = (role: string): Set<string | undefined> =>
    new Set(endpoints.filter((e) => e.role === role).map((e) => e.fingerprint));
  const prefill = fingerprintsOf(EndpointRole.prefill);
  const decode = fingerprintsOf(EndpointRole.decode);
  return endpoints.filter(
    (e) => e.fingerprint !== undefined && prefill.has(e.fingerprint) && decode.has(e.fingerprint),
  );
}

/**
 * One claim per served name and namespace: the oldest Deployment of the namespace keeps it
 * (see rule 5 above), and shares it with the Deployments of its namespace that serve the same
 * name when all of them set a weight. Claims of other namespaces stay, marked as shared.
 */
function planModelNames(candidates: readonly Candidate[], issues: DiscoveryIssue[]): ModelRoute[] {
  const byModel = new Map<string, Candidate[]>();
  for (const c of candidates) byModel.set(c.route.model, [...(byModel.get(c.route.model) ?? []), c]);
  const routes: ModelRoute[] = [];
  for (const [model, group] of byModel) {
    const byNamespace = new Map<string, Candidate[]>();
    for (const c of [...group].sort(compareAge)) {
      const ns = namespaceOf(c.route);
      byNamespace.set(ns, [...(byNamespace.get(ns) ?? []), c]);
    }
    const claims = [...byNamespace.values()].flatMap((g) => claimName(model, g, issues));
    const first = claims[0];
    for (const claim of claims) {
      const sharedWith = claims
        .filter((c) => c !== claim)
        .map((c) => c.namespace)
        .sort(compareStrings);
      if (first && claim !== first) issues.push(reportSharedName(model, claim.head, first.head));
      routes.push(...claim.routes.map((r) => (sharedWith.length > 0 ? { ...r, sharedWith } : r)));
    }
  }
  return routes.sort((a, b) => compareStrings(a.model, b.model));
}

interface Claim {
  readonly namespace: string;
  /** The oldest Deployment of the namespace serving the name. */
  readonly head: ModelRoute;
  /** head, with the Deployments of its weighted split. */
  readonly routes: readonly ModelRoute[];
}

/** The claim of one namespace (candidates oldest first): the oldest, with its weighted split. */
function claimName(model: string, group: readonly Candidate[], issues: DiscoveryIssue[]): Claim[] {
  const [winner, ...others] = group;
  if (!winner) return [];
  const split = winner.route.weight !== undefined ? others.filter((c) => c.route.weight !== undefined) : [];
  for (const l of others.filter((c) => !split.includes(c))) {
    issues.push({
      code: DiscoveryIssueCode.DuplicateModel,
      path: `Deployment ${l.route.deployment}`,
      model,
      servedBy: winner.route.deployment,
    });
  }
  const routes = [winner.route, ...split.map((c) => c.route)];
  return [{ namespace: namespaceOf(winner.route), head: winner.route, routes }];
}

function reportSharedName(model: string, younger: ModelRoute, first: ModelRoute): DiscoveryIssue {
  return {
    code: DiscoveryIssueCode.SharedModelName,
    path: `Deployment ${younger.deployment}`,
    model,
    firstClaimedBy: first.deployment,
    message:
      `namespace ${namespaceOf(first)} served '${model}' first: each namespace's tenants reach only ` +
      `their own Deployment and an open gateway needs the x-cacheroute-namespace header; ` +
      `give spec.model.servedName a name of its own to end the ambiguity`,
  };
}

function compareAge(a: Candidate, b: Candidate): number {
  return compareStrings(a.created, b.created) || compareStrings(a.route.deployment, b.route.deployment);
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function parseAll(
  objects: readonly unknown[],
  kind: 'Deployment' | 'CachePolicy',
  issues: DiscoveryIssue[],
): (DeploymentResource | CachePolicyResource)[] {
  const out: (DeploymentResource | CachePolicyResource)[] = [];
  for (const obj of objects) {
    const r = validateResource(obj);
    if (r.ok && r.value.kind === kind) {
      out.push(r.value);
      continue;
    }
    const meta = (obj as { metadata?: { namespace?: string; name?: string } } | null)?.metadata;
    const first = r.ok ? { path: 'kind', message: `expected kind ${kind}` } : r.issues[0];
    issues.push({
      code: DiscoveryIssueCode.InvalidObject,
      path: `${kind} ${meta?.namespace ?? ''}/${meta?.name ?? ''}`,
      message: first ? `${first.path}: ${first.message}` : 'invalid',
    });
  }
  return out;
}

/**
 * Keeps the previous ModelRoute object wherever the new one is equal, so a
 * rebuild that changed nothing for a model does not look like an endpoint-set
 * change to the gateway (it re-syncs a policy when the route object changes).
 */
export function reuseUnchangedRoutes(
  previous: readonly ModelRoute[],
  next: readonly ModelRoute[],
): { routes: ModelRoute[]; changed: boolean } {
  const before = new Map(previous.map((r) => [r.deployment, r]));
  let changed = previous.length !== next.length;
  const routes = next.map((r) => {
    const old = before.get(r.deployment);
    if (old && isDeepStrictEqual(old, r)) return old;
    changed = true;
    return r;
  });
  return { routes, changed };
}
