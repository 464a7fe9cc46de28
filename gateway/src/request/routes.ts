// The generation API's paths and the request kind each takes: the proxy's
// routes (app.ts) and the endpoint picker's (epp/) are the same three.

import type { RouteKind } from './shape.ts';

export const GENERATION_ROUTES: readonly (readonly [string, RouteKind])[] = [
  ['/v1/chat/completions', 'chat'],
  ['/v1/completions', 'completion'],
  ['/generate', 'generate'],
];

const KIND_OF_PATH: ReadonlyMap<string, RouteKind> = new Map(GENERATION_ROUTES);

/** The request kind a path takes (its query left off), or undefined when it is no generation route. */
export function kindOfPath(pathWithQuery: string): RouteKind | undefined {
  const q = pathWithQuery.indexOf('?');
  return KIND_OF_PATH.get(q === -1 ? pathWithQuery : pathWithQuery.slice(0, q));
}
