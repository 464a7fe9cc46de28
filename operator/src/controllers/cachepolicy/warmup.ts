import type { CachePolicyResource, DeploymentResource } from '../../api/index.ts';

export interface WarmupTarget {
  deployment: string;
  pod: string;
  url: string;
  salt: string;
}

/**
 * The endpoints that still need the policy's documents prefilled: verified and
 * ready, of a role that prefills (standalone or prefill; a decode server gets
 * its KV from prefill), not warmed before. Pure.
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
    const d = deployments.get(name);
    for (const e of d?.status?.endpoints ?? []) {
      if (!e.ready || !e.verified || e.role === 'decode') continue;
      if (warmed.get(name)?.has(e.pod)) continue;
      out.push({ deployment: name, pod: e.pod, url: `http://${e.ip}:${e.port}`, salt });
    }
  }
  return out;
}

/** Warmed pods that still exist: a pod that went away is forgotten, so its replacement is warmed. */
export function pruneWarmed(warmed: readonly string[], deployment: DeploymentResource | undefined): string[] {
  const live = new Set((deployment?.status?.endpoints ?? []).map((e) => e.pod));
  return warmed.filter((p) => live.has(p));
}
