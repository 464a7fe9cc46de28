import { validateResource, type DeploymentResource, type Endpoint } from '../../api/index.ts';
import { applyOwned } from '../../runtime/apply.ts';
import type { KubeClient } from '../../runtime/client.ts';
import type { ControllerDefinition, Manager } from '../../runtime/manager.ts';
import type { KubeObject, ObjectKey } from '../../runtime/objects.ts';
import { TerminalError, type ReconcileContext, type ReconcileResult } from '../../runtime/reconcile.ts';
import { Resources } from '../../runtime/resources.ts';
import { writeStatusIfChanged } from '../../runtime/status.ts';
import { computeDeclaredIdentity } from './args.ts';
import { buildDesired, toKubeObject, type DesiredState } from './desired.ts';
import {
  buildPodView,
  buildVerifiedEndpoint,
  planVerification,
  REVERIFY_AFTER_MS,
  type PodObject,
} from './endpoints.ts';
import { planEvents } from './events.ts';
import { LABEL_DEPLOYMENT } from './labels.ts';
import { computePodTrouble, computeStatus } from './status.ts';
import { readIdentity } from './verify.ts';

export interface DeploymentControllerOptions {
  manager: Manager;
  client: KubeClient;
  /** How long one identity read-back may take. */
  verifyTimeoutMs?: number;
  /** Polling while endpoints are coming up (the runtime's readiness has no watch). */
  pendingRequeueMs?: number;
  concurrency?: number;
}

type DeploymentObject = KubeObject & DeploymentResource;

const POD_SELECTOR = LABEL_DEPLOYMENT;

export function buildDeploymentController(opts: DeploymentControllerOptions): ControllerDefinition {
  const { manager, client } = opts;
  const roots = manager.informer<DeploymentObject>(Resources.sglangDeployments);
  const pods = manager.informer<PodObject>(Resources.pods, POD_SELECTOR);
  const workloads = manager.informer(Resources.deployments);
  const services = manager.informer(Resources.services);
  const verifyTimeoutMs = opts.verifyTimeoutMs ?? 5_000;
  const pendingRequeueMs = opts.pendingRequeueMs ?? 5_000;

  async function applyDesired(root: DeploymentObject, desired: DesiredState): Promise<void> {
    const uid = root.metadata?.uid ?? '';
    const results = await Promise.all([
      ...desired.workloads.map((w) =>
        applyOwned(client, Resources.deployments, toKubeObject(w), {
          live: workloads.get(root.metadata?.namespace ?? '', w.metadata?.name ?? '') ?? null,
          ownerUid: uid,
        }),
      ),
      ...desired.services.map((s) =>
        applyOwned(client, Resources.services, toKubeObject(s), {
          live: services.get(root.metadata?.namespace ?? '', s.metadata?.name ?? '') ?? null,
          ownerUid: uid,
        }),
      ),
    ]);
    const refused = results.find((r) => !r.ok);
    if (refused && !refused.ok) {
      manager.events.event(root, 'Warning', 'AdoptionRefused', refused.error.message);
      throw new TerminalError(refused.error.message);
    }
  }

  async function observeEndpoints(
    root: DeploymentResource,
    desired: DesiredState,
    ctx: ReconcileContext,
  ): Promise<Endpoint[]> {
    const ns = root.metadata.namespace ?? '';
    const previous = new Map((root.status?.endpoints ?? []).map((e) => [e.pod, e]));
    const bootstrapPort = root.spec.disaggregation?.bootstrapPort;
    const now = ctx.now();
    const views = pods
      .list({ namespace: ns, labels: { [LABEL_DEPLOYMENT]: root.metadata.name ?? '' } })
      .map(buildPodView)
      .filter((v) => v !== undefined && !v.terminating);
    return Promise.all(
      views.map(async (pod) => {
        if (!pod) throw new Error('unreachable');
        const plan = planVerification(pod, previous.get(pod.name), {
          fingerprint: desired.fingerprint,
          bootstrapPort,
          nowMs: now.getTime(),
        });
        if (plan.action !== 'fetch') return plan.endpoint;
        const engine = desired.engines.find((e) => e.role === pod.role);
        if (!engine)
          return buildVerifiedEndpoint(
            pod,
            bootstrapPort,
            { ok: false, error: `role ${pod.role} is not in the spec` },
            now,
          );
        const declared = computeDeclaredIdentity(root.spec, engine);
        const readback = await readIdentity(`http://${pod.ip ?? ''}:30000`, declared, {
          timeoutMs: verifyTimeoutMs,
          signal: ctx.signal,
        });
        return buildVerifiedEndpoint(pod, bootstrapPort, readback, ctx.now());
      }),
    );
  }

  async function reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    const obj = roots.get(key.namespace, key.name);
    if (!obj || obj.metadata?.deletionTimestamp) return; // owned objects go with it (owner references)
    const parsed = validateResource(obj);
    if (!parsed.ok || parsed.value.kind !== 'Deployment') {
      const message = parsed.ok
        ? 'not a Deployment'
        : parsed.issues.map((i) => `${i.path}: ${i.message}`).join('; ');
      manager.events.event(obj, 'Warning', 'InvalidSpec', message);
      throw new TerminalError(message);
    }
    const root = parsed.value;
    const desired = buildDesired(root);
    const accepted = root.status?.identity;
    const identityConflict =
      accepted &&
      accepted.deploymentId === root.spec.deploymentId &&
      accepted.fingerprint !== desired.fingerprint
        ? { accepted: accepted.fingerprint, refused: desired.fingerprint }
        : undefined;
    // A changed identity under the same deploymentId is refused: nothing is applied.
    if (!identityConflict) await applyDesired(obj, desired);

    const endpoints = await observeEndpoints(root, desired, ctx);
    const ns = root.metadata.namespace ?? '';
    const podObjects = pods.list({ namespace: ns, labels: { [LABEL_DEPLOYMENT]: root.metadata.name ?? '' } });
    const troubles = podObjects.map(computePodTrouble).filter((t) => t !== undefined);
    const next = computeStatus(
      {
        root,
        engines: desired.engines,
        fingerprint: desired.fingerprint,
        identityConflict,
        endpoints,
        troubles,
        podCount: podObjects.filter((p) => !p.metadata?.deletionTimestamp).length,
      },
      ctx.now(),
    );
    const { written } = await writeStatusIfChanged(client, Resources.sglangDeployments, obj, next);
    if (written)
      for (const e of planEvents(root.status, next)) manager.events.event(obj, e.type, e.reason, e.message);

    const pending =
      endpoints.some((e) => !e.verified) ||
      endpoints.length < desired.engines.reduce((n, e) => n + e.replicas, 0);
    return { requeueAfterMs: pending ? pendingRequeueMs : REVERIFY_AFTER_MS };
  }

  return {
    name: 'deployment',
    primary: Resources.sglangDeployments,
    owns: [Resources.deployments, Resources.services],
    watches: [
      {
        resource: Resources.pods,
        labelSelector: POD_SELECTOR,
        map: (pod) => {
          const name = pod.metadata?.labels?.[LABEL_DEPLOYMENT];
          return name ? [{ namespace: pod.metadata?.namespace ?? '', name }] : [];
        },
      },
    ],
    reconciler: { reconcile },
    concurrency: opts.concurrency ?? 4,
  };
}
