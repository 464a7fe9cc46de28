// Prefill/decode pairing (reference §3): the same request goes to a prefill
// and a decode endpoint at once, with bootstrap_host/port = the prefill's
// bootstrap server and a random bootstrap_room; the client gets the decode's
// answer. A pair never mixes identities: the decode must carry the prefill's
// fingerprint (during a rollout, old prefill + new decode would exchange KV
// of different models).

import { EndpointRole, type ModelRoute, type RouteEndpoint } from './table.ts';

export const DEFAULT_BOOTSTRAP_PORT = 8998;

export function isDisaggregated(route: ModelRoute): boolean {
  return route.endpoints.some((e) => e.role !== EndpointRole.standalone);
}

export function computeRoutableByRole(route: ModelRoute, role: EndpointRole): RouteEndpoint[] {
  return route.endpoints.filter((e) => e.ready && e.verified && e.role === role);
}

/** Decode endpoints that may pair with `prefill`. */
export function computeDecodePartners(route: ModelRoute, prefill: RouteEndpoint): RouteEndpoint[] {
  return computeRoutableByRole(route, EndpointRole.decode).filter(
    (d) => d.fingerprint === prefill.fingerprint,
  );
}

/**
 * A room id in [0, 2^53): SGLang takes [0, 2^63-1], but JSON numbers above
 * 2^53 lose precision in JavaScript; 53 random bits keep collisions negligible.
 */
export function computeBootstrapRoom(random32: () => number): number {
  return (random32() >>> 11) * 0x100000000 + (random32() >>> 0);
}

export function buildPdBody(
  body: Readonly<Record<string, unknown>>,
  prefill: RouteEndpoint,
  room: number,
): Record<string, unknown> {
  return {
    ...body,
    bootstrap_host: new URL(prefill.url).hostname,
    bootstrap_port: prefill.bootstrapPort ?? DEFAULT_BOOTSTRAP_PORT,
    bootstrap_room: room,
  };
}
