import type { z } from 'zod';
import { deploymentIdentityRule } from './deployment-spec.ts';
import {
  API_VERSION,
  CachePolicyResource,
  DeploymentPartResource,
  DeploymentResource,
  TaskResource,
  TenantResource,
  QualificationResource,
  taskFrozenSpecRule,
} from './resources.ts';
import { checkTransition, type RuleViolation } from './rules.ts';

export interface ValidationIssue {
  readonly path: string;
  readonly message: string;
}

export type Validated<T> = { ok: true; value: T } | { ok: false; issues: ValidationIssue[] };

const RESOURCE_SCHEMAS = {
  Deployment: DeploymentResource,
  DeploymentPart: DeploymentPartResource,
  CachePolicy: CachePolicyResource,
  Task: TaskResource,
  Tenant: TenantResource,
  Qualification: QualificationResource,
} as const;
export type CacherouteKind = keyof typeof RESOURCE_SCHEMAS;

export type CacherouteResource = z.infer<(typeof RESOURCE_SCHEMAS)[CacherouteKind]>;

function formatPath(path: readonly PropertyKey[]): string {
  return path
    .map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`))
    .join('')
    .replace(/^\./, '');
}

function fromZod(error: z.ZodError): ValidationIssue[] {
  return error.issues.map((i) => ({ path: formatPath(i.path), message: i.message }));
}

/** Validates any cacheroute object the way the API server would (schema and CEL rules). */
export function validateResource(input: unknown): Validated<CacherouteResource> {
  const head = input as { apiVersion?: unknown; kind?: unknown } | null;
  const kind = typeof head?.kind === 'string' ? head.kind : '';
  if (head?.apiVersion !== API_VERSION || !(kind in RESOURCE_SCHEMAS)) {
    return {
      ok: false,
      issues: [
        {
          path: 'kind',
          message: `expected apiVersion ${API_VERSION} and kind Deployment, DeploymentPart, CachePolicy, Task, Tenant or Qualification`,
        },
      ],
    };
  }
  const parsed = RESOURCE_SCHEMAS[kind as CacherouteKind].safeParse(input);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, issues: fromZod(parsed.error) };
}

/** The update rules the API server applies with `oldSelf`, for code paths that see both versions. */
export function validateUpdate(next: CacherouteResource, previous: CacherouteResource): RuleViolation[] {
  if (next.kind === 'Deployment' && previous.kind === 'Deployment') {
    return checkTransition([deploymentIdentityRule], next.spec, previous.spec).map((v) => ({
      ...v,
      path: `spec${v.path}`,
    }));
  }
  if (next.kind === 'Task' && previous.kind === 'Task') {
    return checkTransition([taskFrozenSpecRule], next, previous);
  }
  return [];
}
