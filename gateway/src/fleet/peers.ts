// Who the gateway tier is: the replicas that receive traffic now, by name.
// Admission divides each CachePolicy bound among them (share.ts).

export interface PeerSet {
  /** This replica's name (its pod name in a cluster). */
  readonly self: string;
  /** The replicas receiving traffic now, self included or not (share.ts counts it either way). */
  members(): readonly string[];
  /**
   * Where every replica of the tier is (pod IPs), draining ones included: the load exchange
   * (load-exchange.ts) hears each; absent where the set knows names only.
   */
  addresses?(): readonly string[];
  /**
   * Where each replica's load exchange listens (`tcp://host:port`), when the replicas do not all
   * listen on one port (processes on one host, as in the routing bench): the exchange dials these
   * instead of addresses() on its own port.
   */
  exchangeEndpoints?(): readonly string[];
}

/** A replica that knows of no peers: it takes every bound whole (one replica, or no peer source). */
export function buildSoloPeers(self = 'self'): PeerSet {
  // The same array every time: tier-position.ts recomputes only when members() changes.
  const members = [self];
  return { self, members: () => members };
}
