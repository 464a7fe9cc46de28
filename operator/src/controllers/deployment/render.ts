import type { KubernetesObject } from '@kubernetes/client-node';
import { validateResource, type ValidationIssue } from '#api';
import { buildDesired } from './desired.ts';
import { planL3 } from './l3/plan.ts';
import { checkHostPath } from './model-cache/host-path-roots.ts';
import { DEFAULT_MODEL_CACHE_NODE_ROOT } from './model-cache/objects.ts';
import { buildRuntimeNetworkPolicy, type RuntimeIngress } from './network-policy.ts';
import { buildDeploymentPart, planParts } from './parts.ts';
import { buildRuntimeKeySecret } from './runtime-keys.ts';

/** What the key Secret shows instead of a key: the operator makes each one at reconcile. */
export const RUNTIME_KEY_PLACEHOLDER = '<random, made by the operator at its first reconcile>';

export interface RenderOptions {
  /** The peers the operator's --runtime-ingress-* flags name: a NetworkPolicy is rendered with them. */
  readonly runtimeIngress?: RuntimeIngress | undefined;
  /** The operator's --host-path-roots and --model-cache-node-root: a hostPath outside them renders nothing. */
  readonly hostPathRoots?: readonly string[] | undefined;
  readonly nodeCacheRoot?: string | undefined;
}

export type RenderResult =
  { ok: true; objects: KubernetesObject[] } | { ok: false; name: string; issues: ValidationIssue[] };

/**
 * What the operator would apply for one manifest, without a cluster: the workloads and
 * Services, each part's DeploymentPart as the operator makes it (seeded with the declared replicas), the runtime API key Secret (the key itself a placeholder) and, with the
 * operator's ingress peers, the runtime NetworkPolicy; HiCache's L3 claims and Mooncake stores the operator makes. A placeholder uid stands in for the
 * one the API server assigns.
 */
export function renderManifest(doc: unknown, opts: RenderOptions = {}): RenderResult {
  const parsed = validateResource(doc);
  const rawName = (doc as { metadata?: { name?: unknown } } | null)?.metadata?.name;
  const name = typeof rawName === 'string' ? rawName : '<unnamed>';
  if (!parsed.ok) return { ok: false, name, issues: parsed.issues };
  const root = parsed.value;
  if (root.kind !== 'Deployment') return { ok: true, objects: [] };
  const hostPath = root.spec.model.source.hostPath;
  const nodeCacheRoot = opts.nodeCacheRoot ?? DEFAULT_MODEL_CACHE_NODE_ROOT;
  const verdict =
    hostPath && checkHostPath(hostPath.path, opts.hostPathRoots ?? [nodeCacheRoot], nodeCacheRoot);
  if (verdict && !verdict.ok)
    return {
      ok: false,
      name,
      issues: [{ path: 'spec.model.source.hostPath.path', message: verdict.message }],
    };
  const withIdentity = {
    ...root,
    metadata: { namespace: 'default', uid: '00000000-0000-0000-0000-000000000000', ...root.metadata },
  };
  const desired = buildDesired(withIdentity);
  const { data: _keys, ...secret } = buildRuntimeKeySecret(withIdentity, {});
  const keySecret = { ...secret, stringData: { [desired.fingerprint]: RUNTIME_KEY_PLACEHOLDER } };
  const parts = planParts(withIdentity, () => undefined).map((p) => {
    const part = buildDeploymentPart(withIdentity, p.part);
    const seed = p.propagate;
    return seed
      ? {
          ...part,
          metadata: { ...part.metadata, annotations: seed.metadata.annotations },
          spec: { ...part.spec, ...seed.spec },
        }
      : part;
  });
  return {
    ok: true,
    objects: [
      ...desired.workloads,
      ...desired.groupSets,
      ...desired.services,
      ...parts,
      keySecret,
      ...planL3(withIdentity, desired.engines, desired.fingerprint).flatMap((p): KubernetesObject[] =>
        p.backend === 'mooncake' ? [p.workload, p.service] : p.claim ? [p.claim] : [],
      ),
      ...(opts.runtimeIngress ? [buildRuntimeNetworkPolicy(withIdentity, opts.runtimeIngress)] : []),
    ] as KubernetesObject[],
  };
}
