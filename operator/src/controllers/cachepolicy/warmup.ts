import type { CachePolicyResource, DeploymentResource, Endpoint } from '../../api/index.ts';

/** A disaggregated target's partner: SGLang warms a prefill only through a real prefill/decode pair. */
export interface WarmupPair {
  decodePod: string;
  decodeUrl: string;
  bootstrapHost: string;
  bootstrapPort: number | undefined;
}

export interface WarmupTarget {
  deployment: string;
  pod: string;
  /** The pod's identity fingerprint (its decode partner's too): which runtime API key it takes. */
  fingerprint: string;
  url: string;
  salt: string;
  pair?: WarmupPair;
}

const isServing = (e: Endpoint): boolean => e.ready && e.verified;
const urlOf = (e: Endpoint): string => `http://${e.ip}:${e.port}`;

/**
 * The endpoints that still need the policy's documents prefilled: verified and
 * ready, of a role that prefills (standalone or prefill; a decode server gets
 * its KV from prefill), not warmed before. A prefill endpoint is warmed
 * through a serving decode endpoint of its fingerprint: a disaggregated SGLang
 * server refuses a request without a bootstrap room, and one sent with the
 * fake bootstrap host is never inserted in its cache (sglang/bootstrap.ts).
 * A prefill without a partner waits for one. Pure.
 */
export function planWarmup(
  policy: CachePolicyResource,
  deployments: ReadonlyMap<string, DeploymentResource>,
  salts: ReadonlyMap<string, string>,
): WarmupTarget[] {
  if (!policy.spec.warmup) return [];
  const warmed = new Map(
    (policy.status?.targets ?? []).map((t) => [t.name, new Set(t.warmedEndpoints ?? [])]),
  );
  const out: WarmupTarget[] = [];
  for (const [name, salt] of salts) {
    const endpoints = deployments.get(name)?.status?.endpoints ?? [];
    for (const e of endpoints) {
      if (!isServing(e) || e.role === 'decode') continue;
      if (warmed.get(name)?.has(e.pod)) continue;
      const target: WarmupTarget = {
        deployment: name,
        pod: e.pod,
        fingerprint: e.fingerprint ?? '',
        url: urlOf(e),
        salt,
      };
      if (e.role === 'prefill') {
        const decode = endpoints.find(
          (d) => d.role === 'decode' && isServing(d) && d.fingerprint === e.fingerprint,
        );
        if (!decode) continue;
        target.pair = {
          decodePod: decode.pod,
          decodeUrl: urlOf(decode),
          bootstrapHost: e.ip,
          bootstrapPort: e.bootstrapPort,
        };
      }
      out.push(target);
    }
  }
  return out;
}

/** Warmed pods that still exist: a pod that went away is forgotten, so its replacement is warmed. */
export function pruneWarmed(warmed: readonly string[], deployment: DeploymentResource | undefined): string[] {
  const live = new Set((deployment?.status?.endpoints ?? []).map((e) => e.pod));
  return warmed.filter((p) => live.has(p));
}
