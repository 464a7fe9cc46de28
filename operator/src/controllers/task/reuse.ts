// Completed-result reuse: whole answers for the same approved snapshot.
//
// A source is another Task in the namespace with the same fingerprint (so the
// same input, sampling, output cap, checks and provider identity — the cache
// salt and deploymentId are in it, so reuse never crosses cache namespaces or
// identities), phase Succeeded (not Reused: reuse points at the original),
// completed within this task's ttlSeconds, whose stored result is the last
// attempt's answer and was not sent back for rework. When this task requires
// review, the source must have been Accepted by a person.
//
// Concurrent duplicates: identical tasks not yet finished are ordered by
// (creationTimestamp, name); only the first generates, the others wait for it
// (onInFlight: Wait) or fail with InFlight (onInFlight: Fail). A duplicate
// that already started (Running/Checking/AwaitingReview) blocks everyone.
// The order is only as good as the informer cache; the reconciler should
// write status.fingerprint in one pass and plan in the next (see report).
import type { TaskResource } from '#api/resources.ts';
import type { TaskPhase } from '#api/task.ts';
import type { TaskResult } from './result.ts';

export type ReusePlan =
  | { action: 'reuse'; source: { name: string; fingerprint: string; result: TaskResult } }
  | { action: 'wait'; on: string }
  | { action: 'fail'; on: string; message: string }
  | { action: 'generate' };

const STARTED: readonly TaskPhase[] = ['Running', 'Checking', 'AwaitingReview'];

function isBefore(a: TaskResource, b: TaskResource): boolean {
  const ta = a.metadata.creationTimestamp ?? '';
  const tb = b.metadata.creationTimestamp ?? '';
  if (ta !== tb) return Date.parse(ta) < Date.parse(tb);
  return (a.metadata.name ?? '') < (b.metadata.name ?? '');
}

function isReusableSource(task: TaskResource, source: TaskResource, now: Date): boolean {
  const st = source.status;
  if (st?.phase !== 'Succeeded' || !st.completedAt || !st.result?.sha256) return false;
  const age = now.getTime() - Date.parse(st.completedAt);
  if (!(age >= 0 && age <= task.spec.reuse.ttlSeconds * 1000)) return false;
  const last = st.attempts?.at(-1);
  // The result must be the last attempt's own answer, and not one a reviewer rejected.
  if (!last || last.resultSha256 !== st.result.sha256 || last.reviewDecision === 'Rework') return false;
  const rejected = (st.attempts ?? []).some(
    (a) => a.reviewDecision === 'Rework' && a.resultSha256 === st.result?.sha256,
  );
  if (rejected) return false;
  if (task.spec.review.required)
    return (
      source.spec.review.required &&
      source.spec.review.decision === 'Accepted' &&
      last.reviewDecision === 'Accepted'
    );
  return true;
}

export function planReuse(
  task: TaskResource,
  fingerprint: string,
  candidates: readonly TaskResource[],
  now: Date,
): ReusePlan {
  if (!task.spec.reuse.enabled) return { action: 'generate' };
  const same = candidates.filter(
    (c) =>
      c.metadata.name !== task.metadata.name &&
      c.metadata.namespace === task.metadata.namespace &&
      c.metadata.deletionTimestamp === undefined &&
      c.status?.fingerprint === fingerprint,
  );
  const sources = same
    .filter((c) => isReusableSource(task, c, now))
    .sort((a, b) => Date.parse(b.status?.completedAt ?? '') - Date.parse(a.status?.completedAt ?? ''));
  const source = sources[0];
  if (source?.status?.result)
    return {
      action: 'reuse',
      source: { name: source.metadata.name ?? '', fingerprint, result: source.status.result },
    };
  const blocking = same.find((c) => {
    const phase = c.status?.phase;
    if (phase !== undefined && STARTED.includes(phase)) return true;
    return (phase === undefined || phase === 'Pending') && isBefore(c, task);
  });
  if (!blocking) return { action: 'generate' };
  const on = blocking.metadata.name ?? '';
  if (task.spec.reuse.onInFlight === 'Fail')
    return { action: 'fail', on, message: `an identical task ${on} is in flight (reuse.onInFlight: Fail)` };
  return { action: 'wait', on };
}
