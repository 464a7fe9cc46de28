// Which process of an endpoint this is (pod uid and restarts, then the
// identity fingerprint): when it changes, the runtime's cache is gone and a
// mark against the old process no longer holds. Endpoint objects are replaced
// whole when they change, so the string is built once per object, not once a
// request.

import type { RouteEndpoint } from '../routing/table.ts';

const built = new WeakMap<RouteEndpoint, string>();

export function generationOf(e: RouteEndpoint): string {
  let g = built.get(e);
  if (g === undefined) {
    g = `${e.generation ?? ''}/${e.fingerprint}`;
    built.set(e, g);
  }
  return g;
}
