// The CachePolicy step: planCachePolicyStep(policy, observed, now) → the whole
// next status, the warm-ups to start, the events. Pure; the reconciler
// (reconciler.ts) observes, calls it, writes status once, then starts the
// warm-ups on the worker (warmup-worker.ts), which runs them off the reconcile
// loop and queues the policy again when one settles.
//
// Per accepted target, one status entry per serving prefilling container
// instance (pod + restart count: a restarted container lost its cache and is
// a new instance, warmed again):
//
//   (new) ──documents unreadable / no decode partner──▶ Pending
//     │                                                   │
//     └──start──▶ Warming ──job succeeded──▶ Warmed ◀─────┘ (start when it can)
//                    │
//                    └──job failed──▶ Failed ──backoff over──▶ Warming
//
// `since` is set when the instance is first seen serving and kept: the gateway
// counts spec.warmup.routeAfterSeconds from it. An entry stays while its
// instance is in the Deployment's status (a readiness blip keeps Warmed) and
// goes with it. Level-triggered: a Warming entry with no job in the worker (the
// operator restarted) is started again. Documents are read only when a warm-up
// is to start: the step then asks for them (readDocuments) and is planned again.
import type {
  CachePolicyResource,
  CachePolicyStatus,
  Condition,
  DeploymentResource,
  KnowledgeDelivery,
  WarmupEndpointStatus,
  WarmupSource,
} from '#api';
import { setCondition, type ConditionInput } from '../../manager/conditions.ts';
import { computePolicyStatus, type TargetStatus } from './targets.ts';
import {
  computeLiveInstances,
  computeWarmupCandidates,
  type WarmupCandidate,
  type WarmupTarget,
} from './warmup.ts';

export const WARMED_CONDITION = 'Warmed';

export const WarmupReason = {
  AllEndpointsWarmed: 'AllEndpointsWarmed',
  Warming: 'Warming',
  WarmupFailing: 'WarmupFailing',
  DocumentMissing: 'WarmupDocumentMissing',
  WarmedUp: 'WarmedUp',
  WarmupFailed: 'WarmupFailed',
  DeliveredToL3: 'DeliveredToL3',
  LoadsFromL3: 'LoadsFromL3',
  PrefixVaries: 'WarmupPrefixVaries',
} as const;

/** A missing document is looked for again this often (a ConfigMap change does not wake the policy). */
export const DOCUMENT_RECHECK_MS = 30_000;
const RETRY_BASE_MS = 5_000;
const RETRY_MAX_MS = 5 * 60_000;

/** The worker's view of one instance's warm-up (warmup-worker.ts); times in epoch milliseconds. */
export type WarmupJobState =
  | { state: 'queued' | 'running'; since: number }
  | {
      state: 'succeeded';
      at: number;
      documents: number;
      /** prefill: computed there (a delivery, with L3); storage: not prefilled, it loads from L3. */
      source?: WarmupSource;
      rendered?: string;
      tokens?: number;
      storedTokens?: number;
      /** The chat template's variable parts (render.ts). */
      warnings?: readonly string[];
    }
  | { state: 'failed'; at: number; error: string; failures: number };

export type WarmupDocuments = { ok: true; texts: readonly string[] } | { ok: false; message: string };

export interface CachePolicyObservation {
  /** Every CachePolicy in the namespace, this one included. */
  policies: readonly CachePolicyResource[];
  deployments: ReadonlyMap<string, DeploymentResource>;
  /** The worker's jobs of this policy, by instance key. */
  jobs: ReadonlyMap<string, WarmupJobState>;
  /** The documents, after a `readDocuments` action. */
  documents?: WarmupDocuments;
}

export type CachePolicyAction =
  | { type: 'readDocuments' }
  | { type: 'startWarmup'; target: WarmupTarget; documents: readonly string[] }
  | { type: 'requeue'; afterMs: number };

export interface PolicyEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface CachePolicyStep {
  status: CachePolicyStatus;
  actions: CachePolicyAction[];
  /** Emitted after the status write succeeds. */
  events: PolicyEvent[];
  /** Jobs still wanted; the shell drops the policy's others (cancelling any running) after the write. */
  keepJobs: string[];
}

/** Backoff after the n-th failed attempt: 5 s, 10 s, 20 s, … at most 5 min. */
export function computeRetryDelayMs(failures: number): number {
  return Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** Math.max(0, failures - 1));
}

function stamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

interface Ctx {
  namespace: string;
  now: number;
  documents: WarmupDocuments | undefined;
  jobs: ReadonlyMap<string, WarmupJobState>;
  actions: CachePolicyAction[];
  events: PolicyEvent[];
  keepJobs: string[];
  wakeAt: number[];
  needsDocuments: boolean;
}

/** An L3 tier's documents: one role and identity of one target (ADR 0042). */
const unitOf = (t: { role: string; fingerprint: string }): string => `${t.role}/${t.fingerprint}`;

/** What the target's L3 tiers hold, and who is delivering into one that holds nothing yet. */
interface Delivery {
  /** By unit: the delivery this pass keeps. */
  records: Map<string, KnowledgeDelivery>;
  /** By unit: the pod whose warm-up is delivering now (one at a time). */
  delivering: Map<string, string>;
}

type Base = Pick<WarmupEndpointStatus, 'pod' | 'restartCount' | 'since'>;

function planWarmed(
  ctx: Ctx,
  c: WarmupCandidate,
  base: Base,
  prev: WarmupEndpointStatus | undefined,
  job: WarmupJobState | undefined,
): WarmupEndpointStatus {
  if (job?.state !== 'succeeded') {
    const { attempts: _a, ...kept } = { ...prev, ...base };
    return { ...kept, state: 'Warmed', warmedAt: prev?.warmedAt ?? base.since };
  }
  const source = job.source ? { source: job.source } : {};
  const warnings = job.warnings ?? [];
  if (prev?.state !== 'Warmed') {
    ctx.events.push(
      job.source === 'storage'
        ? {
            type: 'Normal',
            reason: WarmupReason.LoadsFromL3,
            message: `${c.pod} (restart ${c.restartCount}) renders the ${job.documents} document(s) as delivered: it loads them from the L3 tier, no prefill`,
          }
        : {
            type: 'Normal',
            reason: WarmupReason.WarmedUp,
            message: `prefilled ${job.documents} document(s) on ${c.pod} (restart ${c.restartCount})`,
          },
    );
    for (const w of warnings)
      ctx.events.push({ type: 'Warning', reason: WarmupReason.PrefixVaries, message: w });
  }
  const message = warnings.length > 0 ? { message: warnings.join('; ') } : {};
  return { ...base, state: 'Warmed', warmedAt: stamp(job.at), ...source, ...message };
}

function planFailed(
  ctx: Ctx,
  delivery: Delivery,
  c: WarmupCandidate,
  base: Base,
  prev: WarmupEndpointStatus | undefined,
  job: Extract<WarmupJobState, { state: 'failed' }>,
): WarmupEndpointStatus {
  ctx.keepJobs.push(c.key); // its failure count sets the next backoff
  if (job.failures > (prev?.attempts ?? 0))
    ctx.events.push({
      type: 'Warning',
      reason: WarmupReason.WarmupFailed,
      message: `warm-up of ${c.pod} failed (attempt ${job.failures}): ${job.error}`,
    });
  const due = job.at + computeRetryDelayMs(job.failures);
  const failed: WarmupEndpointStatus = {
    ...base,
    state: 'Failed',
    attempts: job.failures,
    message: job.error,
  };
  if (ctx.now >= due) return startOrWait(ctx, delivery, c, failed);
  ctx.wakeAt.push(due);
  return failed;
}

/** The next entry of one serving instance, and what to do about it. */
function planInstance(
  ctx: Ctx,
  delivery: Delivery,
  c: WarmupCandidate,
  prev: WarmupEndpointStatus | undefined,
): WarmupEndpointStatus {
  const base: Base = { pod: c.pod, restartCount: c.restartCount, since: prev?.since ?? stamp(ctx.now) };
  const job = ctx.jobs.get(c.key);
  if (job?.state === 'succeeded' || (prev?.state === 'Warmed' && job?.state !== 'failed'))
    return planWarmed(ctx, c, base, prev, job);
  if (job?.state === 'failed') return planFailed(ctx, delivery, c, base, prev, job);
  if (job) {
    ctx.keepJobs.push(c.key);
    return { ...base, state: 'Warming' };
  }
  const attempts = prev?.attempts ? { attempts: prev.attempts } : {};
  return startOrWait(ctx, delivery, c, { ...base, state: 'Pending', ...attempts });
}

