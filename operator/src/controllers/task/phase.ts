// The Task state machine: planTaskStep(task, observations, now) → the whole
// next status, the actions the shell performs, and the events to emit.
//
//   Pending ──fingerprint──▶ Pending ──reuse──▶ Reused
//      │                       ├─wait (onInFlight: Wait) / fail InFlight
//      │                       └─generate──▶ Running ──outcome──▶ Checking
//   Checking ──pass──▶ AwaitingReview (review.required) | Succeeded
//            └─fail──▶ Running (attempt n+1, while checkRetries last) | Failed CheckFailed
//   AwaitingReview ──Accepted──▶ Succeeded
//                  └─Rework + new feedback──▶ Running (attempt n+1, feedback appended)
//   any step may end in Failed with its reason (reasons.ts).
//
// Level-triggered: everything comes from spec, status and observations.
// A `generate` action means: persist the returned status first (it records the
// attempt as started), then call the provider, then call planTaskStep again
// with the outcome. A Running task seen without an outcome therefore lost its
// call (operator restart): it fails closed with UsageUnknown and is not retried.
// A Rework decision counts once: it starts a new attempt only when its feedback
// differs from the last consumed one (status.attempts keeps them).
import type { TaskResource } from '#api/resources.ts';
import type { TaskPhase, TaskStatus } from '#api/task.ts';
import type { DataObject } from '#kube/objects.ts';
import { computeMaxNewTokens, planBudgetAfter, planBudgetBefore } from './attempt/budget.ts';
import { findInvalidCheck, runChecks } from './checks.ts';
import { computeTaskFingerprint } from './attempt/fingerprint.ts';
import type { GenerateCall } from './attempt/call.ts';
import { buildPreparedInput } from './attempt/prepare.ts';
import { TaskReason, type FailureReason } from './attempt/reasons.ts';
import { buildResultStorage, computeResultText, type TaskResult } from './result.ts';
import { planReuse } from './reuse.ts';
import {
  computeProviderKind,
  computeReworkFeedback,
  computeRuntimeIdentity,
  computeTaskConditions,
  computeTaskLedger,
  toTokenUsage,
  withLedger,
  type TaskAttempt,
  type TaskEvent,
} from './status.ts';
import type { TaskTarget } from './attempt/target.ts';
import type { AttemptError, AttemptOutcome, Result } from './attempt/types.ts';

export const WAIT_FOR_IN_FLIGHT_MS = 5_000;
/**
 * How long a new Task waits for its target to become routable before it fails
 * with the reason: a Deployment applied with it (one GitOps sync) is still
 * starting, and failing it at once would make the order of a sync matter.
 */
export const TARGET_WAIT_MS = 10 * 60_000;
export const TARGET_RECHECK_MS = 5_000;

export interface TaskObservations {
  /** computeTaskTarget(spec, …) this pass. */
  target: Result<TaskTarget, AttemptError>;
  /** The value behind spec.input.configMapRef, when it could be read. */
  inputText?: string | undefined;
  /** Tasks of the namespace (from the informer cache), for reuse. */
  candidates?: readonly TaskResource[];
  /** Text of the reuse source's result, after a `readSourceResult` action. */
  sourceResultText?: string | undefined;
  /** This task's result text, after a `readResult` action. */
  resultText?: string | undefined;
  /** The provider outcome of the open attempt, after a `generate` action. */
  outcome?: AttemptOutcome | undefined;
}

export type TaskAction =
  | { type: 'generate'; call: GenerateCall }
  | { type: 'applyConfigMap'; configMap: DataObject }
  | { type: 'readSourceResult'; source: string; configMapRef: { name: string; key: string } }
  | { type: 'readResult'; configMapRef: { name: string; key: string } }
  | { type: 'requeue'; afterMs: number };

export interface TaskStep {
  status: TaskStatus;
  actions: TaskAction[];
  events: TaskEvent[];
}

interface Ctx {
  task: TaskResource;
  obs: TaskObservations;
  now: Date;
  status: TaskStatus;
}

