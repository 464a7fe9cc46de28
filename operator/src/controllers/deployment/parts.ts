// The parts of a disaggregated Deployment as scale targets of their own
// (ADR 0015): one DeploymentPart per part, whose spec.replicas (the scale
// subresource) an HPA, KEDA or `kubectl scale` owns. Pure.
//
// Who sets a part's replicas. The Deployment's spec.disaggregation.<part>.replicas
// is a declaration: it seeds the part when the part is made, and is carried to
// the part again only when the declared value changes (the part records the
// value it last carried, DECLARED_REPLICAS_ANNOTATION). In between, whatever
// wrote the part's replicas last stands, and the part's workload runs that. The
// operator writes the part's replicas with a merge patch, an Update as the
// HPA's write through /scale is, and never in its server-side apply: an apply
// that held spec.replicas would take it back from the autoscaler on every pass
// (force), or drop it when left out.
import {
  API_VERSION,
  buildDeploymentPartName,
  DECLARED_REPLICAS_ANNOTATION,
  PartRole,
  type DeploymentPartResource,
  type DeploymentResource,
  type Endpoint,
  type PartReplicas,
} from '#api';
import { buildOwnedMetadata } from './meta/owned.ts';
import { buildSelectorLabels, MANAGED_BY } from './meta/labels.ts';

/** What the operator knows of a live part: what it runs and the declared value it last carried. */
export interface LivePart {
  readonly replicas: number | undefined;
  readonly declared: string | undefined;
}

export interface PartPlan {
  readonly part: PartRole;
  readonly name: string;
  /** The replicas the part's workload runs this pass. */
  readonly replicas: number;
  /** Set: carry the declared value to the part (spec.replicas and the annotation), one merge patch. */
  readonly propagate:
    { spec: { replicas: number }; metadata: { annotations: Record<string, string> } } | undefined;
}

/**
 * One part's replicas. A part without replicas (just made, or its seeding was interrupted) or
 * whose recorded declared value is not the one declared now takes the declared value; any other
 * keeps its own, whoever wrote it.
 */
export function planPart(
  part: PartRole,
  name: string,
  declared: number,
  live: LivePart | undefined,
): PartPlan {
  const carry = live?.replicas === undefined || live.declared !== String(declared);
  return {
    part,
    name,
    replicas: carry ? declared : live.replicas,
    propagate: carry
      ? {
          spec: { replicas: declared },
          metadata: { annotations: { [DECLARED_REPLICAS_ANNOTATION]: String(declared) } },
        }
      : undefined,
  };
}

/** Every part of a Deployment (none when standalone), from what is live by part name. */
export function planParts(
  root: DeploymentResource,
  live: (name: string) => LivePart | undefined,
): PartPlan[] {
  const d = root.spec.disaggregation;
  if (!d) return [];
  const name = root.metadata.name ?? '';
  return PartRole.options.map((part) => {
    const partName = buildDeploymentPartName(name, part);
    return planPart(part, partName, d[part].replicas, live(partName));
  });
}

/** The Deployment as rendered: each part's replicas are the part's, not the declared ones. */
export function withPartReplicas(root: DeploymentResource, plans: readonly PartPlan[]): DeploymentResource {
  const d = root.spec.disaggregation;
  if (!d || plans.every((p) => d[p.part].replicas === p.replicas)) return root;
  const disaggregation = { ...d };
  for (const p of plans) disaggregation[p.part] = { ...d[p.part], replicas: p.replicas };
  return { ...root, spec: { ...root.spec, disaggregation } };
}

/**
 * The fields of a part the operator's server-side apply owns: never spec.replicas (see the top
 * of this file). The part's spec.deployment and spec.part only say what it is.
 */
export function buildDeploymentPart(root: DeploymentResource, part: PartRole): DeploymentPartResource {
  const name = root.metadata.name ?? '';
  return {
    apiVersion: API_VERSION,
    kind: 'DeploymentPart',
    metadata: buildOwnedMetadata(root, buildDeploymentPartName(name, part), {
      'app.kubernetes.io/name': 'sglang',
      'app.kubernetes.io/instance': name,
      'app.kubernetes.io/component': part,
      'app.kubernetes.io/part-of': 'cacheroute',
      'app.kubernetes.io/managed-by': MANAGED_BY,
      ...buildSelectorLabels(name, part),
    }),
    spec: { deployment: name, part },
  };
}

/**
 * Each part in the Deployment's status: its scale target, the replicas it runs (`rendered`'s: a
 * pair woken from zero runs more than its parts' spec.replicas, wake/plan.ts) and its endpoints.
 */
export function computePartsStatus(
  plans: readonly PartPlan[],
  endpoints: readonly Endpoint[],
  rendered?: DeploymentResource,
): PartReplicas[] | undefined {
  if (plans.length === 0) return undefined;
  return plans.map((p) => {
    const ready = endpoints.filter((e) => e.role === p.part && e.ready);
    return {
      part: p.part,
      name: p.name,
      replicas: rendered?.spec.disaggregation?.[p.part].replicas ?? p.replicas,
      readyReplicas: ready.length,
      verifiedReplicas: ready.filter((e) => e.verified).length,
    };
  });
}