/**
 * Starts the warm-up when documents and a partner are there; otherwise says why it waits. With a
 * shared L3 tier, one instance of the unit delivers (is prefilled) while the others wait; once the
 * tier holds the documents, each other instance only checks that it renders them the same.
 */
function startOrWait(
  ctx: Ctx,
  delivery: Delivery,
  c: WarmupCandidate,
  entry: WarmupEndpointStatus,
): WarmupEndpointStatus {
  if ('waiting' in c)
    return { ...entry, state: entry.state === 'Failed' ? 'Failed' : 'Pending', message: c.waiting };
  let target = c.target;
  if (target.l3) {
    const unit = unitOf(target);
    const record = delivery.records.get(unit);
    const deliverer = delivery.delivering.get(unit);
    if (record) target = { ...target, deliveredRendering: record.rendered };
    else if (deliverer !== undefined && deliverer !== c.pod)
      return {
        ...entry,
        state: entry.state === 'Failed' ? 'Failed' : 'Pending',
        message: `waiting for ${deliverer} to deliver the documents into the L3 tier`,
      };
    else delivery.delivering.set(unit, c.pod);
  }
  if (!ctx.documents) {
    ctx.needsDocuments = true;
    return entry;
  }
  if (!ctx.documents.ok) {
    ctx.wakeAt.push(ctx.now + DOCUMENT_RECHECK_MS);
    return {
      ...entry,
      state: entry.state === 'Failed' ? 'Failed' : 'Pending',
      message: ctx.documents.message,
    };
  }
  ctx.actions.push({ type: 'startWarmup', target, documents: ctx.documents.texts });
  ctx.keepJobs.push(c.key);
  const { message: _dropped, ...rest } = entry;
  return { ...rest, state: 'Warming' };
}

function planTarget(
  ctx: Ctx,
  policy: CachePolicyResource,
  t: TargetStatus,
  d: DeploymentResource | undefined,
): TargetStatus {
  if (!t.accepted || !t.cacheSalt) return t;
  const previous = policy.status?.targets?.find((p) => p.name === t.name)?.warmup ?? [];
  const prevOf = (pod: string, restartCount: number) =>
    previous.find((e) => e.pod === pod && e.restartCount === restartCount);
  const serving = computeWarmupCandidates(ctx.namespace, t.name, d, t.cacheSalt);
  const delivery = planDelivery(
    ctx,
    policy.status?.targets?.find((p) => p.name === t.name)?.delivered ?? [],
    serving,
    t.cacheSalt,
  );
  const entries = serving.map((c) => planInstance(ctx, delivery, c, prevOf(c.pod, c.restartCount)));
  // An instance that is momentarily not serving (not ready) keeps its entry: its cache is still there.
  const live = computeLiveInstances(d);
  const seen = new Set(entries.map((e) => `${e.pod}#${e.restartCount}`));
  for (const e of previous) {
    const id = `${e.pod}#${e.restartCount}`;
    if (live.has(id) && !seen.has(id)) entries.push(e);
  }
  entries.sort((a, b) => (a.pod < b.pod ? -1 : a.pod > b.pod ? 1 : a.restartCount - b.restartCount));
  const delivered = [...delivery.records.values()].sort((a, b) =>
    unitOf(a) < unitOf(b) ? -1 : unitOf(a) > unitOf(b) ? 1 : 0,
  );
  return {
    ...t,
    ...(entries.length > 0 ? { warmup: entries } : {}),
    ...(delivered.length > 0 ? { delivered } : {}),
  };
}

/**
 * The deliveries this pass keeps: the previous ones of a unit that still has a serving instance
 * under the same salt (an identity rolled away, or a salt changed, starts again), replaced by a
 * warm-up that just prefilled into the unit; and the unit's delivery in flight, if any.
 */
