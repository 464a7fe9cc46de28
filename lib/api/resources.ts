import { z } from 'zod';
import { CachePolicySpec, CachePolicyStatus } from './cache-policy.ts';
import { DeploymentSpec } from './deployment-spec.ts';
import { DeploymentStatus } from './deployment-status.ts';
import { DeploymentPartSpec, DeploymentPartStatus } from './deployment-part.ts';
import { QualificationSpec, QualificationStatus } from './qualification.ts';
import type { TransitionRule } from './rules.ts';
import { TaskSpec, TaskStatus, type TaskPhase } from './task.ts';
import { TenantSpec, TenantStatus } from './tenant.ts';

export const GROUP = 'cacheroute.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** The metadata fields our code reads; the rest passes through untouched. */
export const ObjectMeta = z.looseObject({
  name: z.string().optional(),
  generateName: z.string().optional(),
  namespace: z.string().optional(),
  uid: z.string().optional(),
  resourceVersion: z.string().optional(),
  generation: z.number().int().optional(),
  creationTimestamp: z.string().optional(),
  deletionTimestamp: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  finalizers: z.array(z.string()).optional(),
});
export type ObjectMeta = z.infer<typeof ObjectMeta>;

function resource<K extends string, S extends z.ZodType, T extends z.ZodType>(kind: K, spec: S, status: T) {
  return z.object({
    apiVersion: z.literal(API_VERSION),
    kind: z.literal(kind),
    metadata: ObjectMeta,
    spec,
    status: status.optional(),
  });
}

export const DeploymentResource = resource('Deployment', DeploymentSpec, DeploymentStatus);
export type DeploymentResource = z.infer<typeof DeploymentResource>;
export const DeploymentPartResource = resource('DeploymentPart', DeploymentPartSpec, DeploymentPartStatus);
export type DeploymentPartResource = z.infer<typeof DeploymentPartResource>;
export const CachePolicyResource = resource('CachePolicy', CachePolicySpec, CachePolicyStatus);
export type CachePolicyResource = z.infer<typeof CachePolicyResource>;
export const TaskResource = resource('Task', TaskSpec, TaskStatus);
export type TaskResource = z.infer<typeof TaskResource>;
export const TenantResource = resource('Tenant', TenantSpec, TenantStatus);
export type TenantResource = z.infer<typeof TenantResource>;
export const QualificationResource = resource('Qualification', QualificationSpec, QualificationStatus);
export type QualificationResource = z.infer<typeof QualificationResource>;

const STARTED_FREE_PHASES: readonly TaskPhase[] = ['Pending'];
const TASK_MUTABLE_AFTER_START = ['review'];
const TASK_FROZEN_FIELDS = Object.keys(TaskSpec.shape).filter((k) => !TASK_MUTABLE_AFTER_START.includes(k));

function fieldUnchanged(field: string): string {
  const n = `self.spec.${field}`;
  const o = `oldSelf.spec.${field}`;
  return `(has(${n}) ? (has(${o}) && ${n} == ${o}) : !has(${o}))`;
}

/**
 * Once a task has left Pending its spec is the approved snapshot: only the
 * review fields may change. A rule on spec cannot see status, so this one sits
 * on the root; on the main resource the API server keeps the stored status, so
 * `oldSelf.status` is the truth.
 */
export const taskFrozenSpecRule: TransitionRule<TaskResource> = {
  cel:
    `!has(oldSelf.status) || !has(oldSelf.status.phase) || oldSelf.status.phase in [${STARTED_FREE_PHASES.map((p) => `'${p}'`).join(', ')}] || ` +
    `(${TASK_FROZEN_FIELDS.map(fieldUnchanged).join(' && ')})`,
  message: 'a started Task is frozen: only spec.review may change; create a new Task for different work',
  check: (next, prev) => {
    const phase = prev.status?.phase;
    if (phase === undefined || STARTED_FREE_PHASES.includes(phase)) return true;
    const a = next.spec as Record<string, unknown>;
    const b = prev.spec as Record<string, unknown>;
    return TASK_FROZEN_FIELDS.every((f) => JSON.stringify(a[f]) === JSON.stringify(b[f]));
  },
};