function stamp(now: Date): string {
  return now.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function enter(
  ctx: Ctx,
  status: TaskStatus,
  phase: TaskPhase,
  reason: string,
  message: string,
  extra: { actions?: TaskAction[]; events?: TaskEvent[]; event?: boolean } = {},
): TaskStep {
  const conditions = computeTaskConditions(status.conditions, phase, reason, message, {
    generation: ctx.task.metadata.generation,
    reviewRequired: ctx.task.spec.review.required,
    now: ctx.now,
  });
  const next: TaskStatus = { ...status, phase, conditions };
  if (ctx.task.metadata.generation !== undefined) next.observedGeneration = ctx.task.metadata.generation;
  const events = [...(extra.events ?? [])];
  const changed =
    ctx.status.phase !== phase ||
    ctx.status.conditions?.find((c) => c.type === 'Progressing')?.reason !== reason;
  if (extra.event ?? changed)
    events.push({ type: phase === 'Failed' ? 'Warning' : 'Normal', reason, message });
  return { status: next, actions: extra.actions ?? [], events };
}

function fail(ctx: Ctx, status: TaskStatus, reason: FailureReason, message: string): TaskStep {
  return enter(ctx, { ...status, completedAt: stamp(ctx.now) }, 'Failed', reason, message);
}

function failWith(ctx: Ctx, status: TaskStatus, e: AttemptError): TaskStep {
  return fail(ctx, status, e.reason, `${e.code}: ${e.message}`);
}

function replaceLast(
  attempts: readonly TaskAttempt[] | undefined,
  patch: Partial<TaskAttempt>,
): TaskAttempt[] {
  const list = [...(attempts ?? [])];
  const last = list.at(-1);
  if (last) list[list.length - 1] = { ...last, ...patch };
  return list;
}

/** Target, prepared input and fingerprint of this pass; the base fingerprint excludes rework feedback. */
function resolve(ctx: Ctx, feedback: readonly string[]) {
  const { task, obs } = ctx;
  if (!obs.target.ok) return { ok: false as const, error: obs.target.error };
  const target = obs.target.value;
  const kind = computeProviderKind(task.spec);
  const base = buildPreparedInput(task.spec, kind, { inputText: obs.inputText });
  const prepared = buildPreparedInput(task.spec, kind, { inputText: obs.inputText, feedback });
  if (!base.ok || !prepared.ok) {
    const e = base.ok ? (prepared.ok ? undefined : prepared.error) : base.error;
    return {
      ok: false as const,
      error: { reason: TaskReason.InputUnavailable, code: 'InputUnavailable', message: e?.message ?? '' },
    };
  }
  const maxNewTokens = computeMaxNewTokens(task.spec);
  const fingerprint = computeTaskFingerprint({
    prepared: base.value,
    sampling: task.spec.sampling,
    maxNewTokens,
    checks: task.spec.checks,
    provider: target.identity,
  });
  return { ok: true as const, target, prepared: prepared.value, maxNewTokens, fingerprint };
}

function startAttempt(ctx: Ctx, status: TaskStatus, why: { reason: string; message: string }): TaskStep {
  const { task } = ctx;
  const r = resolve(ctx, computeReworkFeedback(status.attempts));
  if (!r.ok) return failWith(ctx, status, r.error);
  if (status.fingerprint !== undefined && r.fingerprint !== status.fingerprint)
    return fail(
      ctx,
      status,
      TaskReason.TargetNotRoutable,
      'the target identity changed since the task started',
    );
  const spent = computeTaskLedger(task.spec, status.attempts).spent;
  const or = task.spec.target.openrouter;
  if (or) {
    const before = planBudgetBefore({
      budget: task.spec.budget,
      provider: 'openrouter',
      inputTokens: or.inputTokenUpperBound,
      maxNewTokens: r.maxNewTokens,
      spent,
    });
    if (!before.ok) return failWith(ctx, status, before.error);
  }
  const attempt = (status.attempts?.length ?? 0) + 1;
  const next: TaskStatus = {
    ...status,
    startedAt: status.startedAt ?? stamp(ctx.now),
    attempts: [...(status.attempts ?? []), { attempt, startedAt: stamp(ctx.now) }],
  };
  const call: GenerateCall = {
    attempt,
    target: r.target,
    prepared: r.prepared,
    maxNewTokens: r.maxNewTokens,
    sampling: task.spec.sampling,
    budget: task.spec.budget,
    spent,
  };
  if (or) call.apiKeySecretRef = or.apiKeySecretRef;
  return enter(ctx, next, 'Running', why.reason, `attempt ${attempt}: ${why.message}`, {
    actions: [{ type: 'generate', call }],
    event: true,
  });
}

function planReused(
  ctx: Ctx,
  status: TaskStatus,
  source: { name: string; fingerprint: string; result: TaskResult },
): TaskStep | undefined {
  const text = computeResultText(source.result, ctx.obs.sourceResultText);
  if (!text.ok) {
    if (source.result.configMapRef && ctx.obs.sourceResultText === undefined)
      return {
        status,
        actions: [
          { type: 'readSourceResult', source: source.name, configMapRef: source.result.configMapRef },
        ],
        events: [],
      };
    return undefined; // an unreadable or altered source is no source: generate instead
  }
  const stored = buildResultStorage(ctx.task, text.value);
  if (!stored.ok) return failWith(ctx, status, stored.error);
  const next: TaskStatus = {
    ...status,
    reusedFrom: { name: source.name, fingerprint: source.fingerprint },
    result: stored.value.result,
    usage: { promptTokens: 0, completionTokens: 0, cachedTokens: 0, newGeneration: false },
    startedAt: status.startedAt ?? stamp(ctx.now),
    completedAt: stamp(ctx.now),
  };
  if (ctx.task.spec.budget.prices) next.cost = '0';
  return enter(
    ctx,
    next,
    'Reused',
    TaskReason.Reused,
    `reused the result of Task ${source.name}; no new generation`,
    {
      actions: stored.value.configMap ? [{ type: 'applyConfigMap', configMap: stored.value.configMap }] : [],
    },
  );
}

function isWithinTargetWait(ctx: Ctx): boolean {
  const created = Date.parse(ctx.task.metadata.creationTimestamp ?? '');
  return Number.isFinite(created) && ctx.now.getTime() - created < TARGET_WAIT_MS;
}

function planPending(ctx: Ctx): TaskStep {
  const invalid = findInvalidCheck(ctx.task.spec.checks);
  if (invalid)
    return fail(
      ctx,
      ctx.status,
      TaskReason.InvalidCheck,
      `check ${invalid.name} (${invalid.type}): ${invalid.message}`,
    );
  const r = resolve(ctx, []);
  if (!r.ok && r.error.reason === TaskReason.TargetNotRoutable && isWithinTargetWait(ctx)) {
    return enter(
      ctx,
      ctx.status,
      'Pending',
      TaskReason.TargetNotRoutable,
      `waiting for the target: ${r.error.message}`,
      {
        actions: [{ type: 'requeue', afterMs: TARGET_RECHECK_MS }],
      },
    );
  }
  if (!r.ok) return failWith(ctx, ctx.status, r.error);
  const status: TaskStatus = {
    ...ctx.status,
    fingerprint: r.fingerprint,
    runtimeIdentity: computeRuntimeIdentity(r.target.identity),
  };
  // Publish the fingerprint before deciding, so identical tasks can see each other.
  if (ctx.status.fingerprint !== r.fingerprint)
    return enter(ctx, status, 'Pending', TaskReason.Pending, 'fingerprint computed', {
      actions: [{ type: 'requeue', afterMs: 0 }],
    });
  const plan = planReuse(ctx.task, r.fingerprint, ctx.obs.candidates ?? [], ctx.now);
  switch (plan.action) {
    case 'reuse': {
      const step = planReused(ctx, status, plan.source);
      if (step) return step;
      break;
    }
    case 'wait':
      return enter(
        ctx,
        status,
        'Pending',
        TaskReason.WaitingForInFlight,
        `waiting for identical Task ${plan.on}`,
        {
          actions: [{ type: 'requeue', afterMs: WAIT_FOR_IN_FLIGHT_MS }],
        },
      );
    case 'fail':
      return fail(ctx, status, TaskReason.InFlight, plan.message);
    case 'generate':
      break;
  }
  return startAttempt(ctx, status, { reason: TaskReason.Generating, message: 'generating' });
}

function planRunning(ctx: Ctx): TaskStep {
  const { task, obs, status } = ctx;
  const open = status.attempts?.at(-1);
  if (!open || open.finishedAt !== undefined || obs.outcome === undefined) {
    const attempts = replaceLast(status.attempts, {
      finishedAt: stamp(ctx.now),
      outcome: TaskReason.UsageUnknown,
    });
    return fail(
      ctx,
      { ...status, attempts },
      TaskReason.UsageUnknown,
      `OutcomeLost: attempt ${open?.attempt ?? '?'} has no recorded outcome (the operator restarted during the call); its usage is unknown and it is not retried`,
    );
  }
  const outcome = obs.outcome;
  const finishedAt = stamp(ctx.now);
  if (!outcome.ok) {
    const attempts = replaceLast(status.attempts, {
      finishedAt,
      outcome: outcome.error.reason,
      message: outcome.error.message,
    });
    return failWith(ctx, { ...status, attempts }, outcome.error);
  }
  const g = outcome.value;
  const usage = toTokenUsage(g.usage);
  const spent = computeTaskLedger(task.spec, status.attempts).spent;
  const after = planBudgetAfter({
    budget: task.spec.budget,
    provider: computeProviderKind(task.spec),
    usage: g.usage,
    spent,
    inputTokenUpperBound: task.spec.target.openrouter?.inputTokenUpperBound,
  });
  const stored = buildResultStorage(task, g.text);
  const problem = !after.ok ? after.error : !stored.ok ? stored.error : undefined;
  if (problem || !stored.ok) {
    const attempts = replaceLast(status.attempts, {
      finishedAt,
      usage,
      outcome: problem?.reason,
      message: problem?.message,
    });
    return failWith(ctx, withLedger(task.spec, { ...status, attempts }), problem as AttemptError);
  }
  const attempts = replaceLast(status.attempts, {
    finishedAt,
    usage,
    resultSha256: stored.value.result.sha256,
  });
  const next = withLedger(task.spec, { ...status, attempts, result: stored.value.result });
  if (g.servedBy !== undefined) next.runtimeIdentity = { ...next.runtimeIdentity, servedBy: g.servedBy };
  const actions: TaskAction[] = stored.value.configMap
    ? [{ type: 'applyConfigMap', configMap: stored.value.configMap }]
    : [];
  actions.push({ type: 'requeue', afterMs: 0 });
  return enter(
    ctx,
    next,
    'Checking',
    TaskReason.Checking,
    `attempt ${open.attempt} generated ${g.usage.completionTokens} tokens`,
    { actions },
  );
}

function planChecking(ctx: Ctx): TaskStep {
  const { task, status } = ctx;
  const result = status.result;
  if (result?.configMapRef && result.inline === undefined && ctx.obs.resultText === undefined)
    return { status, actions: [{ type: 'readResult', configMapRef: result.configMapRef }], events: [] };
  const text = computeResultText(result, ctx.obs.resultText);
  if (!text.ok) return failWith(ctx, status, text.error);
  const checked = runChecks(text.value, task.spec.checks);
  const n = status.attempts?.at(-1)?.attempt ?? 0;
  if (checked.ok) {
    if (task.spec.review.required) {
      const attempts = replaceLast(status.attempts, { outcome: TaskReason.AwaitingReview });
      const step = enter(
        ctx,
        { ...status, attempts },
        'AwaitingReview',
        TaskReason.AwaitingReview,
        `attempt ${n} passed its checks; waiting for review`,
      );
      const decided = planReview({ ...ctx, status: step.status });
      return { ...decided, events: [...step.events, ...decided.events] };
    }
    const attempts = replaceLast(status.attempts, { outcome: TaskReason.Succeeded });
    return enter(
      ctx,
      { ...status, attempts, completedAt: stamp(ctx.now) },
      'Succeeded',
      TaskReason.Succeeded,
      `attempt ${n} passed its checks`,
    );
  }
  const why = `check ${checked.error.name} (${checked.error.type}) failed: ${checked.error.message}`;
  const attempts = replaceLast(status.attempts, { outcome: TaskReason.CheckFailed, message: why });
  const retriesUsed = (status.attempts ?? []).filter((a) => a.outcome === TaskReason.CheckFailed).length;
  if (retriesUsed < task.spec.checkRetries)
    return startAttempt(
      ctx,
      { ...status, attempts },
      {
        reason: TaskReason.CheckRetry,
        message: `retry ${retriesUsed + 1} of ${task.spec.checkRetries} after ${why}`,
      },
    );
  return fail(ctx, { ...status, attempts }, TaskReason.CheckFailed, why);
}

function planReview(ctx: Ctx): TaskStep {
  const { task, status } = ctx;
  const { decision, feedback } = task.spec.review;
  const n = status.attempts?.at(-1)?.attempt ?? 0;
  if (decision === 'Accepted') {
    const attempts = replaceLast(status.attempts, {
      reviewDecision: 'Accepted',
      outcome: TaskReason.Succeeded,
    });
    return enter(
      ctx,
      { ...status, attempts, completedAt: stamp(ctx.now) },
      'Succeeded',
      TaskReason.Accepted,
      `attempt ${n} accepted`,
    );
  }
  const consumed = computeReworkFeedback(status.attempts).at(-1);
  if (decision === 'Rework' && feedback && feedback !== consumed) {
    const attempts = replaceLast(status.attempts, {
      reviewDecision: 'Rework',
      reviewFeedback: feedback,
      outcome: 'Rework',
    });
    return startAttempt(
      ctx,
      { ...status, attempts },
      {
        reason: TaskReason.ReworkRequested,
        message: `rework of attempt ${n} with reviewer feedback`,
      },
    );
  }
  return enter(ctx, status, 'AwaitingReview', TaskReason.AwaitingReview, `attempt ${n} waits for review`);
}

export function planTaskStep(task: TaskResource, obs: TaskObservations, now: Date): TaskStep {
  const status: TaskStatus = task.status ?? {};
  const ctx: Ctx = { task, obs, now, status };
  switch (status.phase ?? 'Pending') {
    case 'Pending':
      return planPending(ctx);
    case 'Running':
      return planRunning(ctx);
    case 'Checking':
      return planChecking(ctx);
    case 'AwaitingReview':
      return planReview(ctx);
    case 'Succeeded':
    case 'Reused':
    case 'Failed': {
      // Only review fields can change now, and they no longer matter.
      const g = task.metadata.generation;
      return {
        status: g === undefined ? status : { ...status, observedGeneration: g },
        actions: [],
        events: [],
      };
    }
  }
}
