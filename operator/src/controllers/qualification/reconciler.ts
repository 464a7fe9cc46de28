// The Qualification reconciler: the I/O shell around planQualificationStep
// (plan.ts). One pass: observe (the arms' Deployments from the cache, the
// trace and the record ConfigMap by GET), plan, act, write status once, emit
// the step's events. A `runSample` step:
//   1. writes the Running status with `current` (the sample is started), so
//      an operator restart mid-sample finds it and records it as Interrupted;
//   2. runs the cold pass, then the identical warm pass, on the arm's endpoint;
//   3. stores the sample's record, then plans again with it and writes that.
// Traffic never goes through the gateway, and no result is ever reused.
import { validateResource, type DeploymentResource, type QualificationResource } from '#api';
import { buildRuntimeKeyLookup } from '#api/runtime-key.ts';
import { API_VERSION } from '#api/resources.ts';
import { isConflict, type KubeClient } from '#kube/client.ts';
import {
  buildOwnedConfigMap,
  keyOf,
  type DataObject,
  type KubeObject,
  type ObjectKey,
} from '#kube/objects.ts';
import { Resources } from '#kube/resources.ts';
import { applyOwned } from '../../manager/apply.ts';
import type { ControllerDefinition, Manager } from '../../manager/manager.ts';
import { TerminalError, type ReconcileContext, type ReconcileResult } from '../../manager/reconcile.ts';
import { writeStatusIfChanged } from '../../manager/status.ts';
import { checkArms } from './arms.ts';
import {
  planQualificationStep,
  type QualificationObservations,
  type QualificationStep,
  type SampleRun,
} from './plan.ts';
import { parseRecords, recordConfigMapName, recordKey, type SampleRecord } from './record.ts';
import { runPass } from './traffic.ts';
import { buildWorkload } from './workload.ts';

export const LABEL_QUALIFICATION = 'cacheroute.dev/qualification';

export interface QualificationControllerOptions {
  manager: Manager;
  client: KubeClient;
  /** Bound of one request. */
  requestTimeoutMs?: number;
  concurrency?: number;
}

type QualificationObject = KubeObject & QualificationResource;
type DeploymentObject = KubeObject & DeploymentResource;

function parseAs<T>(obj: KubeObject | undefined, kind: string): T | undefined {
  if (!obj) return undefined;
  const r = validateResource(obj);
  return r.ok && r.value.kind === kind ? (r.value as T) : undefined;
}

/** Qualifications of the namespace with an arm on this Deployment. */
export function mapArmDeployment(obj: KubeObject, all: readonly KubeObject[]): ObjectKey[] {
  const ns = obj.metadata?.namespace;
  const name = obj.metadata?.name;
  return all
    .filter((q) => q.metadata?.namespace === ns)
    .filter((q) => {
      const arms = (q['spec'] as { arms?: { deployment?: { name?: string } }[] } | undefined)?.arms ?? [];
      return arms.some((a) => a.deployment?.name === name);
    })
    .map(keyOf);
}

export function buildRecordConfigMap(q: QualificationResource, data: Record<string, string>): DataObject {
  const name = q.metadata.name ?? '';
  const owner = { ...q, apiVersion: API_VERSION, kind: 'Qualification' };
  return buildOwnedConfigMap(owner, recordConfigMapName(name), { [LABEL_QUALIFICATION]: name }, data);
}

