// The InferencePool controller: one pool per Deployment (ADR 0026), kept while the operator runs
// with the chart's endpoint picker (--inference-pool-picker-service) and the cluster serves
// inference.networking.k8s.io/v1. The pool is owned by its Deployment (the garbage collector
// deletes it with it) and re-applied on every change of the Deployment or of the CachePolicy
// that governs it (its inferencePool.failureMode). Where the API is missing, or the picker's
// Service is in another namespace (a pool's endpointPickerRef names a Service in its own), the
// Deployment gets a Warning Event and no pool; the missing API is asked again every minute, so
// installing the CRD later needs no restart. A picker Service that does not exist: the pool is
// kept, and the Deployment gets a Warning Event (PickerServiceMissing) while it is missing. No status is written: the Deployment's conditions
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

const CONTROLLER = 'inferencepool';
/** How soon a Deployment is looked at again while the cluster lacks the API. */
const RECHECK_MISSING_MS = 60_000;

export const PICKER_IN_OTHER_NAMESPACE = 'PickerInOtherNamespace';
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
  const roots = manager.informer<DeploymentObject>(Resources.sglangDeployments);
  const policies = manager.informer<PolicyObject>(Resources.cachePolicies);
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

  async function reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    const obj = roots.get(key.namespace, key.name);
    // Gone or going: the garbage collector deletes the pool with its owner.
    if (!obj || obj.metadata?.deletionTimestamp) return;
    const parsed = validateResource(obj);
    // An invalid spec is the Deployment controller's to report.
    if (!parsed.ok || parsed.value.kind !== 'Deployment') return;
    const root = parsed.value;
    if (key.namespace !== picker.namespace) {
      manager.events.event(
        obj,
        'Warning',
        PICKER_IN_OTHER_NAMESPACE,
        `no InferencePool: its endpointPickerRef can name only a Service in ${key.namespace}, and the picker ` +
          `Service ${picker.name} is in ${picker.namespace}; run this Deployment in ${picker.namespace}, or route ` +
          'to it through the standalone gateway',
      );
      return;
    }
    if (!(await api.available(key.namespace))) {
      manager.events.event(obj, 'Warning', INFERENCE_POOL_MISSING, INFERENCE_POOL_MISSING_MESSAGE);
      ctx.logger.info('InferencePool API not served: asked again later', { deployment: key.name });
      return { requeueAfterMs: opts.recheckMissingMs ?? RECHECK_MISSING_MS };
    }
    if (!services.get(picker.namespace, picker.name))
      manager.events.event(
        obj,
        'Warning',
        PICKER_SERVICE_MISSING,
        `the InferencePool's endpointPickerRef names Service ${picker.namespace}/${picker.name}, which does ` +
          'not exist: a gateway reports the pool ResolvedRefs False and fails its requests; install the chart ' +
          'with gateway.mode picker or both, or give the operator the right --inference-pool-picker-service',
      );
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

  return {
    name: CONTROLLER,
    primary: Resources.sglangDeployments,
    watches: [
      {
        // The picker Service coming or going: every pool of its namespace names it.
        resource: Resources.services,
        map: (svc) =>
          svc.metadata?.namespace === picker.namespace && svc.metadata.name === picker.name
            ? roots.list({ namespace: picker.namespace }).map((d) => ({
                namespace: picker.namespace,
                name: d.metadata?.name ?? '',
              }))
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
