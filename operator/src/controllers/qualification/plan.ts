// The Qualification protocol as a pure planner: planQualificationStep(q, obs,
// now) → the whole next status, the actions the shell performs, the events.
//
//   Pending ──arms match, workload ok──▶ Running ──all slots run──▶ Succeeded
//      │  └─arms not ready: wait          │  ├─budget spent──▶ Stopped
//      └─arms differ──▶ Refused            │  ├─arm identity moved──▶ Failed ArmChanged
//          (re-checked: fixed arms run)    │  └─simulator and engine answers──▶ Failed EvidenceMixed
//
// Slots: 2 x samplesPerArm, run one at a time; round r runs arm 1 then arm 2
// when r is even, arm 2 then arm 1 when odd, so neither arm always goes first.
// A sample is a cold pass under a cache salt no request used before (one per
// Qualification uid and slot: nothing cached earlier can count) and then the
// identical warm pass under the same salt. A slot is run once: a sample found
// started without its record (the operator restarted mid-sample) is recorded
// as failed (Interrupted) and the next slot, with a fresh salt, follows.
import type { Condition } from '#api/common.ts';
import type { QualificationPhase, QualificationSpec, QualificationStatus } from '#api/qualification.ts';
import type { QualificationResource } from '#api/resources.ts';
import { setConditions, type ConditionInput } from '../../manager/conditions.ts';
import type { ArmsCheck, ArmView } from './arms.ts';
import { recordConfigMapName, type SampleRecord } from './record.ts';
import { computeEvidence, computeVerdict, summarizeArm } from './summary.ts';
import { paceOf, type Pace, type WorkloadRequest, type WorkloadResult } from './workload.ts';

export const ARMS_RECHECK_MS = 5_000;
const TERMINAL: readonly QualificationPhase[] = ['Succeeded', 'Stopped', 'Failed'];

export const QualificationReason = {
  ArmsMatch: 'ArmsMatch',
  ArmsMismatch: 'ArmsMismatch',
  ArmsNotReady: 'ArmsNotReady',
  ArmChanged: 'ArmChanged',
  WorkloadInvalid: 'WorkloadInvalid',
  EvidenceMixed: 'EvidenceMixed',
  Sampling: 'Sampling',
  Completed: 'Completed',
  TimeBudget: 'TimeBudget',
  TokenBudget: 'TokenBudget',
  Interrupted: 'Interrupted',
} as const;

export interface QualificationObservations {
  arms: ArmsCheck;
  workload: WorkloadResult;
  /** Every sample record stored so far (record.ts), by slot. */
  records: readonly SampleRecord[];
}

export interface SampleRun {
  slot: number;
  arm: string;
  armIndex: 0 | 1;
  sample: number;
  salt: string;
  view: ArmView;
  requests: WorkloadRequest[];
  /** Closed loop (concurrency) or open loop (arrival offsets): the same for every pass. */
  pace: Pace;
}

export type QualificationAction =
  | { type: 'runSample'; run: SampleRun }
  | { type: 'storeRecord'; record: SampleRecord }
  | { type: 'requeue'; afterMs: number };

export interface QualificationEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface QualificationStep {
  status: QualificationStatus;
  actions: QualificationAction[];
  events: QualificationEvent[];
}

