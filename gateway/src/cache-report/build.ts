// The gateway's cache report (GET /cache-report.json on the admin port, read by
// the operator for the CacheHealthy condition): per Deployment in the routing
// table, the window's predictions and each endpoint's KV-event index.
import type { GatewayCacheReport, GatewayEndpointEvents } from '../../../operator/src/api/index.ts';
import type { EndpointKvStatus } from '../kv-index/fleet.ts';
import type { ModelRoute } from '../routing/table.ts';
import type { PredictionWindow } from './prediction-window.ts';

export interface CacheReportSources {
  readonly routes: readonly ModelRoute[];
  readonly predictions: PredictionWindow;
  readonly kvIndex: readonly EndpointKvStatus[];
}

function toEvents(kv: EndpointKvStatus | undefined): GatewayEndpointEvents {
  if (!kv) return { usable: false, reason: 'not subscribed yet', lagMs: null };
  const lags = kv.ranks.map((r) => r.lagMs).filter((l): l is number => l !== null);
  return {
    usable: kv.usable,
    reason: kv.reason,
    lagMs: lags.length > 0 ? Math.round(Math.max(...lags)) : null,
  };
}

export function buildCacheReport(src: CacheReportSources): GatewayCacheReport {
  const totals = src.predictions.totals();
  const kv = new Map(src.kvIndex.map((k) => [k.endpoint, k]));
  const seen = new Set<string>();
  const deployments: GatewayCacheReport['deployments'] = [];
  for (const route of src.routes) {
    // A Deployment is one route per served name it answers to; report it once.
    if (seen.has(route.deployment)) continue;
    seen.add(route.deployment);
    const t = totals.get(route.deployment) ?? { decisions: 0, promptTokens: 0, predictedTokens: 0 };
    deployments.push({
      deployment: route.deployment,
      ...t,
      endpoints: route.endpoints.map((e) => ({
        pod: e.id,
        ...(e.events ? { events: toEvents(kv.get(e.id)) } : {}),
      })),
    });
  }
  return { windowSeconds: Math.round(src.predictions.windowMs / 1000), deployments };
}