export function buildQualificationController(opts: QualificationControllerOptions): ControllerDefinition {
  const { manager, client } = opts;
  const quals = manager.informer<QualificationObject>(Resources.qualifications);
  const deployments = manager.informer<DeploymentObject>(Resources.sglangDeployments);
  const runtimeKey = buildRuntimeKeyLookup(manager.informer<DataObject>(Resources.secrets));

  async function readRecords(q: QualificationResource) {
    const cm = await client.get<DataObject>(
      Resources.configMaps,
      q.metadata.namespace ?? '',
      recordConfigMapName(q.metadata.name ?? ''),
    );
    return { live: cm ?? null, ...parseRecords(cm?.data) };
  }

  async function observe(
    q: QualificationResource,
    ctx: ReconcileContext,
  ): Promise<QualificationObservations> {
    const ns = q.metadata.namespace ?? '';
    const [a1, a2] = q.spec.arms;
    const arms = [
      { name: a1?.name ?? '', deployment: a1?.deployment.name ?? '' },
      { name: a2?.name ?? '', deployment: a2?.deployment.name ?? '' },
    ] as const;
    const ds = [
      parseAs<DeploymentResource>(deployments.get(ns, arms[0].deployment), 'Deployment'),
      parseAs<DeploymentResource>(deployments.get(ns, arms[1].deployment), 'Deployment'),
    ] as const;
    const trace = q.spec.workload.trace;
    const traceText = trace
      ? (await client.get<DataObject>(Resources.configMaps, ns, trace.configMapRef.name))?.data?.[
          trace.configMapRef.key
        ]
      : undefined;
    const { records, invalid } = await readRecords(q);
    if (invalid.length > 0)
      ctx.logger.warn('record keys that do not parse are left out', { keys: invalid.join(',') });
    return { arms: checkArms(arms, ds, q.spec.subject), workload: buildWorkload(q.spec, traceText), records };
  }

  async function storeRecord(q: QualificationResource, record: SampleRecord): Promise<void> {
    const { live } = await readRecords(q);
    const desired = buildRecordConfigMap(q, {
      ...(live?.data ?? {}),
      [recordKey(record.slot)]: JSON.stringify(record),
    });
    const r = await applyOwned(client, Resources.configMaps, desired, {
      live,
      ownerUid: q.metadata.uid ?? '',
    });
    if (!r.ok) throw new TerminalError(r.error.message);
  }

  async function commit(obj: QualificationObject, step: QualificationStep): Promise<QualificationObject> {
    const { written, object } = await writeStatusIfChanged(
      client,
      Resources.qualifications,
      obj,
      step.status,
    );
    if (written) for (const e of step.events) manager.events.event(obj, e.type, e.reason, e.message);
    return object;
  }

  async function runSample(
    q: QualificationResource,
    run: SampleRun,
    ctx: ReconcileContext,
  ): Promise<SampleRecord> {
    const ns = q.metadata.namespace ?? '';
    const deployment = q.spec.arms[run.armIndex]?.deployment.name ?? '';
    const options = {
      url: run.view.endpoint.url,
      prefill: run.view.endpoint.prefill,
      salt: run.salt,
      sampling: q.spec.sampling,
      maxNewTokens: q.spec.maxOutputTokens,
      pace: run.pace,
      apiKey: runtimeKey(ns, deployment, run.view.fingerprint),
      timeoutMs: opts.requestTimeoutMs ?? 300_000,
      signal: ctx.signal,
    };
    const startedAt = ctx.now().toISOString();
    const cold = await runPass(run.requests, options);
    const warm = await runPass(run.requests, options);
    return {
      slot: run.slot,
      arm: run.arm,
      sample: run.sample,
      salt: run.salt,
      pod: run.view.endpoint.pod,
      ...(run.view.endpoint.prefill ? { prefillPod: run.view.endpoint.prefill.pod } : {}),
      fingerprint: run.view.fingerprint,
      startedAt,
      finishedAt: ctx.now().toISOString(),
      cold,
      warm,
    };
  }

  async function reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    let obj = quals.get(key.namespace, key.name);
    if (!obj || obj.metadata?.deletionTimestamp) return;
    const parsed = validateResource(obj);
    if (!parsed.ok || parsed.value.kind !== 'Qualification') {
      const message = parsed.ok
        ? 'not a Qualification'
        : parsed.issues.map((i) => `${i.path}: ${i.message}`).join('; ');
      manager.events.event(obj, 'Warning', 'InvalidSpec', message);
      throw new TerminalError(message);
    }
    let q = parsed.value;
    for (let i = 0; i < 4; i++) {
      const step = planQualificationStep(q, await observe(q, ctx), ctx.now());
      const store = step.actions.find((a) => a.type === 'storeRecord');
      if (store?.type === 'storeRecord') {
        await storeRecord(q, store.record);
        continue;
      }
      const run = step.actions.find((a) => a.type === 'runSample');
      if (run?.type !== 'runSample') {
        await commit(obj, step);
        const requeue = step.actions.find((a) => a.type === 'requeue');
        return requeue?.type === 'requeue' ? { requeueAfterMs: requeue.afterMs } : undefined;
      }
      await commit(obj, step);
      const record = await runSample(q, run.run, ctx);
      // Stopping mid-sample: its requests failed for our reason, not the runtime's. Store
      // nothing; the next operator finds the sample open and records it as Interrupted.
      if (ctx.signal.aborted) return;
      await storeRecord(q, record);
      // Plan again with the record; the status write may meet a newer Qualification: re-read it.
      const fresh = await client.get<QualificationObject>(Resources.qualifications, key.namespace, key.name);
      const next = parseAs<QualificationResource>(fresh, 'Qualification');
      if (!fresh || !next) return;
      obj = fresh;
      q = next;
    }
    return { requeueAfterMs: 1 };
  }

  return {
    name: 'qualification',
    primary: Resources.qualifications,
    // The record ConfigMap, read by GET (it is not in the operator's ConfigMap cache, which
    // holds Task results only); declared owned for the owner reference it carries.
    owns: [Resources.configMaps],
    watches: [
      {
        resource: Resources.sglangDeployments,
        map: (d) => mapArmDeployment(d, quals.list({ namespace: d.metadata?.namespace ?? '' })),
      },
    ],
    reconciler: {
      reconcile: async (key, ctx) => {
        try {
          return await reconcile(key, ctx);
        } catch (err) {
          // A conflict is a newer Qualification: the watch brings it back.
          if (isConflict(err)) return { requeueAfterMs: 1_000 };
          throw err;
        }
      },
    },
    concurrency: opts.concurrency ?? 2,
  };
}
