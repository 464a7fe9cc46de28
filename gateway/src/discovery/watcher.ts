// Discovery shell: informers on cacheroute Deployments and CachePolicies (all
// namespaces, or one pair per listed namespace) → buildRoutingTable → one
// atomic swap of the routing table. The request path only reads the table:
// no Kubernetes API call ever happens while serving.
//
// - Ready only after every informer has listed once: before that an empty
//   table would answer 404 for models that exist, so /readyz says 503.
// - Changes are coalesced (informer-group.ts).
// - Routes are replaced whole; a model whose route did not change keeps its
//   old object (reuseUnchangedRoutes), so the gateway sees no endpoint change.
//   A request in flight holds its own ModelRoute and keeps its endpoint.

import type { ListerWatcher } from '#kube/informer.ts';
import { noopLogger, type Logger } from '#kube/logger.ts';
import { Resources } from '#kube/resources.ts';
import type { Clock } from '#kube/clock.ts';
import { StaticRoutingTable, WarmupGate, type ModelRoute } from '../routing/table.ts';
import { buildRoutingTable, reuseUnchangedRoutes, type DiscoveryIssue } from './build-table.ts';
import { InformerGroup } from './informer-group.ts';

/** A wake lands this long after a hold's end, so the rebuild sees it over (clock granularity). */
const WAKE_MARGIN_MS = 50;

export interface DiscoveryWatcherOptions {
  readonly client: ListerWatcher;
  /** The table to fill (marked not ready until the first sync); a new one if absent. */
  readonly table?: StaticRoutingTable;
  /** Namespaces to watch; empty or absent: all namespaces. */
  readonly namespaces?: readonly string[];
  readonly logger?: Logger;
  readonly clock?: Clock;
  /** Delay from the first change to the rebuild that includes it. */
  readonly coalesceMs?: number;
  /** Wall clock, epoch ms: warm-up holds are counted from times the operator wrote. */
  readonly wallClock?: () => number;
}

export class DiscoveryWatcher {
  /** The table the gateway serves from; not ready until the first sync. */
  readonly table: StaticRoutingTable;
  readonly #log: Logger;
  readonly #group: InformerGroup;
  readonly #wallClock: () => number;
  #issues = new Map<string, DiscoveryIssue>();
  #rebuilds = 0;

  constructor(opts: DiscoveryWatcherOptions) {
    this.table = opts.table ?? new StaticRoutingTable();
    this.table.ready = false;
    this.#log = (opts.logger ?? noopLogger).child({ component: 'discovery' });
    this.#wallClock = opts.wallClock ?? Date.now;
    this.#group = new InformerGroup({
      client: opts.client,
      namespaces: opts.namespaces,
      kinds: [{ resource: Resources.sglangDeployments }, { resource: Resources.cachePolicies }],
      logger: this.#log,
      clock: opts.clock,
      coalesceMs: opts.coalesceMs,
      rebuild: ([deployments = [], policies = []]) => this.#rebuild(deployments, policies),
      onSynced: () => {
        this.table.ready = true;
        this.#log.info('routing table synced', { models: this.table.list().length });
      },
    });
  }

  /** Starts the informers; the table turns ready after the first full sync. */
  start(): void {
    this.#group.start();
  }

  async stop(): Promise<void> {
    await this.#group.stop();
  }

  /** Why objects or models are left out of the table right now. */
  get issues(): readonly DiscoveryIssue[] {
    return [...this.#issues.values()];
  }

  /** Objects in the informer caches (tests, diagnostics). */
  get cached(): { readonly deployments: number; readonly policies: number } {
    const [deployments = 0, policies = 0] = this.#group.sizes();
    return { deployments, policies };
  }

  /** Table rebuilds so far (tests, diagnostics). */
  get rebuilds(): number {
    return this.#rebuilds;
  }

  #rebuild(deployments: readonly unknown[], policies: readonly unknown[]): void {
    this.#rebuilds++;
    const now = this.#wallClock();
    const built = buildRoutingTable({ deployments, policies, now });
    const previous = this.table.list();
    const { routes, changed } = reuseUnchangedRoutes(previous, built.routes);
    if (changed) {
      this.table.replace(routes);
      this.#logChanges(previous, routes);
      this.#logWarmup(previous, routes);
    }
    this.#logIssues(built.issues);
    // A warm-up hold that ends by time alone changes the table with no object changing.
    if (built.wakeAt !== undefined) this.#group.wakeIn(built.wakeAt - now + WAKE_MARGIN_MS);
  }

  /** Each endpoint's warm-up verdict is logged when it changes: held, warmed, or routed anyway and why. */
  #logWarmup(previous: readonly ModelRoute[], next: readonly ModelRoute[]): void {
    const before = new Map(previous.flatMap((r) => r.endpoints.map((e) => [e.id, e.warmup?.state])));
    for (const r of next) {
      for (const e of r.endpoints) {
        const w = e.warmup;
        if (!w || before.get(e.id) === w.state) continue;
        const fields = { model: r.model, endpoint: e.id, warmup: w.state, reason: w.message };
        if (w.state === WarmupGate.warming)
          this.#log.info('endpoint held from user traffic until warmed', fields);
        else if (w.state === WarmupGate.warmed)
          this.#log.info('endpoint warmed: routing user traffic to it', fields);
        else this.#log.warn('endpoint not warmed: routing user traffic to it anyway', fields);
      }
    }
  }

  #logChanges(previous: readonly ModelRoute[], next: readonly ModelRoute[]): void {
    // By Deployment: a served name may have several routes (a split, or one per namespace).
    const before = new Map(previous.map((r) => [r.deployment, r]));
    for (const r of next) {
      if (before.get(r.deployment) === r) continue;
      this.#log.info(before.has(r.deployment) ? 'route updated' : 'route added', {
        model: r.model,
        deployment: r.deployment,
        policy: r.routing.policy,
        endpoints: r.endpoints.map((e) => e.id),
      });
    }
    const kept = new Set(next.map((r) => r.deployment));
    for (const r of previous)
      if (!kept.has(r.deployment))
        this.#log.info('route removed', { model: r.model, deployment: r.deployment });
  }

  /** Each issue is logged when it appears and when it clears, not on every rebuild. */
  #logIssues(issues: readonly DiscoveryIssue[]): void {
    const next = new Map(issues.map((i) => [JSON.stringify(i), i]));
    for (const [key, issue] of next) {
      if (this.#issues.has(key)) continue;
      if (issue.code === 'NotRoutable') this.#log.info('model not routable', { ...issue });
      else this.#log.warn('left out of the routing table', { ...issue });
    }
    for (const [key, issue] of this.#issues)
      if (!next.has(key)) this.#log.info('discovery issue cleared', { code: issue.code, path: issue.path });
    this.#issues = next;
  }
}
