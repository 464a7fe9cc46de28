// Server-side apply of owned objects with one field manager. A reconcile with nothing to
// change makes no write: the live object (from the informer cache, or one GET) is
// checked against our intent first; when that check is unsure, a dry-run apply (not a
// write) settles it; only a real difference is applied, with force for fields we own.
import { compareAppliedIntent, isSameObject, planAdoption } from './apply-plan.ts';
import { ApiError } from '#kube/client.ts';
import type { KubeClient } from '#kube/client.ts';
import type { Logger } from '#kube/logger.ts';
import { noopLogger } from '#kube/logger.ts';
import { controllerOf, keyOf } from '#kube/objects.ts';
import type { KubeObject, OwnerReference } from '#kube/objects.ts';
import { resourceLabel } from '#kube/resources.ts';
import type { ResourceType } from '#kube/resources.ts';

export const FIELD_MANAGER = 'cacheroute-operator';

export const ApplyAction = { unchanged: 'unchanged', created: 'created', updated: 'updated' } as const;
export type ApplyAction = (typeof ApplyAction)[keyof typeof ApplyAction];

export interface AdoptionRefused {
  code: 'AdoptionRefused';
  resource: string;
  namespace: string;
  name: string;
  controller: Pick<OwnerReference, 'apiVersion' | 'kind' | 'name' | 'uid'>;
  message: string;
}

export type ApplyResult<T extends KubeObject> =
  { ok: true; action: ApplyAction; object: T; dryRun: boolean } | { ok: false; error: AdoptionRefused };

export interface ApplyOwnedOptions<T extends KubeObject> {
  // The live object: from the cache, or null when the cache knows it is absent.
  // Omitted: one GET reads it.
  live?: T | null;
  // uid of our owner, to refuse objects controlled by someone else. Defaults to the
  // uid of desired's controller owner reference.
  ownerUid?: string;
  fieldManager?: string;
  logger?: Logger;
}

export async function applyOwned<T extends KubeObject>(
  client: KubeClient,
  rt: ResourceType,
  desired: T,
  opts: ApplyOwnedOptions<T> = {},
): Promise<ApplyResult<T>> {
  const fieldManager = opts.fieldManager ?? FIELD_MANAGER;
  const log = opts.logger ?? noopLogger;
  const { namespace, name } = keyOf(desired);
  const live = await readLive(client, rt, desired, opts.live);
  const ownerUid = opts.ownerUid ?? controllerOf(desired)?.uid;
  const adoption = planAdoption(live, ownerUid);
  if (!adoption.ok) return refused(rt, namespace, name, adoption.controller);

  if (live) {
    const check = compareAppliedIntent(desired, live, fieldManager);
    if (check.same) return { ok: true, action: ApplyAction.unchanged, object: live, dryRun: false };
    // Unsure (or different): let the server compute the result without persisting it.
    const preview = await client.apply(rt, desired, { fieldManager, force: true, dryRun: true });
    if (isSameObject(preview, live)) {
      log.debug('apply would not change the object', {
        resource: resourceLabel(rt),
        name,
        reason: check.reason,
      });
      return { ok: true, action: ApplyAction.unchanged, object: live, dryRun: true };
    }
    log.debug('applying', { resource: resourceLabel(rt), namespace, name, reason: check.reason });
  }
  try {
    const object = await client.apply(rt, desired, { fieldManager, force: true });
    return { ok: true, action: live ? ApplyAction.updated : ApplyAction.created, object, dryRun: false };
  } catch (err) {
    // The cache missed a foreign controller: the server rejects a second one.
    if (
      err instanceof ApiError &&
      err.code === 422 &&
      /Only one reference can have Controller/i.test(err.message)
    ) {
      const current = await client.get<T>(rt, namespace || undefined, name);
      const again = planAdoption(current, ownerUid);
      if (!again.ok) return refused(rt, namespace, name, again.controller);
    }
    throw err;
  }
}

async function readLive<T extends KubeObject>(
  client: KubeClient,
  rt: ResourceType,
  desired: T,
  cached: T | null | undefined,
): Promise<T | undefined> {
  if (cached !== undefined) return cached ?? undefined;
  const { namespace, name } = keyOf(desired);
  return client.get<T>(rt, namespace || undefined, name);
}

function refused<T extends KubeObject>(
  rt: ResourceType,
  namespace: string,
  name: string,
  controller: AdoptionRefused['controller'],
): ApplyResult<T> {
  const resource = resourceLabel(rt);
  return {
    ok: false,
    error: {
      code: 'AdoptionRefused',
      resource,
      namespace,
      name,
      controller,
      message: `${resource} ${namespace}/${name} is controlled by ${controller.kind} ${controller.name} (uid ${controller.uid}); refusing to adopt it`,
    },
  };
}
