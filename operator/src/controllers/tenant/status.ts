// A Tenant's status from what the operator can see: whether every model it
// names is a Deployment in its namespace. Its keys are the gateway's to judge
// (the operator reads no Secret for a Tenant: ADR 0007), and the gateway's
// /status lists any key it refused. Pure.

import type { TenantResource, TenantStatus } from '#api';
import { setCondition } from '../../manager/conditions.ts';

export const TenantReason = {
  ModelsFound: 'ModelsFound',
  ModelNotFound: 'ModelNotFound',
} as const;

export function computeTenantStatus(
  tenant: TenantResource,
  deployments: ReadonlySet<string>,
  now: Date,
): TenantStatus {
  const missing = [...new Set(tenant.spec.models)].filter((m) => !deployments.has(m));
  const generation = tenant.metadata.generation;
  const observed = generation !== undefined ? { observedGeneration: generation } : {};
  const { conditions } = setCondition(
    tenant.status?.conditions,
    missing.length === 0
      ? {
          type: 'Ready',
          status: 'True',
          reason: TenantReason.ModelsFound,
          message: `${tenant.spec.models.length} model(s) found; the gateway's /status lists any key it refused`,
          ...observed,
        }
      : {
          type: 'Ready',
          status: 'False',
          reason: TenantReason.ModelNotFound,
          message: `no Deployment ${missing.join(', ')} in namespace ${tenant.metadata.namespace ?? ''}: spec.models names cacheroute Deployments of the Tenant's namespace`,
          ...observed,
        },
    now,
  );
  return { ...observed, conditions };
}
