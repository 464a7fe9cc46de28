// Standard conditions (metav1.Condition). Pure: the caller passes `now`.
// lastTransitionTime moves only when status flips: a new reason or message with the
// same status is an update, not a transition (LWS once stamped every update).
import type { Condition } from '#api/common.ts';

export type { Condition };
export type ConditionStatus = Condition['status'];

export type ConditionInput = Omit<Condition, 'lastTransitionTime'>;

export function setCondition(
  conditions: readonly Condition[] | undefined,
  next: ConditionInput,
  now: Date,
): { conditions: Condition[]; changed: boolean } {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === next.type);
  const prev = i >= 0 ? list[i] : undefined;
  if (!prev) {
    list.push({ ...next, lastTransitionTime: formatTime(now) });
    return { conditions: list, changed: true };
  }
  const lastTransitionTime = prev.status === next.status ? prev.lastTransitionTime : formatTime(now);
  const updated: Condition = { ...next, lastTransitionTime };
  const changed =
    prev.status !== updated.status ||
    prev.reason !== updated.reason ||
    prev.message !== updated.message ||
    prev.observedGeneration !== updated.observedGeneration ||
    prev.lastTransitionTime !== updated.lastTransitionTime;
  if (!changed) return { conditions: list, changed: false };
  list[i] = updated;
  return { conditions: list, changed: true };
}

// Sets several conditions in order; changed if any changed.
export function setConditions(
  conditions: readonly Condition[] | undefined,
  next: readonly ConditionInput[],
  now: Date,
): { conditions: Condition[]; changed: boolean } {
  let out = [...(conditions ?? [])];
  let changed = false;
  for (const n of next) {
    const r = setCondition(out, n, now);
    out = r.conditions;
    changed ||= r.changed;
  }
  return { conditions: out, changed };
}

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

export function isConditionTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === 'True';
}

export function removeCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): { conditions: Condition[]; changed: boolean } {
  const list = (conditions ?? []).filter((c) => c.type !== type);
  return { conditions: list, changed: list.length !== (conditions?.length ?? 0) };
}

// metav1.Time has second precision; sub-second digits would differ from what the API
// server stores and make every comparison look like a change.
export function formatTime(d: Date): string {
  return `${d.toISOString().slice(0, 19)}Z`;
}
