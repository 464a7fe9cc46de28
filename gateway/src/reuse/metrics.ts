// The shared result store's refusals as a Prometheus counter, read from the
// store at scrape time (nothing to keep in step on the request path).

import { Counter, type Registry } from 'prom-client';
import type { RedisResultStore, StoreRefusalReason } from './redis-store.ts';

export function registerReuseStoreMetrics(registry: Registry, store: RedisResultStore): void {
  new Counter({
    name: 'cacheroute_gateway_reuse_store_refused_total',
    help:
      'Reuse entries read from Redis and not served (each a miss), by reason: signature (not signed with ' +
      "this tier's key for the key it sits under: planted, moved, or the replicas' keys differ), expired (past " +
      'its signed expiry), malformed, oversized (larger than any entry the gateway writes).',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(store.stats.refused) as [StoreRefusalReason, number][])
        this.inc({ reason }, n);
    },
  });
}
