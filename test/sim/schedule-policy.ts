// The waiting queue's order before each prefill batch: SGLang's SchedulePolicy
// (python/sglang/srt/managers/schedule_policy.py), as its scheduler applies it.
//
// SGLang orders the queue before each prefill batch it forms
// (_get_new_batch_prefill_raw -> SchedulePolicy.calc_priority), after returning early when the
// batch is full or no request can be added (get_num_allocatable_reqs <= 0), as preemption is off:
// the engine asks for the order only then. Its branches, fcfs and lof (the only policies the
// simulator runs):
// - lof: `_sort_by_longest_output`, with priority scheduling on or off (its
//   enable_priority_scheduling argument picks the key);
// - fcfs: `_sort_by_priority_and_fcfs` with priority scheduling on; off, the queue stays in
//   arrival order (calc_priority's `pass`).
// Pure.

import type { SglangArgs } from '#sglang/flags.ts';
import type { RequestSpec } from './engine.ts';

/**
 * SGLang's priority scheduling as its FCFS policy applies it, preemption off
 * (`--disable-priority-preemption`; the simulator does not retract running
 * requests, and SGLang's preemption only acts when the running batch is full).
 */
export interface PriorityScheduling {
  /** `--schedule-low-priority-values-first`: the smaller value runs first (SGLang's default: the larger). */
  readonly lowValuesFirst: boolean;
  /** `--default-priority-value`: the priority of a request that sends none; null: the last of all. */
  readonly defaultPriority: number | null;
  /**
   * `--decode-log-interval`: every this many decode batches the scheduler reports its stats
   * (the priorities its metrics know); absent: after prefill batches only (no metrics read).
   */
  readonly decodeLogInterval?: number;
}

/**
 * The priority a request without one takes in SGLang's scheduler
 * (scheduler._set_or_validate_priority): sys.maxsize when low values run first,
 * -sys.maxsize - 1 otherwise, i.e. after every request that sent one. 2^63 as a
 * double (sys.maxsize rounds to it), so an explicit extreme value still ties.
 */
const UNSET_PRIORITY = 2 ** 63;

/**
 * A waiting request's effective priority: its own, else the tokenizer's default
 * (tokenizer_manager._set_default_priority), else the scheduler's last-of-all.
 */
export function computeEffectivePriority(own: number | null | undefined, p: PriorityScheduling): number {
  if (own !== null && own !== undefined) return own;
  if (p.defaultPriority !== null) return p.defaultPriority;
  return p.lowValuesFirst ? UNSET_PRIORITY : -UNSET_PRIORITY;
}

/** What the policies read of a waiting request (the engine's own record is one). */
export interface WaitingRequest {
  readonly spec: Pick<RequestSpec, 'outputIds' | 'maxNewTokens'>;
  readonly arrivedAt: number;
  /** Its effective priority with priority scheduling on, else 0 (unused). */
  readonly priority: number;
}

/** The launch settings the order depends on (a part of the engine's config). */
export interface SchedulePolicyConfig {
  readonly priorityScheduling?: PriorityScheduling | null;
  /**
   * `--schedule-policy lof` where SGLang sorts by it (isLongestOutputFirst): the longest
   * max_new_tokens first, after priority when priority scheduling is on; absent or false: fcfs.
   */
  readonly longestOutputFirst?: boolean;
}

/** Order `waiting` in place as SchedulePolicy.calc_priority does before a prefill batch forms. */
export function orderWaitingQueue(waiting: WaitingRequest[], cfg: SchedulePolicyConfig): void {
  const p = cfg.priorityScheduling ?? null;
  if (cfg.longestOutputFirst === true) sortByLongestOutput(waiting, p);
  else if (p) sortByPriorityAndFcfs(waiting, p);
}

/**
 * Does SGLang's scheduler sort the waiting queue by the longest output (`--schedule-policy lof`)?
 * lof is a CacheAgnosticPolicy: SchedulePolicy._validate_and_adjust_policy falls back to fcfs
 * only for the cache-aware policies when the tree cache is disabled, and _determine_active_policy
 * only for lpm and hrrn with a long queue, so lof stays lof with the radix cache off and with
 * priority scheduling on or off. A PD decode server calls calc_priority only with priority
 * scheduling on (disaggregation/decode.py _get_new_prebuilt_batch): off, its queue stays FCFS.
 */
export function isLongestOutputFirst(a: SglangArgs): boolean {
  if (a.schedule_policy !== 'lof') return false;
  return a.disaggregation_mode !== 'decode' || a['enable_priority_scheduling'] === true;
}

/** SchedulePolicy.priority_sign: 1 when low values run first, -1 otherwise. */
const priorityKey = (l: WaitingRequest, p: PriorityScheduling): number =>
  l.priority * (p.lowValuesFirst ? 1 : -1);

const compareNumbers = (a: number, b: number): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * SchedulePolicy._sort_by_priority_and_fcfs: the waiting queue sorted in place by
 * (priority * sign, wait_queue_entry_time).
 */
function sortByPriorityAndFcfs(waiting: WaitingRequest[], p: PriorityScheduling): void {
  waiting.sort((a, b) => compareNumbers(priorityKey(a, p), priorityKey(b, p)) || a.arrivedAt - b.arrivedAt);
}

/**
 * SchedulePolicy._sort_by_longest_output: by -max_new_tokens, after priority * sign when
 * priority scheduling is on (`p`). Python's sort is stable and every key is fixed for a
 * request's life, so ties keep the order requests were appended in: arrival, the last key here
 * (Array.prototype.sort is stable too, for requests that arrived at one instant).
 */
function sortByLongestOutput(waiting: WaitingRequest[], p: PriorityScheduling | null): void {
  const output = (l: WaitingRequest): number => -(l.spec.maxNewTokens ?? l.spec.outputIds.length);
  const priority = (a: WaitingRequest, b: WaitingRequest): number =>
    p ? compareNumbers(priorityKey(a, p), priorityKey(b, p)) : 0;
  waiting.sort((a, b) => priority(a, b) || output(a) - output(b) || a.arrivedAt - b.arrivedAt);
}
