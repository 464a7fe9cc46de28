// The routing table: served model name → what the gateway needs to route it.
// Discovery (informers over Deployment and CachePolicy status) fills it later;
// tests and the benchmark fill it by hand. Routes are replaced whole, never
// mutated, so a request keeps a consistent view for its whole life and an
// endpoint-set change does not disturb requests in flight.

import type { z } from 'zod';
import type { Admission, RequestRules, ResultReuse } from '#api';
import type { RoutingConfig } from '../policies/index.ts';

export const EndpointRole = { standalone: 'standalone', prefill: 'prefill', decode: 'decode' } as const;
export type EndpointRole = (typeof EndpointRole)[keyof typeof EndpointRole];

export type AdmissionSettings = z.output<typeof Admission>;
export type ReuseSettings = z.output<typeof ResultReuse>;

/** An endpoint's warm-up as the gateway sees it (discovery/warmup-gate.ts). */
export const WarmupGate = {
  /** Not warmed yet, within the policy's routeAfterSeconds: held from user traffic. */
  warming: 'warming',
  warmed: 'warmed',
  /** Not warmed within routeAfterSeconds: routed anyway. */
  timedOut: 'timed-out',
  /** Not warmed, but no endpoint of its deployment is: routed anyway rather than refuse traffic. */
  noneWarmed: 'none-warmed',
} as const;
export type WarmupGate = (typeof WarmupGate)[keyof typeof WarmupGate];

export interface RouteEndpointWarmup {
  readonly state: WarmupGate;
  /** What happened and what the gateway does about it, for /status. */
  readonly message: string;
}

export interface RouteEndpoint {
  /** Stable id (pod name). */
  readonly id: string;
  /** Base URL, e.g. http://10.0.0.5:30000 */
  readonly url: string;
  readonly role: EndpointRole;
  /** Identity fingerprint the runtime reported for itself. */
  readonly fingerprint: string;
  readonly verified: boolean;
  readonly ready: boolean;
  readonly bootstrapPort?: number;
  /** Pod IP + restart count (ip#n): changes when the runtime's cache is lost (a new pod or a restarted container). */
  readonly generation?: string;
  /** The runtime's event publishers (one address per data-parallel rank), when it publishes. */
  readonly events?: RouteEndpointEvents;
  /** Its warm-up, when its CachePolicy declares one; absent: not gated. */
  readonly warmup?: RouteEndpointWarmup;
  /**
   * The runtime orders its queue by the request's `priority` (its verified status reports SGLang's
   * priority scheduling, preemption off, higher first): the gateway stamps one (picker/runtime-priority.ts).
   */
  readonly priorityScheduling?: boolean;
}

export interface RouteEndpointEvents {
  /** KV events (ZMQ PUB), e.g. tcp://10.0.0.5:5557. */
  readonly kv: readonly string[];
  /** Replay (ZMQ ROUTER), same ranks; absent when the runtime keeps no replay buffer. */
  readonly replay?: readonly string[];
  readonly topic: string;
  /** Tokens a block is hashed over (the runtime's page size). */
  readonly blockSize: number;
  readonly load?: readonly string[];
  readonly loadTopic?: string;
}

export interface ModelRoute {
  readonly model: string;
  /** namespace/name of the cacheroute Deployment. */
  readonly deployment: string;
  /** The Deployment's current identity fingerprint. */
  readonly fingerprint: string;
  /** cache_salt stamped on every request (from the CachePolicy). */
  readonly salt: string;
  /** The CachePolicy lets tenants share prefixes (spec.tenancy.sharePrefixes); absent: they do not. */
  readonly sharePrefixesAcrossTenants?: boolean;
  /**
   * This Deployment's share of the served name against the others that serve it
   * (spec.traffic.weight, ADR 0008); absent: it serves the name alone.
   */
  readonly weight?: number;
  /**
   * Other namespaces whose Deployments serve the same name (each namespace keeps its own claim:
   * tenants reach their own, an open gateway needs x-cacheroute-namespace); absent: none.
   */
  readonly sharedWith?: readonly string[];
  readonly routing: RoutingConfig;
  readonly admission: AdmissionSettings;
  readonly reuse: ReuseSettings;
  /** What one request may ask of the runtime (the CachePolicy's spec.requests); absent: the defaults. */
  readonly requests?: RequestRules;
  readonly endpoints: readonly RouteEndpoint[];
  /**
   * Roles whose HiCache L3 tier the Deployment's status says is reachable (status.l3[]): their
   * replicas of one fingerprint share it (kv-index/shared-l3.ts); absent: none.
   */
  readonly l3Roles?: readonly EndpointRole[];
  /** The Deployment sleeps at zero and wakes on demand: a request is held this long for an endpoint. */
  readonly wake?: { readonly holdMs: number };
}

export interface RoutingTable {
  /** The route of a served name; with a weighted split, the one with the largest weight. */
  lookup(model: string): ModelRoute | undefined;
  /** Every route of a served name: one, or the Deployments of a weighted split (ADR 0008). */
  candidates(model: string): readonly ModelRoute[];
  list(): readonly ModelRoute[];
  /** True once the table reflects the cluster (for /readyz). */
  readonly ready: boolean;
}

export class StaticRoutingTable implements RoutingTable {
  #byModel = new Map<string, readonly ModelRoute[]>();
  #routes: readonly ModelRoute[] = [];
  ready = true;

  constructor(routes: readonly ModelRoute[] = []) {
    this.replace(routes);
  }

  replace(routes: readonly ModelRoute[]): void {
    const byModel = new Map<string, ModelRoute[]>();
    for (const r of routes) byModel.set(r.model, [...(byModel.get(r.model) ?? []), r]);
    for (const group of byModel.values()) group.sort((a, b) => (b.weight ?? 0) - (a.weight ?? 0));
    this.#byModel = byModel;
    this.#routes = [...routes];
  }

  lookup(model: string): ModelRoute | undefined {
    return this.#byModel.get(model)?.[0];
  }

  candidates(model: string): readonly ModelRoute[] {
    return this.#byModel.get(model) ?? [];
  }

  list(): readonly ModelRoute[] {
    return this.#routes;
  }
}

/** The Kubernetes namespace of a route's Deployment. */
export function namespaceOf(route: Pick<ModelRoute, 'deployment'>): string {
  return route.deployment.slice(0, route.deployment.indexOf('/'));
}

/** Held from user traffic until its warm-up completes (or its wait is over). */
export function isHeldForWarmup(e: RouteEndpoint): boolean {
  return e.warmup?.state === WarmupGate.warming;
}

/** Endpoints that may receive generation: ready, verified, standalone, not held for warm-up. Fails closed. */
export function computeRoutableEndpoints(route: ModelRoute): RouteEndpoint[] {
  return route.endpoints.filter(
    (e) => e.ready && e.verified && e.role === EndpointRole.standalone && !isHeldForWarmup(e),
  );
}
