// The Task reconciler: the I/O shell around planTaskStep (phase.ts).
//
// One pass: observe (caches, plus GETs of the input ConfigMap and stored
// results), plan, then apply owned result ConfigMaps, write status once and
// emit the step's events. A `generate` step is special:
//   1. with reuse on, take the generation Lease of the fingerprint (create if
//      absent): two identical Tasks planned from the same stale cache cannot
//      both pass; the loser writes nothing and comes back to wait and reuse;
//   2. write the Running status (it records the attempt as started) — only
//      then call the provider, so a crash mid-call is seen as a lost outcome
//      (UsageUnknown), never as a second paid call;
//   3. plan again with the outcome and write that, re-reading the Task on a
//      conflict: an outcome in memory is never dropped for a stale version.
// The OpenRouter API key is read from the Secret the Task names right before
// the call; it goes to the provider only (never to status, events or logs).
import { validateResource, type TaskResource } from '#api';
import { runGeneration, type ProviderDeps } from './providers/index.ts';
import { buildRuntimeKeyLookup } from '#api/runtime-key.ts';
import { applyOwned } from '../../manager/apply.ts';
import { isAlreadyExists, isConflict, type KubeClient } from '#kube/client.ts';
import type { ControllerDefinition, Manager } from '../../manager/manager.ts';
import { keyOf, type DataObject, type KubeObject, type ObjectKey } from '#kube/objects.ts';
import { TerminalError, type ReconcileContext, type ReconcileResult } from '../../manager/reconcile.ts';
import { apiVersionOf, Resources, type ResourceType } from '#kube/resources.ts';
import { writeStatusIfChanged } from '../../manager/status.ts';
import { formatMicroTime } from '#kube/time.ts';
import { computeDeploymentSalt, findAcceptingPolicy } from '#api/cache-binding.ts';
import type { CachePolicyResource, DeploymentResource } from '#api';
import type { GenerateCall } from './attempt/call.ts';
import { planTaskStep, type TaskObservations, type TaskStep } from './phase.ts';
import { TaskReason } from './attempt/reasons.ts';
import { computeTaskTarget } from './attempt/target.ts';
import type { AttemptOutcome } from './attempt/types.ts';
import { computeReservation, computeSettlement, type DailyCap } from './daily-cap.ts';
import { DailyCapLedger } from './daily-cap-store.ts';
import { registerTaskMetrics } from './metrics.ts';

export const DEFAULT_OPENROUTER_BASE_URL = 'https://openrouter.ai/api/v1';
/** A loser of the generation Lease looks again after this (the winner's status change also wakes it). */
export const LEASE_RETRY_MS = 1_000;
/** Safety net behind `requeue {afterMs: 0}`: the status write's own watch event normally comes first. */
const REQUEUE_NOW_MS = 1_000;
const LABEL_FINGERPRINT = 'cacheroute.dev/task-fingerprint';
const TERMINAL = new Set(['Succeeded', 'Reused', 'Failed']);

export interface TaskControllerOptions {
  manager: Manager;
  client: KubeClient;
  /** The operator's --openrouter-base-url where paid calls are allowed; unset: OpenRouter tasks fail TargetNotRoutable. */
  openrouterBaseUrl?: string | undefined;
  /** Each namespace's daily cap on paid calls (--paid-calls-daily-cap); unset: none. */
  dailyCap?: DailyCap | undefined;
  /** Bound of one provider call. */
  providerTimeoutMs?: number;
  /** Workers; each may wait on one generation. */
  concurrency?: number;
}

type TaskObject = KubeObject & TaskResource;
type DeploymentObject = KubeObject & DeploymentResource;
type PolicyObject = KubeObject & CachePolicyResource;
export type LeaseObject = KubeObject & {
  spec?: { holderIdentity?: string; acquireTime?: string; renewTime?: string };
};

/** `task-<first 40 hex of the fingerprint>`: one generation lease per approved snapshot. */
export function buildLeaseName(fingerprint: string): string {
  return `task-${fingerprint.replace(/^sha256:/, '').slice(0, 40)}`;
}

export function buildLease(task: TaskResource, fingerprint: string, now: Date): LeaseObject {
  const name = task.metadata.name ?? '';
  const at = formatMicroTime(now.getTime());
  return {
    apiVersion: apiVersionOf(Resources.leases),
    kind: 'Lease',
    metadata: {
      name: buildLeaseName(fingerprint),
      namespace: task.metadata.namespace ?? '',
      labels: { [LABEL_FINGERPRINT]: buildLeaseName(fingerprint).slice('task-'.length) },
      // Not a controller reference: the Lease goes with its holder (garbage collection).
      ownerReferences: [{ apiVersion: task.apiVersion, kind: 'Task', name, uid: task.metadata.uid ?? '' }],
    },
    spec: { holderIdentity: name, acquireTime: at, renewTime: at },
  };
}

