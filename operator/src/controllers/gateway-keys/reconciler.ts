// The gateway's keys Secret (--gateway-keys-secret, ADR 0027): one object in
// the gateway's namespace, rebuilt whole from the operator's caches whenever a
// Tenant, a Tenant's key Secret or a runtime key Secret changes, and written
// by server-side apply when its contents differ from what this process last
// wrote. The gateway reads it by name; it needs no grant on any other Secret.
// Every change maps to one key, so a burst of changes is one rebuild.

import { API_KEYS_LABEL } from '#api';
import type { SecretLocation } from '#api/gateway-keys.ts';
import type { KubeClient } from '#kube/client.ts';
import type { KubeObject, ObjectKey } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { FIELD_MANAGER } from '../../manager/apply.ts';
import type { ControllerDefinition, Manager } from '../../manager/manager.ts';
import type { ReconcileContext, ReconcileResult } from '../../manager/reconcile.ts';
import { buildGatewayKeys, buildGatewayKeysSecret } from './build.ts';

/** How often an unchanged Secret is applied again (a deleted or edited one comes back). */
export const REWRITE_AFTER_MS = 5 * 60_000;

/** The one key every change queues: cluster-scoped in form (see below). */
export function gatewayKeysKey(secret: SecretLocation): ObjectKey {
  return { namespace: '', name: `${secret.namespace}/${secret.name}` };
}

export function buildGatewayKeysController(opts: {
  manager: Manager;
  client: KubeClient;
  secret: SecretLocation;
}): ControllerDefinition {
  const { manager, client, secret } = opts;
  const tenants = manager.informer(Resources.tenants);
  const apiKeySecrets = manager.informer(Resources.secrets, `${API_KEYS_LABEL}=true`);
  // The operator's cache of Secrets holds only the runtime key Secrets (operator.ts).
  const runtimeKeySecrets = manager.informer(Resources.secrets);
  // Cluster-scoped in form: queued whatever namespaces the operator watches; the Secret's
  // own namespace is the gateway's, usually not one of them.
  const key = gatewayKeysKey(secret);
  let written: { data: string; atMs: number } | undefined;

  async function reconcile(_key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    const keys = buildGatewayKeys({
      tenants: tenants.list(),
      apiKeySecrets: apiKeySecrets.list(),
      runtimeKeySecrets: runtimeKeySecrets.list(),
    });
    const desired = buildGatewayKeysSecret(secret, keys);
    const data = JSON.stringify(desired.data);
    const nowMs = ctx.now().getTime();
    // Unchanged since this process wrote it: written again only now and then, which puts back
    // a Secret someone deleted or edited (an apply of the same contents changes nothing).
    if (data === written?.data && nowMs - written.atMs < REWRITE_AFTER_MS)
      return { requeueAfterMs: REWRITE_AFTER_MS };
    await client.apply(Resources.secrets, desired as unknown as KubeObject, {
      fieldManager: FIELD_MANAGER,
      force: true,
    });
    if (data !== written?.data)
      ctx.logger.info('gateway keys Secret written', {
        secret: key.name,
        apiKeySecrets: Object.keys(keys.apiKeyDigests).length,
        deployments: Object.keys(keys.runtimeKeys).length,
      });
    written = { data, atMs: nowMs };
    return { requeueAfterMs: REWRITE_AFTER_MS };
  }

  const toKey = (): ObjectKey[] => [key];
  return {
    name: 'gateway-keys',
    primary: Resources.tenants,
    primaryKey: () => key,
    watches: [
      { resource: Resources.secrets, labelSelector: `${API_KEYS_LABEL}=true`, map: toKey },
      { resource: Resources.secrets, map: toKey },
    ],
    reconciler: { reconcile },
  };
}
