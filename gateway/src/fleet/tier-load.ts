// The load exchange's life in a gateway process: bind this replica's PUB
// socket on --load-exchange-port, follow the tier's addresses (the gateway
// Service's EndpointSlices, every replica on the same port) once a second,
// and record how old each caught-up change was in
// cacheroute_gateway_peer_load_lag_seconds; how many peers it hears from now
// is cacheroute_gateway_load_exchange_peers (absent without an exchange).

import os from 'node:os';
import { Gauge } from 'prom-client';
import { isIPv6 } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { GatewayMetrics } from '../metrics/index.ts';
import { LoadExchange } from './load-exchange.ts';
import type { PeerSet } from './peers.ts';

/**
 * How long a pick may take to reach the peers over the exchange when the exchange cannot say
 * (LoadExchange.unheardMs measures it): about the p99 of test/bench/bench-exchange-lag.ts on a
 * loaded 2-core host (p50 0.2 ms). Within it, a policy treats its peers' simultaneous picks as
 * unheard (policies/cache-aware.ts).
 */
export const EXCHANGE_UNHEARD_MS = 20;

export interface LoadExchangeSettings {
  /** Every replica binds and dials this port; 0 binds one the kernel picks (a lone replica, tests). */
  readonly port: number;
  readonly host?: string;
  /** The address bound (`tcp://host:port`), once bound: how whoever started a replica on port 0 learns it. */
  readonly onBound?: (address: string) => void;
}

/** `tcp://host:port`, IPv6 hosts bracketed. */
export function formatZmqAddress(host: string, port: number): string {
  return `tcp://${isIPv6(host) ? `[${host}]` : host}:${port}`;
}

export interface TierLoadHandle {
  /** What the Gateway takes: the exchange as its TierLoad, or nothing without one. */
  readonly gatewayOptions: { readonly tierLoad?: LoadExchange };
  start(): void;
  close(): void;
}

const NO_EXCHANGE: TierLoadHandle = { gatewayOptions: {}, start: () => undefined, close: () => undefined };

/** The exchange when `settings` asks for one; a handle that does nothing otherwise. */
export function openTierLoad(
  settings: LoadExchangeSettings | undefined,
  peers: PeerSet | undefined,
  metrics: GatewayMetrics,
  log: FastifyBaseLogger,
): TierLoadHandle {
  if (!settings) return NO_EXCHANGE;
  const exchange = new LoadExchange({
    self: peers?.self ?? os.hostname(),
    onLag: (ms) => metrics.peerLoadLagSeconds.observe(ms / 1000),
  });
  new Gauge({
    name: 'cacheroute_gateway_load_exchange_peers',
    help: "Other gateway replicas whose load this replica heard within the exchange's staleness bound.",
    registers: [metrics.registry],
    collect() {
      this.set(exchange.livePeers().length);
    },
  });
  let timer: ReturnType<typeof setInterval> | undefined;
  const follow = (): void =>
    exchange.connect(
      peers?.exchangeEndpoints?.() ??
        (peers?.addresses?.() ?? []).map((a) => formatZmqAddress(a, settings.port)),
    );
  return {
    gatewayOptions: { tierLoad: exchange },
    start() {
      exchange
        .bind(formatZmqAddress(settings.host ?? '0.0.0.0', settings.port))
        .then((address) => {
          log.info({ address }, 'load exchange: listening for the tier');
          settings.onBound?.(address);
        })
        .catch((err: unknown) =>
          log.error({ err }, 'load exchange: cannot bind; this replica routes on its own share of the load'),
        );
      follow();
      timer = setInterval(follow, 1000);
      timer.unref();
    },
    close() {
      if (timer) clearInterval(timer);
      exchange.close();
    },
  };
}
