// Each endpoint of the table by state, as the cacheroute_gateway_endpoints gauge counts them.
// The gauge reads this through buildMetrics' endpointStates at scrape time, so metrics/
// imports nothing of routing/.
import { isHeldForWarmup, type EndpointRole, type RouteEndpoint, type RoutingTable } from './table.ts';

export type EndpointState = 'routable' | 'warming' | 'not_ready' | 'unverified';

/**
 * routable: ready and verified, and not held for its warm-up; warming: held from user traffic
 * until its CachePolicy's warm-up is done (or routeAfterSeconds pass); the others never
 * receive generation.
 */
export function classifyEndpoint(e: RouteEndpoint): EndpointState {
  if (!e.verified) return 'unverified';
  if (!e.ready) return 'not_ready';
  return isHeldForWarmup(e) ? 'warming' : 'routable';
}

/** One entry per endpoint of every route in `table`, labelled for the endpoints gauge. */
export function* listEndpointStates(
  table: RoutingTable,
): Generator<{ model: string; role: EndpointRole; state: EndpointState }> {
  for (const r of table.list())
    for (const e of r.endpoints) yield { model: r.model, role: e.role, state: classifyEndpoint(e) };
}
