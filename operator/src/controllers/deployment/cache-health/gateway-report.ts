// The gateway tier's cache report, as one: every replica the admin URL's host
// resolves to is read (a headless Service resolves to all of them; a ClusterIP
// one to whichever replica answers), and their windows are added up. Each
// replica's counts are of the requests it routed, so the sum is the tier's.
import { lookup } from 'node:dns/promises';
import {
  GATEWAY_CACHE_REPORT_PATH,
  GatewayCacheReport,
  type GatewayEndpointEvents,
} from '../../../api/index.ts';
import { getJson } from '../../../sglang/client.ts';

export interface DeploymentPrediction {
  readonly promptTokens: number;
  readonly predictedTokens: number;
}

export interface TierReport {
  /** By namespace/name. */
  readonly predictions: ReadonlyMap<string, DeploymentPrediction>;
  /** By namespace/pod: the worst any replica says of the endpoint's event index. */
  readonly events: ReadonlyMap<string, GatewayEndpointEvents>;
  readonly replicas: number;
}

export type TierRead = { ok: true; value: TierReport } | { ok: false; error: string };

/** Of two replicas' views of one endpoint, the one that should worry a person more. */
function worse(a: GatewayEndpointEvents, b: GatewayEndpointEvents): GatewayEndpointEvents {
  if (a.usable !== b.usable) return a.usable ? b : a;
  return (b.lagMs ?? -1) > (a.lagMs ?? -1) ? b : a;
}

export function mergeReports(reports: readonly GatewayCacheReport[]): TierReport {
  const predictions = new Map<string, DeploymentPrediction>();
  const events = new Map<string, GatewayEndpointEvents>();
  for (const r of reports)
    for (const d of r.deployments) {
      const was = predictions.get(d.deployment) ?? { promptTokens: 0, predictedTokens: 0 };
      predictions.set(d.deployment, {
        promptTokens: was.promptTokens + d.promptTokens,
        predictedTokens: was.predictedTokens + d.predictedTokens,
      });
      const namespace = d.deployment.split('/')[0] ?? '';
      for (const e of d.endpoints) {
        if (!e.events) continue;
        const key = `${namespace}/${e.pod}`;
        const seen = events.get(key);
        events.set(key, seen ? worse(seen, e.events) : e.events);
      }
    }
  return { predictions, events, replicas: reports.length };
}

export async function readGatewayTier(
  adminUrl: string,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<TierRead> {
  const url = new URL(adminUrl);
  let addresses: string[];
  try {
    addresses = (await lookup(url.hostname, { all: true })).map((a) =>
      a.family === 6 ? `[${a.address}]` : a.address,
    );
  } catch (err) {
    return { ok: false, error: `resolve ${url.hostname}: ${(err as Error).message}` };
  }
  const reads = await Promise.all(
    addresses.map((address) => {
      const replica = new URL(url);
      replica.hostname = address;
      replica.pathname = GATEWAY_CACHE_REPORT_PATH;
      return getJson(replica.toString(), GatewayCacheReport, opts);
    }),
  );
  const ok = reads.flatMap((r) => (r.ok ? [r.value] : []));
  if (ok.length === 0) {
    const first = reads.find((r) => !r.ok);
    return { ok: false, error: first && !first.ok ? first.error : `no address for ${url.hostname}` };
  }
  return { ok: true, value: mergeReports(ok) };
}
