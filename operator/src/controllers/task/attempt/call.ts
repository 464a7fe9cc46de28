// What the Task state machine asks a provider to run: one generation attempt, its target,
// its prepared input and the bounds the provider checks before it sends anything.
import type { TaskSpec } from '#api/task.ts';
import type { PreparedInput } from './prepare.ts';
import type { TaskTarget } from './target.ts';

export interface GenerateCall {
  attempt: number;
  target: TaskTarget;
  prepared: PreparedInput;
  maxNewTokens: number;
  sampling: TaskSpec['sampling'];
  budget: TaskSpec['budget'];
  /** What earlier attempts cost, for the cost cap checked before sending. */
  spent: bigint;
  apiKeySecretRef?: { name: string; key: string };
}
