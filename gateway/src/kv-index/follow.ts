// Which runtimes' event publishers the gateway follows: every endpoint of the
// routing table, checked each second so a new runtime is subscribed before its
// first request, and at once when a request's route is new or changed. Routes
// are replaced whole on change, so the same objects mean the same endpoints.

import type { Clock, Timer } from '#kube/clock.ts';
import type { ModelRoute, RoutingTable } from '../routing/table.ts';
import type { KvIndexFleet, L3Scope } from './fleet.ts';

const FOLLOW_MS = 1000;

export class KvPublisherFollower {
  readonly #table: RoutingTable;
  readonly #index: KvIndexFleet;
  readonly #clock: Clock;
  /** The route object each deployment's subscriptions were last synced with. */
  readonly #synced = new Map<string, ModelRoute>();
  #followed: readonly ModelRoute[] | undefined;
  #timer: Timer | undefined;

  constructor(table: RoutingTable, index: KvIndexFleet, clock: Clock) {
    this.#table = table;
    this.#index = index;
    this.#clock = clock;
  }

  start(): void {
    const follow = (): void => {
      this.#followTable();
      this.#timer = this.#clock.setTimer(FOLLOW_MS, follow);
    };
    follow();
  }

  stop(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  /** A route about to be used: its runtimes' publishers followed now if it is new or changed. */
  followRoute(route: ModelRoute): void {
    if (this.#synced.get(route.deployment) === route) return;
    this.#synced.set(route.deployment, route);
    this.#index.sync(route.endpoints, this.#allEndpointIds(this.#table.list()), l3ScopeOf(route));
  }

  #followTable(): void {
    const routes = this.#table.list();
    const prev = this.#followed;
    if (prev?.length === routes.length && routes.every((r, i) => r === prev[i])) return;
    this.#followed = routes;
    const all = this.#allEndpointIds(routes);
    for (const r of routes) this.#index.sync(r.endpoints, all, l3ScopeOf(r));
  }

  #allEndpointIds(routes: readonly ModelRoute[]): Set<string> {
    return new Set(routes.flatMap((r) => r.endpoints.map((e) => e.id)));
  }
}

/** The route's shared L3 tiers, when its Deployment reports a reachable one. */
function l3ScopeOf(route: ModelRoute): L3Scope | undefined {
  return route.l3Roles?.length ? { deployment: route.deployment, reachableRoles: route.l3Roles } : undefined;
}
