// Status pieces of a Task: conditions per phase, events, attempts and the ledger.
import type { Condition } from '#api/common.ts';
import type { TaskPhase, TaskSpec, TaskStatus } from '#api/task.ts';
import { setConditions, type ConditionInput } from '../../manager/conditions.ts';
import { computeLedger } from './attempt/budget.ts';
import type { ProviderIdentity } from './attempt/fingerprint.ts';
import type { ProviderKind } from './attempt/prepare.ts';
import { TaskConditionType, TaskReason } from './attempt/reasons.ts';
import type { Usage } from './attempt/types.ts';

export type TaskAttempt = NonNullable<TaskStatus['attempts']>[number];
export type TokenUsage = NonNullable<TaskStatus['usage']>;

export interface TaskEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export function computeProviderKind(spec: Pick<TaskSpec, 'target'>): ProviderKind {
  return spec.target.openrouter ? 'openrouter' : 'sglang';
}

/** The conditions of a phase: Progressing, Complete, Failed, and Reviewed when review is required. */
export function computeTaskConditions(
  prev: readonly Condition[] | undefined,
  phase: TaskPhase,
  reason: string,
  message: string,
  opts: { generation?: number | undefined; reviewRequired: boolean; now: Date },
): Condition[] {
  const g = opts.generation === undefined ? {} : { observedGeneration: opts.generation };
  const c = (type: string, status: Condition['status'], r = reason, m = message): ConditionInput => ({
    type,
    status,
    reason: r,
    message: m,
    ...g,
  });
  const active = phase === 'Pending' || phase === 'Running' || phase === 'Checking';
  const complete = phase === 'Succeeded' || phase === 'Reused';
  const next: ConditionInput[] = [
    c(TaskConditionType.Progressing, active ? 'True' : 'False'),
    c(TaskConditionType.Complete, complete ? 'True' : 'False', complete ? reason : phase),
    c(TaskConditionType.Failed, phase === 'Failed' ? 'True' : 'False', phase === 'Failed' ? reason : phase),
  ];
  if (opts.reviewRequired) {
    const reviewed = prev?.find((x) => x.type === TaskConditionType.Reviewed);
    if (phase === 'AwaitingReview')
      next.push(c(TaskConditionType.Reviewed, 'Unknown', TaskReason.AwaitingReview));
    else if (reason === TaskReason.Accepted)
      next.push(c(TaskConditionType.Reviewed, 'True', TaskReason.Accepted));
    else if (reason === TaskReason.ReworkRequested)
      next.push(c(TaskConditionType.Reviewed, 'False', TaskReason.ReworkRequested));
    else if (!reviewed)
      next.push(c(TaskConditionType.Reviewed, 'Unknown', TaskReason.Pending, 'no answer to review yet'));
  }
  return setConditions(prev, next, opts.now).conditions;
}

export function toTokenUsage(u: Usage): TokenUsage {
  const out: TokenUsage = {
    promptTokens: u.promptTokens,
    completionTokens: u.completionTokens,
    cachedTokens: u.cachedTokens,
    newGeneration: true,
  };
  if (u.cachedTokensDevice !== undefined) out.cachedTokensDevice = u.cachedTokensDevice;
  if (u.cachedTokensHost !== undefined) out.cachedTokensHost = u.cachedTokensHost;
  if (u.cacheWriteTokens !== undefined) out.cacheWriteTokens = u.cacheWriteTokens;
  return out;
}

function fromTokenUsage(u: TokenUsage): Usage {
  const out: Usage = {
    promptTokens: u.promptTokens ?? 0,
    completionTokens: u.completionTokens ?? 0,
    cachedTokens: u.cachedTokens ?? 0,
  };
  if (u.cachedTokensDevice !== undefined) out.cachedTokensDevice = u.cachedTokensDevice;
  if (u.cachedTokensHost !== undefined) out.cachedTokensHost = u.cachedTokensHost;
  if (u.cacheWriteTokens !== undefined) out.cacheWriteTokens = u.cacheWriteTokens;
  return out;
}

/** The ledger over every attempt that generated with known usage. */
export function computeTaskLedger(spec: TaskSpec, attempts: readonly TaskAttempt[] | undefined) {
  const usages = (attempts ?? []).flatMap((a) => (a.usage ? [fromTokenUsage(a.usage)] : []));
  return computeLedger(usages, spec.budget.prices, computeProviderKind(spec));
}

/** status.usage and status.cost from the attempts. */
export function withLedger(spec: TaskSpec, status: TaskStatus): TaskStatus {
  const ledger = computeTaskLedger(spec, status.attempts);
  const out: TaskStatus = { ...status, usage: ledger.usage };
  if (ledger.cost !== undefined) out.cost = ledger.cost;
  return out;
}

export function computeRuntimeIdentity(identity: ProviderIdentity): Record<string, string> {
  if (identity.provider === 'openrouter')
    return { provider: 'openrouter', model: identity.model, upstreamProvider: identity.upstreamProvider };
  const r = identity.runtime;
  return {
    provider: 'sglang',
    deploymentId: identity.deploymentId,
    identityFingerprint: identity.identityFingerprint,
    cacheSalt: identity.cacheSalt,
    modelPath: r.modelPath,
    servedModelName: r.servedModelName,
    tokenizerPath: r.tokenizerPath,
    version: r.version,
    tensorParallel: String(r.tensorParallel),
  };
}

/** Reviewer feedback of every attempt sent back for rework, oldest first. */
export function computeReworkFeedback(attempts: readonly TaskAttempt[] | undefined): string[] {
  return (attempts ?? []).flatMap((a) =>
    a.reviewDecision === 'Rework' && a.reviewFeedback !== undefined ? [a.reviewFeedback] : [],
  );
}
