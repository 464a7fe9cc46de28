// The reconciler contract (controller-runtime's): given the key of a root object,
// make the world match its spec and report status. Level-triggered: the key is all a
// reconciler gets, never the event that caused it.
import type { Logger } from '#kube/logger.ts';
import type { ObjectKey } from '#kube/objects.ts';

export type { ObjectKey };
export { formatKey, parseKey } from '#kube/objects.ts';

export interface ReconcileContext {
  logger: Logger;
  // Aborted when shutdown's grace period runs out: stop early, the next leader retries.
  signal: AbortSignal;
  now(): Date;
  // Failures of this key since its last success.
  retries: number;
}

// Requeue after a delay (polling something the API does not signal), or nothing: done.
export type ReconcileResult = { requeueAfterMs?: number } | void;

export interface Reconciler {
  reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<ReconcileResult>;
}

// An error retrying cannot fix (an invalid spec): the reconciler has already said so in
// a condition; the key is not retried until the object changes.
export class TerminalError extends Error {
  override readonly name = 'TerminalError';
}

export function isTerminalError(err: unknown): err is TerminalError {
  return err instanceof TerminalError || (err instanceof Error && err.cause instanceof TerminalError);
}