function stamp(now: Date): string {
  return now.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Arm index and sample number (1-based) of a slot. */
export function slotOf(slot: number): { armIndex: 0 | 1; sample: number } {
  const round = Math.floor(slot / 2);
  const first = round % 2 === 0 ? 0 : 1;
  const armIndex = (slot % 2 === 0 ? first : 1 - first) as 0 | 1;
  return { armIndex, sample: round + 1 };
}

/** A cache salt no earlier request used: the Qualification's uid and the slot. */
export function buildSalt(uid: string, slot: number): string {
  return `qualification-${uid}-${slot}`;
}

function conditionsOf(
  prev: readonly Condition[] | undefined,
  phase: QualificationPhase,
  accepted: { status: Condition['status']; reason: string; message: string },
  reason: string,
  message: string,
  generation: number | undefined,
  now: Date,
): Condition[] {
  const g = generation === undefined ? {} : { observedGeneration: generation };
  const next: ConditionInput[] = [
    { type: 'Accepted', ...accepted, ...g },
    {
      type: 'Complete',
      status: phase === 'Succeeded' || phase === 'Stopped' ? 'True' : 'False',
      reason: phase === 'Succeeded' || phase === 'Stopped' ? reason : phase,
      message,
      ...g,
    },
    {
      type: 'Failed',
      status: phase === 'Failed' ? 'True' : 'False',
      reason: phase === 'Failed' ? reason : phase,
      message,
      ...g,
    },
  ];
  return setConditions(prev, next, now).conditions;
}

interface Ctx {
  q: QualificationResource;
  obs: QualificationObservations;
  now: Date;
  prev: QualificationStatus;
}

/** The identity an arm ran under: held in status from the first sample, else what it is now. */
function heldIdentity(
  held:
    | { deploymentId?: string | undefined; fingerprint?: string | undefined; profile?: string | undefined }
    | undefined,
  view: ArmView | undefined,
): { deploymentId?: string; fingerprint?: string; profile?: string } {
  const out: { deploymentId?: string; fingerprint?: string; profile?: string } = {};
  const deploymentId = held?.deploymentId ?? view?.deploymentId;
  const fingerprint = held?.fingerprint ?? view?.fingerprint;
  const profile = held?.profile ?? view?.profile;
  if (deploymentId !== undefined) out.deploymentId = deploymentId;
  if (fingerprint !== undefined) out.fingerprint = fingerprint;
  if (profile !== undefined) out.profile = profile;
  return out;
}

/** The status every step shares: per-arm summaries, progress, evidence, verdict, usage. */
function reportOf(ctx: Ctx, views: readonly (ArmView | undefined)[]): QualificationStatus {
  const { q, obs, prev } = ctx;
  const spec: QualificationSpec = q.spec;
  const records = obs.records;
  const arms = spec.arms.map((a, i) => {
    const held = prev.arms?.[i];
    const view = views[i];
    const identity = heldIdentity(held, view);
    return summarizeArm(spec, { name: a.name, deployment: a.deployment.name }, records, view?.gpus, identity);
  });
  const out: QualificationStatus = {
    ...prev,
    arms,
    progress: `${records.length}/${2 * spec.samplesPerArm}`,
    record: { name: prev.record?.name ?? '' },
  };
  delete out.current;
  if (records.length > 0) out.record = { name: recordConfigMapName(q.metadata.name ?? '') };
  else if (!prev.record?.name) delete out.record;
  const evidence = computeEvidence(records);
  if (evidence && evidence !== 'Mixed') out.evidence = evidence;
  const verdict = computeVerdict(spec, records);
  if (verdict) out.verdict = verdict;
  const all = records.flatMap((r) => [...(r.cold?.requests ?? []), ...(r.warm?.requests ?? [])]);
  out.usage = {
    promptTokens: all.reduce((a, r) => a + (r.promptTokens ?? 0), 0),
    completionTokens: all.reduce((a, r) => a + (r.completionTokens ?? 0), 0),
  };
  return out;
}

function enter(
  ctx: Ctx,
  status: QualificationStatus,
  phase: QualificationPhase,
  accepted: { status: Condition['status']; reason: string; message: string },
  reason: string,
  message: string,
  actions: QualificationAction[] = [],
): QualificationStep {
  const generation = ctx.q.metadata.generation;
  const next: QualificationStatus = {
    ...status,
    phase,
    conditions: conditionsOf(ctx.prev.conditions, phase, accepted, reason, message, generation, ctx.now),
  };
  if (generation !== undefined) next.observedGeneration = generation;
  if (TERMINAL.includes(phase)) next.completedAt = ctx.prev.completedAt ?? stamp(ctx.now);
  const prevReason = ctx.prev.conditions?.find(
    (c) => c.type === (phase === 'Refused' ? 'Accepted' : 'Complete'),
  );
  const events: QualificationEvent[] = [];
  if (ctx.prev.phase !== phase || (phase === 'Refused' && prevReason?.message !== message))
    events.push({ type: phase === 'Failed' || phase === 'Refused' ? 'Warning' : 'Normal', reason, message });
  return { status: next, actions, events };
}

const armName = (spec: QualificationSpec, i: 0 | 1): string => spec.arms[i]?.name ?? `arm-${i + 1}`;

const accepted = (message: string) => ({
  status: 'True' as const,
  reason: QualificationReason.ArmsMatch,
  message,
});

/** Arms that differ (refused, or failed once started) or are not ready yet (wait). */
function planNotReady(
  ctx: Ctx,
  report: QualificationStatus,
  started: boolean,
  arms: Exclude<ArmsCheck, { kind: 'ready' }>,
): QualificationStep {
  const spec = ctx.q.spec;
  if (arms.kind === 'mismatch') {
    const message = `the arms differ outside spec.subject [${spec.subject.join(', ')}]: ${arms.differences.join('; ')}`;
    const refusal = { status: 'False' as const, reason: QualificationReason.ArmsMismatch, message };
    if (started) return enter(ctx, report, 'Failed', refusal, QualificationReason.ArmChanged, message);
    return enter(ctx, report, 'Refused', refusal, QualificationReason.ArmsMismatch, message, [
      { type: 'requeue', afterMs: ARMS_RECHECK_MS * 12 },
    ]);
  }
  const waiting = {
    status: 'Unknown' as const,
    reason: QualificationReason.ArmsNotReady,
    message: arms.message,
  };
  return enter(
    ctx,
    report,
    started ? 'Running' : 'Pending',
    waiting,
    QualificationReason.ArmsNotReady,
    arms.message,
    [{ type: 'requeue', afterMs: ARMS_RECHECK_MS }],
  );
}

/** A budget spent before the next slot: why and how the run stops, or undefined. */
function budgetStop(
  spec: QualificationSpec,
  report: QualificationStatus,
  startedAt: string,
  slot: number,
  now: Date,
): { reason: string; message: string } | undefined {
  const total = 2 * spec.samplesPerArm;
  const elapsedS = (now.getTime() - Date.parse(startedAt)) / 1000;
  if (elapsedS >= spec.budget.maxDurationSeconds)
    return {
      reason: QualificationReason.TimeBudget,
      message: `stopped after ${slot} of ${total} samples: budget.maxDurationSeconds ${spec.budget.maxDurationSeconds} spent`,
    };
  const spent = (report.usage?.promptTokens ?? 0) + (report.usage?.completionTokens ?? 0);
  if (spec.budget.maxTokens !== undefined && spent >= spec.budget.maxTokens)
    return {
      reason: QualificationReason.TokenBudget,
      message: `stopped after ${slot} of ${total} samples: ${spent} tokens spent of budget.maxTokens ${spec.budget.maxTokens}`,
    };
  return undefined;
}

export function planQualificationStep(
  q: QualificationResource,
  obs: QualificationObservations,
  now: Date,
): QualificationStep {
  const prev: QualificationStatus = q.status ?? {};
  const ctx: Ctx = { q, obs, now, prev };
  if (prev.phase && TERMINAL.includes(prev.phase)) return { status: prev, actions: [], events: [] };
  const spec = q.spec;
  const started = obs.records.length > 0 || prev.current !== undefined;
  const views = obs.arms.kind === 'ready' ? obs.arms.arms : [undefined, undefined];
  const report = reportOf(ctx, views);

  if (!obs.workload.ok)
    return enter(
      ctx,
      report,
      'Failed',
      accepted('arms match'),
      QualificationReason.WorkloadInvalid,
      obs.workload.message,
    );

  if (obs.arms.kind !== 'ready') return planNotReady(ctx, report, started, obs.arms);
  const arms = obs.arms.arms;
  const ok = accepted(
    `${armName(spec, 0)}=${arms[0].deploymentId} (${arms[0].profile}), ${armName(spec, 1)}=${arms[1].deploymentId} (${arms[1].profile}): only [${spec.subject.join(', ')}] may differ`,
  );
  const moved = spec.arms.flatMap((a, i) => {
    const held = prev.arms?.[i]?.fingerprint;
    return started && held !== undefined && held !== arms[i]?.fingerprint
      ? [`${a.name}: identity ${held} is now ${arms[i]?.fingerprint ?? ''}`]
      : [];
  });
  if (moved.length > 0)
    return enter(
      ctx,
      report,
      'Failed',
      ok,
      QualificationReason.ArmChanged,
      `an arm changed during the run: ${moved.join('; ')}`,
    );

  // A sample started and never recorded: the operator lost it. Record the failure first.
  const open = prev.current;
  if (open && !obs.records.some((r) => r.slot === open.slot)) {
    const record: SampleRecord = {
      slot: open.slot,
      arm: open.arm,
      sample: open.sample,
      salt: open.salt,
      startedAt: stamp(now),
      finishedAt: stamp(now),
      failed: `${QualificationReason.Interrupted}: the sample started but its record was never written (operator restart)`,
    };
    return enter(
      ctx,
      { ...report, current: open },
      'Running',
      ok,
      QualificationReason.Sampling,
      'recording an interrupted sample',
      [{ type: 'storeRecord', record }],
    );
  }

  if (computeEvidence(obs.records) === 'Mixed')
    return enter(
      ctx,
      report,
      'Failed',
      ok,
      QualificationReason.EvidenceMixed,
      'answers came from a simulator and from an engine in one run: a result never mixes the two',
    );

  const startedAt = prev.startedAt ?? stamp(now);
  const base: QualificationStatus = { ...report, startedAt };
  const slot = obs.records.length;
  const total = 2 * spec.samplesPerArm;
  if (slot >= total)
    return enter(
      ctx,
      base,
      'Succeeded',
      ok,
      QualificationReason.Completed,
      report.verdict?.summary ?? `${total} samples run`,
    );
  const stop = budgetStop(spec, report, startedAt, slot, now);
  if (stop) return enter(ctx, base, 'Stopped', ok, stop.reason, stop.message);
  const { armIndex, sample } = slotOf(slot);
  const name = armName(spec, armIndex);
  const view = arms[armIndex];
  const run: SampleRun = {
    slot,
    arm: name,
    armIndex,
    sample,
    salt: buildSalt(q.metadata.uid ?? q.metadata.name ?? '', slot),
    view,
    requests: obs.workload.requests,
    pace: paceOf(spec, obs.workload.requests.length),
  };
  const current = { slot, arm: name, sample, salt: run.salt };
  // Identity held for the run: the first sample pins each arm's fingerprint.
  const held: QualificationStatus = {
    ...base,
    current,
    arms: (base.arms ?? []).map((a, i) => ({
      ...a,
      deploymentId: a.deploymentId ?? arms[i]?.deploymentId ?? '',
      fingerprint: a.fingerprint ?? arms[i]?.fingerprint ?? '',
      profile: a.profile ?? arms[i]?.profile ?? '',
    })),
  };
  return enter(
    ctx,
    held,
    'Running',
    ok,
    QualificationReason.Sampling,
    `sample ${sample} of ${spec.samplesPerArm} on ${name} (slot ${slot + 1} of ${total})`,
    [{ type: 'runSample', run }],
  );
}
