// The gateway's cache report (GET /cache-report.json on the admin port, read by
// the operator for the CacheHealthy condition and its external metrics): per
// Deployment in the routing table, its prediction counters, this replica's
// admission load, and each endpoint's KV-event index and load.
import type {
  GatewayAdmissionLoad,
  GatewayCacheReport,
  GatewayEndpointEvents,
  GatewayEndpointLoad,
} from '#api';
import { computeSlowestLagMs, type EndpointKvStatus } from '../kv-index/fleet.ts';
import type { RuntimeLoad } from '../endpoints/book.ts';
import type { EndpointView } from '../policies/policy.ts';
import type { ModelRoute, RouteEndpoint } from '../routing/table.ts';
import type { PredictionCounters } from '../metrics/prediction-counters.ts';

export interface CacheReportSources {
  readonly routes: readonly ModelRoute[];
  readonly predictions: PredictionCounters;
  readonly kvIndex: readonly EndpointKvStatus[];
  /** Requests this replica holds for a Deployment waking from zero. */
  readonly wakingOf: (deployment: string) => number;
  /** This replica's admission queue for a Deployment (namespace/name). */
  readonly admissionOf: (deployment: string) => GatewayAdmissionLoad;
  /** This replica's view of an endpoint's load (endpoints/book.ts). */
  readonly viewOf: (endpoint: RouteEndpoint) => EndpointView;
  /** The runtime's own load as this replica last read it; undefined: not read. */
  readonly runtimeLoad: (endpointId: string) => RuntimeLoad | undefined;
}

function toLoad(v: EndpointView, runtime: RuntimeLoad | undefined): GatewayEndpointLoad {
  return {
    inFlight: v.inFlight,
    pendingPrefillTokens: v.pendingPrefillTokens ?? 0,
    prefillTokensPerSecond: v.prefillTokensPerSecond ?? null,
    runtimeQueued: runtime?.queued ?? null,
    tokenUsage: runtime?.tokenUsage ?? null,
  };
}

function toEvents(kv: EndpointKvStatus | undefined): GatewayEndpointEvents {
  if (!kv) return { usable: false, reason: 'not subscribed yet', lagMs: null };
  return { usable: kv.usable, reason: kv.reason, lagMs: computeSlowestLagMs(kv) };
}

export function buildCacheReport(src: CacheReportSources): GatewayCacheReport {
  const kv = new Map(src.kvIndex.map((k) => [k.endpoint, k]));
  const byDeployment = new Map(src.routes.map((r) => [r.deployment, r]));
  src.predictions.retain(new Set(byDeployment.keys()));
  return {
    instance: src.predictions.instance,
    // A Deployment is one route per served name it answers to; it is reported once.
    deployments: [...byDeployment.values()].map((route) => ({
      deployment: route.deployment,
      ...src.predictions.totalsOf(route.deployment),
      admission: src.admissionOf(route.deployment),
      waking: src.wakingOf(route.deployment),
      endpoints: route.endpoints.map((e) => ({
        // Endpoint ids are namespace/pod (discovery/build-table.ts); the report names the pod.
        pod: e.id.slice(e.id.indexOf('/') + 1),
        role: e.role,
        ...(e.events ? { events: toEvents(kv.get(e.id)) } : {}),
        load: toLoad(src.viewOf(e), src.runtimeLoad(e.id)),
      })),
    })),
  };
}
