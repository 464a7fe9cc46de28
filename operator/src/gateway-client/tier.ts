// The operator's client of the gateway tier's admin API (the cache-health prober, the wake
// watcher and the metrics API read it). Reads the tier's cache reports: every replica the
// admin URL's host resolves to (a headless Service resolves to all of them), each on its own
// address, so that the prober can window each replica's counters apart.
import { Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import { GATEWAY_CACHE_REPORT_PATH, GatewayCacheReport } from '#api';
import { getJson } from '../sglang-client/client.ts';

export type ReplicaRead = { address: string } & (
  { ok: true; report: GatewayCacheReport } | { ok: false; error: string }
);

export type TierRead = { ok: true; replicas: ReplicaRead[] } | { ok: false; error: string };

async function resolveAll(host: string, timeoutMs: number): Promise<string[]> {
  if (isIP(host)) return [host];
  // A Resolver, not lookup(): it has a timeout, and does not wait on libuv's thread pool.
  const resolver = new Resolver({ timeout: timeoutMs, tries: 2 });
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
  const addresses = [
    ...(v4.status === 'fulfilled' ? v4.value : []),
    ...(v6.status === 'fulfilled' ? v6.value : []),
  ];
  if (addresses.length > 0) return addresses;
  const reason = v4.status === 'rejected' ? (v4.reason as Error).message : 'no address';
  throw new Error(reason);
}

export async function readGatewayTier(
  adminUrl: string,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<TierRead> {
  const url = new URL(adminUrl);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  try {
    addresses = await resolveAll(host, opts.timeoutMs);
  } catch (err) {
    return {
      ok: false,
      error: `resolve ${host}: ${(err as Error).message} (--gateway-admin-url; the chart's <release>-gateway-replicas Service)`,
    };
  }
  const replicas = await Promise.all(
    addresses.map(async (address): Promise<ReplicaRead> => {
      const replica = new URL(url);
      replica.hostname = isIP(address) === 6 ? `[${address}]` : address;
      replica.pathname = GATEWAY_CACHE_REPORT_PATH;
      const read = await getJson(replica.toString(), GatewayCacheReport, opts);
      return read.ok ? { address, ok: true, report: read.value } : { address, ok: false, error: read.error };
    }),
  );
  // One replica answers on each of its addresses (IPv4 and IPv6 on a dual-stack cluster): its
  // start's instance id counts it once.
  const instances = new Set<string>();
  return {
    ok: true,
    replicas: replicas.filter((r) => {
      if (!r.ok) return true;
      if (instances.has(r.report.instance)) return false;
      instances.add(r.report.instance);
      return true;
    }),
  };
}
