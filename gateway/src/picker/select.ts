// Which endpoint serves a routed request, once it is admitted. Standalone: the
// policy chooses among the endpoints standing (ready, verified, not just
// failed or draining); each fallback is the policy's choice again with the
// ones before it left out, and a retry is the same choice made later, with
// the load then. Prefill/decode: the policy chooses the prefill (it holds the
// prefix cache), the least-loaded decode of the same fingerprint pairs with
// it. The KV index's exact match is read once per request, for every choice.

import type { KvMatch } from '../kv-index/fleet.ts';
import {
  indexOfMin,
  loadOf,
  type CachedPrefix,
  type EndpointView,
  type Policy,
  type RouteInput,
} from '../policies/index.ts';
import { computeDecodePartners, computeRoutableByRole } from '../routing/pd.ts';
import {
  computeRoutableEndpoints,
  EndpointRole,
  type ModelRoute,
  type RouteEndpoint,
} from '../routing/table.ts';

/** What a choice reads of the shared state. */
export interface SelectState {
  /** What this replica knows of an endpoint's load, with its KV index match where there is one. */
  readonly view: (e: RouteEndpoint, cached?: CachedPrefix) => EndpointView;
  /** The endpoints not just failed or draining (endpoints/standing.ts). */
  readonly standing: (endpoints: readonly RouteEndpoint[]) => readonly RouteEndpoint[];
}

/** The request's prefix each endpoint's KV index holds, where the index can answer. */
export type MatchIndexed = (endpoints: readonly RouteEndpoint[]) => ReadonlyMap<string, KvMatch>;

/** One request's choices among a route's endpoints of one role. */
export interface Selection {
  readonly policy: Policy;
  readonly input: RouteInput;
  readonly routable: readonly RouteEndpoint[];
  readonly cached: ReadonlyMap<string, KvMatch>;
}

export function openSelection(
  route: ModelRoute,
  policy: Policy,
  input: RouteInput,
  match: MatchIndexed,
): Selection {
  const routable = computeRoutableEndpoints(route);
  return { policy, input, routable, cached: match(routable) };
}

/** The policy's choice among the standing endpoints not in `excluded`. */
export function selectEndpoint(
  state: SelectState,
  sel: Selection,
  excluded: readonly string[],
): RouteEndpoint | undefined {
  const standing = state.standing(sel.routable);
  const candidates = excluded.length === 0 ? standing : standing.filter((e) => !excluded.includes(e.id));
  const i = sel.policy.select(
    candidates.map((e) => state.view(e, sel.cached.get(e.id))),
    sel.input,
  );
  return i === undefined ? undefined : candidates[i];
}

/** Up to `count` more endpoints after `first`, best first. */
export function selectFallbacks(
  state: SelectState,
  sel: Selection,
  first: RouteEndpoint,
  count: number,
): RouteEndpoint[] {
  const chosen = [first];
  while (chosen.length <= count) {
    const next = selectEndpoint(
      state,
      sel,
      chosen.map((e) => e.id),
    );
    if (!next) break;
    chosen.push(next);
  }
  return chosen.slice(1);
}

export interface PairChoice {
  readonly prefill: RouteEndpoint;
  readonly decode: RouteEndpoint;
  readonly cached: ReadonlyMap<string, KvMatch>;
}

export function selectPair(
  state: SelectState,
  route: ModelRoute,
  policy: Policy,
  input: RouteInput,
  match: MatchIndexed,
): PairChoice | undefined {
  const prefills = state.standing(computeRoutableByRole(route, EndpointRole.prefill));
  const cached = match(prefills);
  const pi = policy.select(
    prefills.map((e) => state.view(e, cached.get(e.id))),
    input,
  );
  const prefill = pi === undefined ? undefined : prefills[pi];
  const decodes = prefill ? state.standing(computeDecodePartners(route, prefill)) : [];
  const decode =
    decodes[
      indexOfMin(
        decodes.map((e) => state.view(e)),
        loadOf,
      ) ?? -1
    ];
  return prefill && decode ? { prefill, decode, cached } : undefined;
}
