// The InferencePool controller: one pool per Deployment (ADR 0026), kept while the operator runs
// with the chart's endpoint picker (--inference-pool-picker-service) and the cluster serves
// inference.networking.k8s.io/v1. The pool lives in its Deployment's namespace, owned by it (the
// garbage collector deletes it with it), and is re-applied on every change of the Deployment or
// of the CachePolicy that governs it (its inferencePool.failureMode). A pool's endpointPickerRef
// names a Service of its own namespace, so outside the picker's namespace the controller first
// keeps a mirror of the picker Service there (picker-mirror.ts, ADR 0047), copied again whenever
// the picker's endpoints change. Where the API is missing the Deployment gets a Warning Event and
// no pool, and is asked again every minute, so installing the CRD later needs no restart. A
// picker Service that does not exist: the pool is kept, and the Deployment gets a Warning Event
// (PickerServiceMissing) while it is missing. No status is written: the Deployment's conditions
// are the Deployment controller's to write.
import { validateResource, type CachePolicyResource, type DeploymentResource } from '#api';
import { isNotFound, type KubeClient } from '#kube/client.ts';
import type { KubeObject, ObjectKey } from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { applyOwned } from '../../manager/apply.ts';
import type { ControllerDefinition, Manager } from '../../manager/manager.ts';
import type { ReconcileContext, ReconcileResult } from '../../manager/reconcile.ts';
import { findGoverningPolicy } from '../cachepolicy/targets.ts';
import { INFERENCE_POOL_MISSING, INFERENCE_POOL_MISSING_MESSAGE, inferencePoolApi } from './availability.ts';
import { buildInferencePool, type PickerService } from './desired.ts';
import { buildPickerMirror, isPickerMirror } from './picker-mirror.ts';

const CONTROLLER = 'inferencepool';
const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
/** How soon a Deployment is looked at again while the cluster lacks the API. */
const RECHECK_MISSING_MS = 60_000;

/** A Service of the picker's name exists in the Deployment's namespace and is not the operator's mirror. */
export const PICKER_NAME_TAKEN = 'PickerServiceNameTaken';
/**
 * The pool is kept, but the Service its endpointPickerRef names does not exist: a GIE gateway
 * reports the pool ResolvedRefs False and answers its route 5xx (GIE conformance:
 * InferencePoolInvalidEPPService). The condition is the gateway's to write; this says why.
 */
export const PICKER_SERVICE_MISSING = 'PickerServiceMissing';

type DeploymentObject = KubeObject & DeploymentResource;
type PolicyObject = KubeObject & CachePolicyResource;

export interface InferencePoolControllerOptions {
  manager: Manager;
  client: KubeClient;
  picker: PickerService;
  concurrency?: number;
  /** How soon a Deployment is looked at again while the cluster lacks the API (default 60 s). */
  recheckMissingMs?: number;
}

