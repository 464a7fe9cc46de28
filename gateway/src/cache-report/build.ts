// The gateway's cache report (GET /cache-report.json on the admin port, read by
// the operator for the CacheHealthy condition): per Deployment in the routing
// table, its prediction counters and each endpoint's KV-event index.
import type { GatewayCacheReport, GatewayEndpointEvents } from '../../../operator/src/api/index.ts';
import { computeSlowestLagMs, type EndpointKvStatus } from '../kv-index/fleet.ts';
import type { ModelRoute } from '../routing/table.ts';
import type { PredictionCounters } from './prediction-counters.ts';

export interface CacheReportSources {
  readonly routes: readonly ModelRoute[];
  readonly predictions: PredictionCounters;
  readonly kvIndex: readonly EndpointKvStatus[];
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
      endpoints: route.endpoints.map((e) => ({
        // Endpoint ids are namespace/pod (discovery/build-table.ts); the report names the pod.
        pod: e.id.slice(e.id.indexOf('/') + 1),
        ...(e.events ? { events: toEvents(kv.get(e.id)) } : {}),
      })),
    })),
  };
}
