// Condition reasons and event reasons of a Task, in one place (CamelCase constants).

export const TaskReason = {
  // Progress
  Pending: 'Pending',
  Generating: 'Generating',
  Checking: 'Checking',
  AwaitingReview: 'AwaitingReview',
  WaitingForInFlight: 'WaitingForInFlight',
  ReworkRequested: 'ReworkRequested',
  CheckRetry: 'CheckRetry',
  // Outcomes
  Succeeded: 'Succeeded',
  Accepted: 'Accepted',
  Reused: 'Reused',
  // Failures (status.phase Failed)
  TargetNotRoutable: 'TargetNotRoutable',
  InputUnavailable: 'InputUnavailable',
  InputOverCap: 'InputOverCap',
  UsageUnknown: 'UsageUnknown',
  CheckFailed: 'CheckFailed',
  InvalidCheck: 'InvalidCheck',
  BudgetExceeded: 'BudgetExceeded',
  InFlight: 'InFlight',
  ProviderError: 'ProviderError',
  ProviderMismatch: 'ProviderMismatch',
  ResultUnavailable: 'ResultUnavailable',
  DailyCapReached: 'DailyCapReached',
} as const;
export type TaskReason = (typeof TaskReason)[keyof typeof TaskReason];

/** Reasons a Task can fail with; each ends the task (no automatic retry). */
export const FAILURE_REASONS = [
  TaskReason.TargetNotRoutable,
  TaskReason.InputUnavailable,
  TaskReason.InputOverCap,
  TaskReason.UsageUnknown,
  TaskReason.CheckFailed,
  TaskReason.InvalidCheck,
  TaskReason.BudgetExceeded,
  TaskReason.InFlight,
  TaskReason.ProviderError,
  TaskReason.ProviderMismatch,
  TaskReason.ResultUnavailable,
  TaskReason.DailyCapReached,
] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

export const TaskConditionType = {
  Progressing: 'Progressing',
  Reviewed: 'Reviewed',
  Complete: 'Complete',
  Failed: 'Failed',
} as const;