export function buildInferencePoolController(opts: InferencePoolControllerOptions): ControllerDefinition {
  const { manager, client, picker } = opts;
  const pickerSliceSelector = `${SERVICE_NAME_LABEL}=${picker.name}`;
  const roots = manager.informer<DeploymentObject>(Resources.sglangDeployments);
  const policies = manager.informer<PolicyObject>(Resources.cachePolicies);
  // The picker Service and its EndpointSlices, in the picker's namespace only (a Role there).
  const pickerServices = manager.informer(Resources.services, undefined, picker.namespace);
  const pickerSlices = manager.informer(Resources.endpointSlices, pickerSliceSelector, picker.namespace);
  // Where the mirrors go: the Deployments' namespaces (the operator's own Services informer).
  const services = manager.informer(Resources.services);
  const api = inferencePoolApi(client);

  function failureModeOf(root: DeploymentResource) {
    const parsed = policies.list({ namespace: root.metadata.namespace ?? '' }).flatMap((o) => {
      const r = validateResource(o);
      return r.ok && r.value.kind === 'CachePolicy' ? [r.value] : [];
    });
    return (
      findGoverningPolicy(root.metadata.name ?? '', parsed)?.spec.inferencePool.failureMode ?? 'FailClose'
    );
  }

  /**
   * The picker Service's mirror in `namespace` (picker-mirror.ts): false, with a Warning Event,
   * when a Service of that name there is someone else's.
   */
  async function applyMirror(obj: DeploymentObject, namespace: string, pickerService: KubeObject) {
    const live = services.get(namespace, picker.name);
    if (live && !isPickerMirror(live)) {
      manager.events.event(
        obj,
        'Warning',
        PICKER_NAME_TAKEN,
        `no InferencePool: its endpointPickerRef names Service ${picker.name} in ${namespace}, where the operator ` +
          `would mirror the picker Service ${picker.namespace}/${picker.name}, but a Service of that name is ` +
          "already there and not the operator's; rename or delete it, or run this Deployment elsewhere",
      );
      return false;
    }
    const deployments = roots.list({ namespace }).flatMap((d) => {
      const r = validateResource(d);
      return r.ok && r.value.kind === 'Deployment' && !d.metadata?.deletionTimestamp ? [r.value] : [];
    });
    const mirror = buildPickerMirror(
      {
        namespace: picker.namespace,
        name: picker.name,
        service: pickerService,
        slices: pickerSlices.list({ namespace: picker.namespace }),
      },
      namespace,
      deployments,
    );
    if (!mirror) return true;
    const applied = await applyOwned(client, Resources.services, mirror.service, { live: live ?? null });
    if (!applied.ok) return false;
    const slice = await applyOwned(
      client,
      Resources.endpointSlices,
      mirror.slice(applied.object.metadata?.uid ?? ''),
    );
    if (!slice.ok) manager.events.event(obj, 'Warning', 'AdoptionRefused', slice.error.message);
    return slice.ok;
  }

  async function reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    const obj = roots.get(key.namespace, key.name);
    // Gone or going: the garbage collector deletes the pool with its owner.
    if (!obj || obj.metadata?.deletionTimestamp) return;
    const parsed = validateResource(obj);
    // An invalid spec is the Deployment controller's to report.
    if (!parsed.ok || parsed.value.kind !== 'Deployment') return;
    const root = parsed.value;
    if (!(await api.available(key.namespace))) {
      manager.events.event(obj, 'Warning', INFERENCE_POOL_MISSING, INFERENCE_POOL_MISSING_MESSAGE);
      ctx.logger.info('InferencePool API not served: asked again later', { deployment: key.name });
      return { requeueAfterMs: opts.recheckMissingMs ?? RECHECK_MISSING_MS };
    }
    const pickerService = pickerServices.get(picker.namespace, picker.name);
    if (!pickerService)
      manager.events.event(
        obj,
        'Warning',
        PICKER_SERVICE_MISSING,
        `the InferencePool's endpointPickerRef names Service ${picker.namespace}/${picker.name}, which does ` +
          'not exist: a gateway reports the pool ResolvedRefs False and fails its requests; install the chart ' +
          'with gateway.mode picker or both, or give the operator the right --inference-pool-picker-service',
      );
    else if (key.namespace !== picker.namespace && !(await applyMirror(obj, key.namespace, pickerService)))
      return;
    const desired = buildInferencePool(root, picker, failureModeOf(root));
    try {
      const result = await applyOwned(client, Resources.inferencePools, desired, {
        ownerUid: obj.metadata?.uid ?? '',
      });
      if (!result.ok) {
        manager.events.event(obj, 'Warning', 'AdoptionRefused', result.error.message);
        return;
      }
    } catch (err) {
      if (!isNotFound(err)) throw err;
      // The CRD went away since it was seen: the retry looks again, and reports it.
      api.forget();
      throw err;
    }
  }

  function everyDeployment(): ObjectKey[] {
    return roots
      .list()
      .map((d) => ({ namespace: d.metadata?.namespace ?? '', name: d.metadata?.name ?? '' }));
  }

  function onePerOtherNamespace(): ObjectKey[] {
    const first = new Map<string, string>();
    for (const { namespace, name } of everyDeployment()) {
      const seen = first.get(namespace);
      if (namespace !== picker.namespace && (seen === undefined || name < seen)) first.set(namespace, name);
    }
    return [...first].map(([namespace, name]) => ({ namespace, name }));
  }

  return {
    name: CONTROLLER,
    primary: Resources.sglangDeployments,
    watches: [
      {
        // The picker Service coming or going: every pool names it (or its mirror).
        resource: Resources.services,
        namespace: picker.namespace,
        map: (svc) => (svc.metadata?.name === picker.name ? everyDeployment() : []),
      },
      {
        // The picker's endpoints changing: each namespace's mirror copies them again (one
        // Deployment a namespace does it for all of that namespace).
        resource: Resources.endpointSlices,
        labelSelector: pickerSliceSelector,
        namespace: picker.namespace,
        map: () => onePerOtherNamespace(),
      },
      {
        // A mirror edited or deleted by hand is put back.
        resource: Resources.services,
        map: (svc) =>
          svc.metadata?.name === picker.name && svc.metadata.namespace !== picker.namespace
            ? onePerOtherNamespace().filter((k) => k.namespace === svc.metadata?.namespace)
            : [],
      },
      {
        // A policy's failureMode is its targets' pools'; one coming or going changes who governs.
        resource: Resources.cachePolicies,
        map: (p) =>
          ((p as PolicyObject).spec?.targetRefs ?? []).map((r) => ({
            namespace: p.metadata?.namespace ?? '',
            name: r.name,
          })),
      },
    ],
    reconciler: { reconcile },
    ...(opts.concurrency ? { concurrency: opts.concurrency } : {}),
  };
}
