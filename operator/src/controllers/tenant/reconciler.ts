// Tenants: a Ready condition that says whether every model a Tenant names
// exists (status.ts), and an event when it flips. Reads only informer caches;
// writes only status.

import { validateResource, type TenantResource } from '#api';
import type { KubeClient } from '#kube/client.ts';
import type { ControllerDefinition, Manager } from '../../manager/manager.ts';
import type { KubeObject, ObjectKey } from '#kube/objects.ts';
import { TerminalError, type ReconcileContext, type ReconcileResult } from '../../manager/reconcile.ts';
import { Resources } from '#kube/resources.ts';
import { writeStatusIfChanged } from '../../manager/status.ts';
import { computeTenantStatus } from './status.ts';

type TenantObject = KubeObject & TenantResource;

export function buildTenantController(opts: { manager: Manager; client: KubeClient }): ControllerDefinition {
  const { manager, client } = opts;
  const tenants = manager.informer<TenantObject>(Resources.tenants);
  const deployments = manager.informer(Resources.sglangDeployments);

  async function reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    const obj = tenants.get(key.namespace, key.name);
    if (!obj || obj.metadata?.deletionTimestamp) return;
    const parsed = validateResource(obj);
    if (!parsed.ok || parsed.value.kind !== 'Tenant') {
      const message = parsed.ok
        ? 'not a Tenant'
        : parsed.issues.map((i) => `${i.path}: ${i.message}`).join('; ');
      manager.events.event(obj, 'Warning', 'InvalidSpec', message);
      throw new TerminalError(message);
    }
    const names = new Set(
      deployments
        .list({ namespace: key.namespace })
        .filter((d) => !d.metadata?.deletionTimestamp)
        .map((d) => d.metadata?.name ?? ''),
    );
    const status = computeTenantStatus(parsed.value, names, ctx.now());
    const before = parsed.value.status?.conditions?.find((c) => c.type === 'Ready');
    const { written } = await writeStatusIfChanged(client, Resources.tenants, obj, status);
    const after = status.conditions?.find((c) => c.type === 'Ready');
    if (written && after && (before?.status !== after.status || before.reason !== after.reason))
      manager.events.event(obj, after.status === 'True' ? 'Normal' : 'Warning', after.reason, after.message);
    return undefined;
  }

  return {
    name: 'tenant',
    primary: Resources.tenants,
    watches: [
      {
        // A Deployment coming or going concerns every Tenant of its namespace that names it.
        resource: Resources.sglangDeployments,
        map: (d) =>
          tenants
            .list({ namespace: d.metadata?.namespace ?? '' })
            .filter((t) => t.spec.models.includes(d.metadata?.name ?? ''))
            .map((t) => ({ namespace: t.metadata?.namespace ?? '', name: t.metadata?.name ?? '' })),
      },
    ],
    reconciler: { reconcile },
  };
}
