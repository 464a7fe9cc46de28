// A DeploymentPart: the prefill or the decode part of a disaggregated
// Deployment as a scale target of its own (ADR 0015). The operator makes one
// per part, named `<deployment>-<part>` and owned by the Deployment; an HPA,
// KEDA or `kubectl scale` sets its replicas through the scale subresource, and
// the operator renders that part's workload with them.
import { z } from 'zod';
import { ObjectName } from './common.ts';

/** The parts of a disaggregated Deployment, each a DeploymentPart. */
export const PartRole = z.enum(['prefill', 'decode']);
export type PartRole = z.infer<typeof PartRole>;

/**
 * On a DeploymentPart: the Deployment's declared replicas for the part when the operator last
 * set the part's replicas from them. The part's replicas are set again only when the declared
 * value differs from this one, so what an autoscaler wrote stands in between.
 */
export const DECLARED_REPLICAS_ANNOTATION = 'cacheroute.dev/declared-replicas';

/** The DeploymentPart of one part of a Deployment: deterministic, one per part. */
export function buildDeploymentPartName(deployment: string, part: PartRole): string {
  return `${deployment}-${part}`;
}

export const DeploymentPartSpec = z.object({
  deployment: ObjectName.meta({
    description: 'The Deployment this is a part of, in the same namespace (set by the operator).',
  }),
  part: PartRole.meta({ description: 'Which part: prefill or decode (set by the operator).' }),
  replicas: z.number().int().min(0).max(1024).optional().meta({
    description:
      "Replicas of the part: the scale subresource, which an HPA, KEDA or kubectl scale writes. The operator sets it from the Deployment's spec.disaggregation.<part>.replicas when it makes the part and again only when that declared value changes; otherwise what was written here stands.",
  }),
});
export type DeploymentPartSpec = z.infer<typeof DeploymentPartSpec>;

export const DeploymentPartStatus = z.object({
  observedGeneration: z.number().int().optional(),
  replicas: z
    .number()
    .int()
    .optional()
    .meta({ description: "Pods of the part that exist (the scale subresource's status)." }),
  readyReplicas: z.number().int().optional().meta({ description: 'Pods of the part that are Ready.' }),
  selector: z
    .string()
    .optional()
    .meta({ description: "Label selector of the part's pods, for the scale subresource." }),
});
export type DeploymentPartStatus = z.infer<typeof DeploymentPartStatus>;