function planDelivery(
  ctx: Ctx,
  previous: readonly KnowledgeDelivery[],
  serving: readonly WarmupCandidate[],
  salt: string,
): Delivery {
  const records = new Map<string, KnowledgeDelivery>();
  const delivering = new Map<string, string>();
  const units = new Set(serving.flatMap((c) => ('target' in c && c.target.l3 ? [unitOf(c.target)] : [])));
  for (const r of previous) if (r.cacheSalt === salt && units.has(unitOf(r))) records.set(unitOf(r), r);
  for (const c of serving) {
    if (!('target' in c) || !c.target.l3) continue;
    const job = ctx.jobs.get(c.key);
    const unit = unitOf(c.target);
    if (job?.state === 'succeeded' && job.source === 'prefill' && job.rendered) {
      if (records.get(unit)?.rendered !== job.rendered)
        ctx.events.push({
          type: 'Normal',
          reason: WarmupReason.DeliveredToL3,
          message:
            `${c.pod} prefilled ${job.documents} document(s) (${job.tokens ?? 0} tokens) into the ${c.target.role} ` +
            `L3 tier of identity ${c.target.fingerprint}: its other replicas load them from there`,
        });
      records.set(unit, {
        role: c.target.role,
        fingerprint: c.target.fingerprint,
        pod: c.pod,
        restartCount: c.restartCount,
        deliveredAt: stamp(job.at),
        cacheSalt: salt,
        rendered: job.rendered,
        tokens: job.tokens ?? 0,
        storedTokens: job.storedTokens ?? 0,
      });
    } else if (job && job.state !== 'succeeded' && !c.target.deliveredRendering && !records.has(unit))
      delivering.set(unit, c.pod);
  }
  return { records, delivering };
}

function computeWarmedCondition(
  targets: readonly TargetStatus[],
  documents: WarmupDocuments | undefined,
  generation: number | undefined,
): ConditionInput {
  const entries = targets.flatMap((t) => t.warmup ?? []);
  const warmed = entries.filter((e) => e.state === 'Warmed').length;
  const gen = generation !== undefined ? { observedGeneration: generation } : {};
  const base = { type: WARMED_CONDITION, ...gen };
  if (documents && !documents.ok && warmed < entries.length)
    return { ...base, status: 'False', reason: WarmupReason.DocumentMissing, message: documents.message };
  const failed = entries.filter((e) => e.state === 'Failed');
  if (failed.length > 0)
    return {
      ...base,
      status: 'False',
      reason: WarmupReason.WarmupFailing,
      message: failed.map((e) => `${e.pod}: ${e.message ?? 'failed'}`).join('; '),
    };
  if (warmed < entries.length)
    return {
      ...base,
      status: 'False',
      reason: WarmupReason.Warming,
      message: `${warmed} of ${entries.length} endpoint(s) warmed`,
    };
  return {
    ...base,
    status: 'True',
    reason: WarmupReason.AllEndpointsWarmed,
    message: `${entries.length} endpoint(s) warmed`,
  };
}

export function planCachePolicyStep(
  policy: CachePolicyResource,
  observed: CachePolicyObservation,
  now: Date,
): CachePolicyStep {
  const base = computePolicyStatus(
    { policy, policies: observed.policies, deployments: observed.deployments },
    now,
  );
  if (!policy.spec.warmup) {
    const conditions = (base.conditions ?? []).filter((c) => c.type !== WARMED_CONDITION);
    return { status: { ...base, conditions }, actions: [], events: [], keepJobs: [] };
  }
  const ctx: Ctx = {
    namespace: policy.metadata.namespace ?? '',
    now: now.getTime(),
    documents: observed.documents,
    jobs: observed.jobs,
    actions: [],
    events: [],
    keepJobs: [],
    wakeAt: [],
    needsDocuments: false,
  };
  const targets = (base.targets ?? []).map((t) =>
    planTarget(ctx, policy, t, observed.deployments.get(t.name)),
  );
  if (ctx.needsDocuments)
    return { status: policy.status ?? {}, actions: [{ type: 'readDocuments' }], events: [], keepJobs: [] };
  const next = computeWarmedCondition(targets, observed.documents, policy.metadata.generation);
  const before: Condition | undefined = policy.status?.conditions?.find((c) => c.type === WARMED_CONDITION);
  const { conditions } = setCondition(base.conditions, next, now);
  if (next.reason === WarmupReason.DocumentMissing && before?.reason !== next.reason)
    ctx.events.push({ type: 'Warning', reason: next.reason, message: next.message });
  const actions = [...ctx.actions];
  if (ctx.wakeAt.length > 0)
    actions.push({ type: 'requeue', afterMs: Math.max(1_000, Math.min(...ctx.wakeAt) - ctx.now) });
  return { status: { ...base, conditions, targets }, actions, events: ctx.events, keepJobs: ctx.keepJobs };
}