export type LeaseClaim = 'create' | 'held' | 'takeover' | 'busy';

/**
 * Whether this task may generate under the fingerprint's Lease. The Lease is
 * never released while its holder is live: a holder that is gone (or
 * recreated under its name) or finished may be taken over — a finished
 * Succeeded holder that this task did not reuse was not reusable for it.
 */
export function planLeaseClaim(
  lease: LeaseObject | undefined,
  me: { name: string; uid: string },
  holder: { uid?: string | undefined; phase?: string | undefined } | undefined,
): LeaseClaim {
  if (!lease) return 'create';
  const holderUid = lease.metadata?.ownerReferences?.find((r) => r.kind === 'Task')?.uid;
  if (lease.spec?.holderIdentity === me.name && holderUid === me.uid) return 'held';
  if (!holder || holder.uid !== holderUid) return 'takeover';
  if (holder.phase !== undefined && TERMINAL.has(holder.phase)) return 'takeover';
  return 'busy';
}

/** Other Tasks of the namespace with this one's fingerprint: waiters wake when their source moves. */
export function mapSameFingerprint(obj: KubeObject, all: readonly KubeObject[]): ObjectKey[] {
  const fp = fingerprintOf(obj);
  if (!fp) return [];
  return all
    .filter(
      (t) =>
        t.metadata?.namespace === obj.metadata?.namespace &&
        t.metadata?.name !== obj.metadata?.name &&
        fingerprintOf(t) === fp,
    )
    .map(keyOf);
}

function fingerprintOf(obj: KubeObject): string | undefined {
  const status = obj['status'] as { fingerprint?: unknown } | undefined;
  return typeof status?.fingerprint === 'string' ? status.fingerprint : undefined;
}

function parseTask(obj: KubeObject): TaskResource | undefined {
  const r = validateResource(obj);
  return r.ok && r.value.kind === 'Task' ? r.value : undefined;
}

function parseAll<T>(objs: readonly KubeObject[], kind: string): T[] {
  return objs.flatMap((o) => {
    const r = validateResource(o);
    return r.ok && r.value.kind === kind ? [r.value as T] : [];
  });
}

function requeueOf(step: TaskStep): ReconcileResult {
  const r = step.actions.find((a) => a.type === 'requeue');
  if (r?.type !== 'requeue') return;
  return { requeueAfterMs: r.afterMs > 0 ? r.afterMs : REQUEUE_NOW_MS };
}

function missingSecret(ref: { name: string; key: string }): AttemptOutcome {
  return {
    ok: false,
    error: {
      reason: TaskReason.ProviderError,
      code: 'SecretMissing',
      message: `Secret ${ref.name} key ${ref.key} not found; nothing was sent`,
    },
  };
}

