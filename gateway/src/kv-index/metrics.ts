// The KV index's health as Prometheus gauges, read from the fleet at scrape
// time (nothing to keep in step on the request path).

import { Counter, Gauge, type Registry } from 'prom-client';
import type { KvIndexFleet } from './fleet.ts';

export function registerKvIndexMetrics(registry: Registry, fleet: KvIndexFleet): void {
  new Gauge({
    name: 'cacheroute_gateway_kv_events_lag_seconds',
    help:
      "How far each endpoint's last applied KV event batch trailed its publisher's clock when it " +
      'arrived (the slowest rank; includes clock skew between hosts).',
    labelNames: ['endpoint'],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of fleet.status()) {
        const lags = s.ranks.map((r) => r.lagMs).filter((l): l is number => l !== null);
        if (lags.length > 0) this.set({ endpoint: s.endpoint }, Math.max(...lags) / 1000);
      }
    },
  });
  new Gauge({
    name: 'cacheroute_gateway_kv_index_usable',
    help:
      "1 when routing reads the endpoint's cache from its KV events (live, not lagging; 0.5 when the index " +
      'started late and is only a floor beside the tree); 0 when it falls back to the response-corrected tree ' +
      '(/status says why).',
    labelNames: ['endpoint'],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of fleet.status())
        this.set({ endpoint: s.endpoint }, !s.usable ? 0 : s.ranks.every((r) => r.complete) ? 1 : 0.5);
    },
  });
  new Gauge({
    name: 'cacheroute_gateway_kv_index_blocks',
    help: "Blocks the gateway's index holds for each endpoint (all ranks and tiers).",
    labelNames: ['endpoint'],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of fleet.status())
        this.set(
          { endpoint: s.endpoint },
          s.ranks.reduce((n, r) => n + r.blocks, 0),
        );
    },
  });
  new Gauge({
    name: 'cacheroute_gateway_kv_l3_blocks',
    help:
      "Blocks the gateway models in the Deployments' shared HiCache L3 tiers (every directory together: " +
      'host-tier stores of their members, kv-index/shared-l3.ts); they count in the same budget.',
    registers: [registry],
    collect() {
      this.set(fleet.l3.blocks);
    },
  });
  new Counter({
    name: 'cacheroute_gateway_kv_index_evicted_blocks_total',
    help:
      "Blocks evicted from the KV index to keep every endpoint's blocks together within the gateway's " +
      'budget (--kv-index-max-blocks): the oldest of the largest index go first. Rising: a runtime floods ' +
      'events, or the fleet caches more than the budget holds (matches are then shorter, never wrong).',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(fleet.budget.evicted);
    },
  });
}
