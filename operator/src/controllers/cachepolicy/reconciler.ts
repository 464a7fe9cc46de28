// The CachePolicy reconciler: the I/O shell around planCachePolicyStep (plan.ts).
//
// One pass: observe (informer caches and the warm-up worker's outcomes), plan
// (reading the warm-up documents only when the plan asks for them), write
// status once, emit the step's events, then hand new warm-ups to the worker and
// drop the jobs the plan no longer wants. Nothing here waits for a warm-up: the
// worker runs them in the background and queues the policy again when one
// settles (Manager.enqueue), and that pass records the outcome.
import { validateResource, type CachePolicyResource, type DeploymentResource } from '#api';
import type { KubeClient } from '#kube/client.ts';
import { isNotFound } from '#kube/client.ts';
import type { ControllerDefinition, Manager } from '../../manager/manager.ts';
import type { DataObject, KubeObject, ObjectKey } from '#kube/objects.ts';
import { TerminalError, type ReconcileContext, type ReconcileResult } from '../../manager/reconcile.ts';
import { Resources } from '#kube/resources.ts';
import { writeStatusIfChanged } from '../../manager/status.ts';
import { buildRuntimeKeyLookup } from '#api/runtime-key.ts';
import {
  planCachePolicyStep,
  type CachePolicyObservation,
  type CachePolicyStep,
  type WarmupDocuments,
} from './plan.ts';
import { sendWarmupDocuments } from './warmup-send.ts';
import { countWarmupDocuments, registerWarmupMetrics } from './warmup-metrics.ts';
import { WarmupWorker } from './warmup-worker.ts';

type PolicyObject = KubeObject & CachePolicyResource;
type DeploymentObject = KubeObject & DeploymentResource;

const CONTROLLER = 'cachepolicy';

export interface CachePolicyControllerOptions {
  manager: Manager;
  client: KubeClient;
  /** Bound of one document's warm-up request. */
  warmupTimeoutMs?: number;
  /** Warm-ups running at once, across policies. */
  warmupConcurrency?: number;
}

function parseAll<T>(objs: readonly KubeObject[], kind: string): T[] {
  return objs.flatMap((o) => {
    const r = validateResource(o);
    return r.ok && r.value.kind === kind ? [r.value as T] : [];
  });
}

