// Prefill/decode pairing (reference §3): the same request goes to a prefill
// and a decode endpoint at once, with bootstrap_host/port = the prefill's
// bootstrap server and a random bootstrap_room; the client gets the decode's
// answer. A pair never mixes identities: the decode must carry the prefill's
// fingerprint (during a rollout, old prefill + new decode would exchange KV
// of different models).

import { buildBootstrapFields, type BootstrapFields } from '#sglang/bootstrap.ts';
import { EndpointRole, isHeldForWarmup, type ModelRoute, type RouteEndpoint } from './table.ts';

export { computeBootstrapRoom } from '#sglang/bootstrap.ts';

export function isDisaggregated(route: ModelRoute): boolean {
  return route.endpoints.some((e) => e.role !== EndpointRole.standalone);
}

export function computeRoutableByRole(route: ModelRoute, role: EndpointRole): RouteEndpoint[] {
  return route.endpoints.filter((e) => e.ready && e.verified && e.role === role && !isHeldForWarmup(e));
}

/** A prefill endpoint with a decode partner: the route can serve a request (forward/pair.ts). */
export function hasRoutablePair(route: ModelRoute): boolean {
  return computeRoutableByRole(route, EndpointRole.prefill).some(
    (p) => computeDecodePartners(route, p).length > 0,
  );
}

/** Decode endpoints that may pair with `prefill`. */
export function computeDecodePartners(route: ModelRoute, prefill: RouteEndpoint): RouteEndpoint[] {
  return computeRoutableByRole(route, EndpointRole.decode).filter(
    (d) => d.fingerprint === prefill.fingerprint,
  );
}

/** Where the decode fetches the prefill's KV: the prefill's bootstrap server, and the pair's room. */
export function buildPairBootstrap(prefill: RouteEndpoint, room: number): BootstrapFields {
  return buildBootstrapFields(new URL(prefill.url).hostname, prefill.bootstrapPort, room);
}

/** The body both parts of a pair get: the request's, with the bootstrap fields. */
export function buildPdBody(
  body: Readonly<Record<string, unknown>>,
  bootstrap: BootstrapFields,
): Record<string, unknown> {
  return { ...body, ...bootstrap };
}
