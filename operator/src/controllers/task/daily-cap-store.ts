// The daily-cap ledger's I/O (daily-cap.ts has the rules): one ConfigMap per
// namespace, read fresh from the API server and written back with its
// resourceVersion, so two operators (a rollout's surge pod) or two tasks in
// one namespace cannot both spend the same headroom: the second write
// conflicts, re-reads and decides again.

import { isAlreadyExists, isConflict, type KubeClient } from '#kube/client.ts';
import type { DataObject } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import {
  addToLedger,
  computeLedgerKey,
  LEDGER_CONFIGMAP,
  planReservation,
  readSpent,
  type DailyCap,
} from './daily-cap.ts';
import type { Budget } from './attempt/budget.ts';
import { ok, type AttemptError, type Result } from './attempt/types.ts';

/** Writes that lost to another writer are read and tried again, after a short random pause. */
const MAX_WRITE_ATTEMPTS = 32;
const CONFLICT_PAUSE_MS = 10;

export class DailyCapLedger {
  readonly #client: KubeClient;
  readonly #cap: DailyCap;

  constructor(client: KubeClient, cap: DailyCap) {
    this.#client = client;
    this.#cap = cap;
  }

  /** Reserves `amount` of today's cap in `namespace`; refused (nothing written) when it does not fit. */
  async reserve(
    namespace: string,
    budget: Budget,
    amount: bigint,
    now: Date,
  ): Promise<Result<void, AttemptError>> {
    const key = computeLedgerKey(now, this.#cap.currency);
    return this.#update<Result<void, AttemptError>>(namespace, now, (data) => {
      const plan = planReservation({
        cap: this.#cap,
        namespace,
        budget,
        spentToday: readSpent(data, key),
        reservation: amount,
      });
      return plan.ok ? { write: addToLedger(data, key, amount, now), result: plan } : { result: plan };
    });
  }

  /** Replaces a reservation made at `reservedAt` by what the call cost. */
  async settle(namespace: string, reservedAt: Date, delta: bigint, now: Date): Promise<void> {
    if (delta === 0n) return;
    const key = computeLedgerKey(reservedAt, this.#cap.currency);
    await this.#update(namespace, now, (data) => ({
      write: addToLedger(data, key, delta, now),
      result: ok(undefined),
    }));
  }

  /** Today's spending in `namespace` (reservations included). */
  async spentToday(namespace: string, now: Date): Promise<bigint> {
    const live = await this.#client.get<DataObject>(Resources.configMaps, namespace, LEDGER_CONFIGMAP);
    return readSpent(live?.data, computeLedgerKey(now, this.#cap.currency));
  }

  async #update<T>(
    namespace: string,
    now: Date,
    change: (data: Readonly<Record<string, string>> | undefined) => {
      write?: Record<string, string>;
      result: T;
    },
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const live = await this.#client.get<DataObject>(Resources.configMaps, namespace, LEDGER_CONFIGMAP);
      const { write, result } = change(live?.data);
      if (!write) return result;
      try {
        if (live) await this.#client.replace(Resources.configMaps, { ...live, data: write });
        else await this.#client.create(Resources.configMaps, buildLedger(namespace, write, now));
        return result;
      } catch (e) {
        if (attempt >= MAX_WRITE_ATTEMPTS || !(isConflict(e) || isAlreadyExists(e))) throw e;
        await new Promise((r) => setTimeout(r, Math.random() * CONFLICT_PAUSE_MS));
      }
    }
  }
}

function buildLedger(namespace: string, data: Record<string, string>, now: Date): DataObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: LEDGER_CONFIGMAP,
      namespace,
      labels: { 'app.kubernetes.io/managed-by': 'cacheroute' },
      annotations: {
        'cacheroute.dev/about':
          'What paid calls (OpenRouter Tasks) cost in this namespace per UTC day, kept by the cacheroute operator ' +
          `against its daily cap; started ${now.toISOString()}. Deleting it forgets today's spending.`,
      },
    },
    data,
  };
}
