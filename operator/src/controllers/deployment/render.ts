import type { KubernetesObject } from '@kubernetes/client-node';
import { validateResource, type ValidationIssue } from '../../api/index.ts';
import { buildDesired } from './desired.ts';

export type RenderResult =
  { ok: true; objects: KubernetesObject[] } | { ok: false; name: string; issues: ValidationIssue[] };

/**
 * What the operator would apply for one manifest, without a cluster. A
 * placeholder uid stands in for the one the API server assigns.
 */
export function renderManifest(doc: unknown): RenderResult {
  const parsed = validateResource(doc);
  const rawName = (doc as { metadata?: { name?: unknown } } | null)?.metadata?.name;
  const name = typeof rawName === 'string' ? rawName : '<unnamed>';
  if (!parsed.ok) return { ok: false, name, issues: parsed.issues };
  const root = parsed.value;
  if (root.kind !== 'Deployment') return { ok: true, objects: [] };
  const withIdentity = {
    ...root,
    metadata: { namespace: 'default', uid: '00000000-0000-0000-0000-000000000000', ...root.metadata },
  };
  const desired = buildDesired(withIdentity);
  return { ok: true, objects: [...desired.workloads, ...desired.services] as KubernetesObject[] };
}
