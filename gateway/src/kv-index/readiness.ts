// Whether a replica that has just started has read its runtimes' replay, for
// /readyz: a replica that takes traffic before its KV index caught up routes
// from an empty tree, and every request it takes is a guess (the miss storm
// of a failover, smg issue 1578). Ready once every endpoint of the table
// that publishes events has an index past its first catch-up (live or stale:
// the replay answered, failed or timed out), or at the latest graceMs after
// the table was first ready, so an unreachable publisher cannot keep the
// replica out of the Service. Latched: once ready, a runtime that restarts
// or goes away later never makes the replica unready (every replica would
// turn unready at once).

import type { Clock } from '#kube/clock.ts';
import type { RoutingTable } from '../routing/table.ts';
import type { KvIndexFleet } from './fleet.ts';

/** Replaying 10,000 batches takes a few seconds; past this the index catches up while serving. */
export const DEFAULT_KV_READY_GRACE_MS = 30_000;

export class KvIndexReadiness {
  readonly #table: Pick<RoutingTable, 'list' | 'ready'>;
  readonly #fleet: Pick<KvIndexFleet, 'caughtUp'>;
  readonly #clock: Clock;
  readonly #graceMs: number;
  #tableReadyAt: number | null = null;
  #ready = false;

  constructor(
    table: Pick<RoutingTable, 'list' | 'ready'>,
    fleet: Pick<KvIndexFleet, 'caughtUp'>,
    clock: Clock,
    graceMs = DEFAULT_KV_READY_GRACE_MS,
  ) {
    this.#table = table;
    this.#fleet = fleet;
    this.#clock = clock;
    this.#graceMs = graceMs;
  }

  ready(): boolean {
    if (this.#ready) return true;
    if (!this.#table.ready) return false;
    const now = this.#clock.now();
    this.#tableReadyAt ??= now;
    const endpoints = this.#table.list().flatMap((r) => r.endpoints.filter((e) => e.events));
    this.#ready =
      endpoints.every((e) => this.#fleet.caughtUp(e.id)) || now - this.#tableReadyAt >= this.#graceMs;
    return this.#ready;
  }
}