export function buildCachePolicyController(opts: CachePolicyControllerOptions): ControllerDefinition {
  const { manager, client } = opts;
  const policies = manager.informer<PolicyObject>(Resources.cachePolicies);
  const deployments = manager.informer<DeploymentObject>(Resources.sglangDeployments);
  // The runtimes' API keys, from the Deployments' key Secrets (the only Secrets cached).
  const runtimeKey = buildRuntimeKeyLookup(manager.informer<DataObject>(Resources.secrets));
  const documentsCounter = registerWarmupMetrics(manager.metrics.registry);
  const worker = new WarmupWorker({
    concurrency: opts.warmupConcurrency ?? 4,
    signal: manager.stopSignal,
    onSettled: (key) => manager.enqueue(CONTROLLER, key),
    run: async (target, documents, signal) => {
      const outcome = await sendWarmupDocuments(target, documents, {
        timeoutMs: opts.warmupTimeoutMs ?? 120_000,
        signal,
        // Read at send time: a key rotated while the job waited is the one that works.
        apiKey: runtimeKey(target.namespace, target.deployment, target.fingerprint),
      });
      if (outcome.ok) countWarmupDocuments(documentsCounter, outcome.source, documents.length);
      return outcome;
    },
  });

  async function readDocuments(policy: CachePolicyResource): Promise<WarmupDocuments> {
    const texts: string[] = [];
    for (const ref of policy.spec.warmup?.documents ?? []) {
      let cm: DataObject | undefined;
      try {
        cm = await client.get<DataObject>(Resources.configMaps, policy.metadata.namespace, ref.name);
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      const text = cm?.data?.[ref.key];
      if (text === undefined)
        return {
          ok: false,
          message: `warm-up document ${ref.name}/${ref.key} not found: create the ConfigMap key`,
        };
      texts.push(text);
    }
    return { ok: true, texts };
  }

  function observe(key: ObjectKey): CachePolicyObservation {
    const ns = key.namespace;
    return {
      policies: parseAll<CachePolicyResource>(policies.list({ namespace: ns }), 'CachePolicy'),
      deployments: new Map(
        parseAll<DeploymentResource>(deployments.list({ namespace: ns }), 'Deployment').map((d) => [
          d.metadata.name ?? '',
          d,
        ]),
      ),
      jobs: worker.jobsOf(key),
    };
  }

  /** planCachePolicyStep, answering its document read first (it comes before any write). */
  async function plan(policy: CachePolicyResource, obs: CachePolicyObservation, now: Date) {
    const step = planCachePolicyStep(policy, obs, now);
    if (!step.actions.some((a) => a.type === 'readDocuments')) return step;
    return planCachePolicyStep(policy, { ...obs, documents: await readDocuments(policy) }, now);
  }

  /** Status (one write), the events, then the worker: started jobs, dropped jobs. */
  async function commit(
    key: ObjectKey,
    obj: PolicyObject,
    before: CachePolicyResource,
    step: CachePolicyStep,
  ) {
    const { written } = await writeStatusIfChanged(client, Resources.cachePolicies, obj, step.status);
    const was = before.status?.conditions?.find((c) => c.type === 'Accepted');
    const now = step.status.conditions?.find((c) => c.type === 'Accepted');
    if (written && now && (was?.status !== now.status || was.reason !== now.reason))
      manager.events.event(obj, now.status === 'True' ? 'Normal' : 'Warning', now.reason, now.message);
    if (written) for (const e of step.events) manager.events.event(obj, e.type, e.reason, e.message);
    worker.retain(key, new Set(step.keepJobs));
    for (const a of step.actions) if (a.type === 'startWarmup') worker.start(key, a.target, a.documents);
  }

  async function reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    const obj = policies.get(key.namespace, key.name);
    if (!obj || obj.metadata?.deletionTimestamp) {
      worker.cancel(key);
      return;
    }
    const parsed = validateResource(obj);
    if (!parsed.ok || parsed.value.kind !== 'CachePolicy') {
      const message = parsed.ok
        ? 'not a CachePolicy'
        : parsed.issues.map((i) => `${i.path}: ${i.message}`).join('; ');
      manager.events.event(obj, 'Warning', 'InvalidSpec', message);
      worker.cancel(key);
      throw new TerminalError(message);
    }
    const policy = parsed.value;
    const step = await plan(policy, observe(key), ctx.now());
    await commit(key, obj, policy, step);
    const requeue = step.actions.find((a) => a.type === 'requeue');
    return requeue?.type === 'requeue' ? { requeueAfterMs: requeue.afterMs } : undefined;
  }

  return {
    name: CONTROLLER,
    primary: Resources.cachePolicies,
    watches: [
      {
        // A Deployment appearing, changing identity or gaining endpoints concerns every policy that names it.
        resource: Resources.sglangDeployments,
        map: (d) =>
          policies
            .list({ namespace: d.metadata?.namespace ?? '' })
            .filter((p) => p.spec.targetRefs.some((r) => r.name === d.metadata?.name))
            .map((p) => ({ namespace: p.metadata?.namespace ?? '', name: p.metadata?.name ?? '' })),
      },
      {
        // The oldest policy wins a contested target: a policy coming or going concerns its neighbours.
        resource: Resources.cachePolicies,
        map: (changed) =>
          policies
            .list({ namespace: changed.metadata?.namespace ?? '' })
            .filter((p) => p.metadata?.name !== changed.metadata?.name)
            .map((p) => ({ namespace: p.metadata?.namespace ?? '', name: p.metadata?.name ?? '' })),
      },
    ],
    reconciler: { reconcile },
  };
}