export function buildTaskController(opts: TaskControllerOptions): ControllerDefinition {
  const { manager, client } = opts;
  const tasks = manager.informer<TaskObject>(Resources.tasks);
  registerTaskMetrics(manager.metrics.registry, { list: () => tasks.list() });
  const deployments = manager.informer<DeploymentObject>(Resources.sglangDeployments);
  const policies = manager.informer<PolicyObject>(Resources.cachePolicies);
  const configMaps = manager.informer<DataObject>(Resources.configMaps);
  // The SGLang runtimes' API keys, from the Deployments' key Secrets (the only Secrets cached;
  // a Task's OpenRouter key is read by name, below, never cached).
  const runtimeKey = buildRuntimeKeyLookup(manager.informer<DataObject>(Resources.secrets));
  const ledger = opts.dailyCap ? new DailyCapLedger(client, opts.dailyCap) : undefined;

  async function readKey(
    rt: ResourceType,
    namespace: string,
    ref: { name: string; key: string },
  ): Promise<string | undefined> {
    const obj = await client.get<DataObject>(rt, namespace, ref.name);
    const value = obj?.data?.[ref.key];
    if (value === undefined || rt !== Resources.secrets) return value;
    return Buffer.from(value, 'base64').toString('utf8');
  }

  async function observe(task: TaskResource): Promise<TaskObservations> {
    const ns = task.metadata.namespace ?? '';
    const ref = task.spec.target.deployment;
    const raw = ref ? deployments.get(ns, ref.name) : undefined;
    const deployment = raw ? parseAll<DeploymentResource>([raw], 'Deployment')[0] : undefined;
    const cacheSalt = deployment
      ? computeDeploymentSalt(
          deployment,
          findAcceptingPolicy(
            deployment,
            parseAll<CachePolicyResource>(policies.list({ namespace: ns }), 'CachePolicy'),
          ),
        )
      : undefined;
    const target = computeTaskTarget(task.spec, {
      deployment,
      cacheSalt,
      openrouterBaseUrl: opts.openrouterBaseUrl,
    });
    if (TERMINAL.has(task.status?.phase ?? 'Pending')) return { target };
    const input = task.spec.input.configMapRef;
    const inputText = input ? await readKey(Resources.configMaps, ns, input) : undefined;
    // planReuse looks only at Tasks with the fingerprint this task has already published.
    const fp = task.status?.fingerprint;
    const same = fp ? tasks.list({ namespace: ns }).filter((t) => fingerprintOf(t) === fp) : [];
    return { target, inputText, candidates: parseAll<TaskResource>(same, 'Task') };
  }

  /** planTaskStep, answering its result reads first (they come before any write). */
  async function plan(task: TaskResource, obs: TaskObservations, now: Date): Promise<TaskStep> {
    const ns = task.metadata.namespace ?? '';
    let seen = obs;
    for (let i = 0; i < 3; i++) {
      const step = planTaskStep(task, seen, now);
      const read = step.actions.find((a) => a.type === 'readSourceResult' || a.type === 'readResult');
      if (!read || (read.type !== 'readSourceResult' && read.type !== 'readResult')) return step;
      // '' for a missing key: the sha256 check then refuses it, as it refuses an altered text.
      const text = (await readKey(Resources.configMaps, ns, read.configMapRef)) ?? '';
      seen =
        read.type === 'readSourceResult'
          ? { ...seen, sourceResultText: text }
          : { ...seen, resultText: text };
    }
    throw new Error('result reads did not settle in three plans');
  }

  /** Owned ConfigMaps, then the status (one write), then the events. Returns the written object. */
  async function commit(obj: TaskObject, step: TaskStep): Promise<TaskObject> {
    const uid = obj.metadata?.uid ?? '';
    for (const a of step.actions) {
      if (a.type !== 'applyConfigMap') continue;
      const cm = a.configMap;
      const r = await applyOwned(client, Resources.configMaps, cm, {
        live: configMaps.get(cm.metadata?.namespace ?? '', cm.metadata?.name ?? '') ?? null,
        ownerUid: uid,
      });
      if (!r.ok) {
        manager.events.event(obj, 'Warning', 'AdoptionRefused', r.error.message);
        throw new TerminalError(r.error.message);
      }
    }
    const { written, object } = await writeStatusIfChanged(client, Resources.tasks, obj, step.status);
    if (written) for (const e of step.events) manager.events.event(obj, e.type, e.reason, e.message);
    return object;
  }

  /** The Lease of the fingerprint as it is, and what this task may do with it. */
  async function observeLease(task: TaskResource, name: string) {
    const ns = task.metadata.namespace ?? '';
    const live = await client.get<LeaseObject>(Resources.leases, ns, name);
    const holder = live?.spec?.holderIdentity ? tasks.get(ns, live.spec.holderIdentity) : undefined;
    const claim = planLeaseClaim(
      live,
      { name: task.metadata.name ?? '', uid: task.metadata.uid ?? '' },
      holder && { uid: holder.metadata?.uid, phase: holder.status?.phase },
    );
    return { live, claim };
  }

  async function claimLease(task: TaskResource, fingerprint: string, now: Date): Promise<boolean> {
    const desired = buildLease(task, fingerprint, now);
    const { live, claim } = await observeLease(task, desired.metadata?.name ?? '');
    if (claim === 'held' || claim === 'busy') return claim === 'held';
    try {
      if (claim === 'create') await client.create(Resources.leases, desired);
      else {
        // The resourceVersion makes concurrent takeovers race on the server: one wins.
        const resourceVersion = live?.metadata?.resourceVersion ?? '';
        await client.replace(Resources.leases, {
          ...desired,
          metadata: { ...desired.metadata, resourceVersion },
        });
      }
      return true;
    } catch (err) {
      if (isAlreadyExists(err) || isConflict(err)) return false;
      throw err;
    }
  }

  function providerDeps(
    apiKey: string | undefined,
    runtimeApiKey: string | undefined,
    ctx: ReconcileContext,
  ): ProviderDeps {
    const timeout = opts.providerTimeoutMs === undefined ? {} : { timeoutMs: opts.providerTimeoutMs };
    const deps: ProviderDeps = { sglang: { ...timeout, signal: ctx.signal, apiKey: runtimeApiKey } };
    if (opts.openrouterBaseUrl)
      deps.openrouter = { ...timeout, baseUrl: opts.openrouterBaseUrl, signal: ctx.signal };
    if (apiKey !== undefined) deps.apiKey = apiKey;
    return deps;
  }

  /** Plans with the outcome and writes it; a conflict re-reads the Task rather than drop the outcome. */
  async function recordOutcome(
    written: TaskObject,
    obs: TaskObservations,
    outcome: AttemptOutcome,
    ctx: ReconcileContext,
  ): Promise<ReconcileResult> {
    let current: TaskObject | undefined = written;
    for (let i = 0; ; i++) {
      const task = current && parseTask(current);
      if (!current || !task) return;
      const step = planTaskStep(task, { ...obs, outcome }, ctx.now());
      try {
        await commit(current, step);
        return requeueOf(step);
      } catch (err) {
        if (!isConflict(err) || i >= 4) throw err;
        current = await client.get<TaskObject>(
          Resources.tasks,
          keyOf(written).namespace,
          keyOf(written).name,
        );
      }
    }
  }

  async function generate(
    obj: TaskObject,
    task: TaskResource,
    obs: TaskObservations,
    step: TaskStep,
    call: GenerateCall,
    ctx: ReconcileContext,
  ): Promise<ReconcileResult> {
    const ns = task.metadata.namespace ?? '';
    const fingerprint = step.status.fingerprint;
    if (task.spec.reuse.enabled && fingerprint && !(await claimLease(task, fingerprint, ctx.now()))) {
      ctx.logger.debug('an identical task holds the generation lease: waiting to reuse it');
      return { requeueAfterMs: LEASE_RETRY_MS };
    }
    const ref = call.apiKeySecretRef;
    const apiKey = ref ? await readKey(Resources.secrets, ns, ref) : undefined;
    // The SGLang runtimes' own key: the one of the fingerprint the target's endpoints run.
    const target = call.target;
    const runtimeApiKey =
      target.provider === 'sglang'
        ? runtimeKey(ns, task.spec.target.deployment?.name ?? '', target.identity.identityFingerprint)
        : undefined;
    const written = await commit(obj, step);
    const outcome =
      ref && apiKey === undefined
        ? missingSecret(ref)
        : await runMetered(
            ns,
            call,
            () => runGeneration(call, providerDeps(apiKey, runtimeApiKey, ctx)),
            ctx,
          );
    return recordOutcome(written, obs, outcome, ctx);
  }

  /** A paid call runs only inside its namespace's daily cap (daily-cap.ts), and its cost is booked after. */
  async function runMetered(
    ns: string,
    call: GenerateCall,
    run: () => Promise<AttemptOutcome>,
    ctx: ReconcileContext,
  ): Promise<AttemptOutcome> {
    const reservation = ledger ? computeReservation(call) : undefined;
    if (!ledger || reservation === undefined) return run();
    const reservedAt = ctx.now();
    const reserved = await ledger.reserve(ns, call.budget, reservation, reservedAt);
    if (!reserved.ok) return reserved;
    let outcome: AttemptOutcome | undefined;
    try {
      outcome = await run();
      return outcome;
    } finally {
      // Without an outcome (the call threw) the reservation stands: the provider may have charged.
      const cost = outcome ? computeSettlement(call, outcome, reservation) : reservation;
      // A failed booking must not lose the outcome: the reservation then stays, the safe direction.
      await ledger.settle(ns, reservedAt, cost - reservation, ctx.now()).catch((e: unknown) => {
        ctx.logger.error('could not book a paid call in the daily-cap ledger; its reservation stays', {
          namespace: ns,
          error: e instanceof Error ? e.message : String(e),
        });
      });
    }
  }

  async function reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult> {
    const obj = tasks.get(key.namespace, key.name);
    if (!obj || obj.metadata?.deletionTimestamp) return; // the result ConfigMap goes with it
    const task = parseTask(obj);
    if (!task) {
      const r = validateResource(obj);
      const message = r.ok ? 'not a Task' : r.issues.map((i) => `${i.path}: ${i.message}`).join('; ');
      manager.events.event(obj, 'Warning', 'InvalidSpec', message);
      throw new TerminalError(message);
    }
    const obs = await observe(task);
    const step = await plan(task, obs, ctx.now());
    const gen = step.actions.find((a) => a.type === 'generate');
    if (gen?.type === 'generate') return generate(obj, task, obs, step, gen.call, ctx);
    await commit(obj, step);
    return requeueOf(step);
  }

  return {
    name: 'task',
    primary: Resources.tasks,
    owns: [Resources.configMaps],
    watches: [
      {
        resource: Resources.tasks,
        map: (t) => mapSameFingerprint(t, tasks.list({ namespace: t.metadata?.namespace ?? '' })),
      },
    ],
    reconciler: { reconcile },
    concurrency: opts.concurrency ?? 8,
  };
}
