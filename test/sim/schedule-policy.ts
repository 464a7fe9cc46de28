// The waiting queue's order before each prefill batch: SGLang 0.5.23's SchedulePolicy
// (python/sglang/srt/managers/schedule_policy.py), as its scheduler applies it.
//
// SGLang orders the queue before each prefill batch it forms (_get_new_batch_prefill_raw ->
// SchedulePolicy.calc_priority), after returning early when the batch is full or no request can
// be added (get_num_allocatable_reqs <= 0), as preemption is off: the engine asks for the order
// only then. The policy a server runs is settled at start (resolveSchedulePolicy, after
// _validate_and_adjust_policy); each pass then (calc_priority):
// - fcfs: `_sort_by_priority_and_fcfs` with priority scheduling on; off, the queue is left as
//   it is (`pass`): arrival order, or the order a past pass left.
// - lof: `_sort_by_longest_output`, priority first when priority scheduling is on.
// - random: `_sort_randomly`, a shuffle of the whole queue each pass.
// - routing-key: `_sort_by_routing_key`, the keys most frequent in the running batch first.
// - lpm, dfs-weight, hrrn (cache-aware): every waiting prompt is matched against the radix tree
//   first (`_compute_prefix_matches`), then sorted by the longest match (`_sort_by_longest_prefix`),
//   by the tree's subtree weights (`_sort_by_dfs_weight`) or by the response ratio in processed
//   prefill tokens (`_sort_by_hrrn`). lpm and hrrn leave the queue as it is when more than 128
//   wait (`_determine_active_policy`).
// Pure but for what a cache-aware pass's match does to the tree, as SGLang's does: it splits
// nodes and refreshes the matched paths' LRU times.

import type { Result, SglangArgs } from '#sglang/flags.ts';
import type { RequestSpec } from './engine.ts';
import { RadixTree, type TreeNode } from './radix-tree.ts';

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

/** The policies a simulator runs: what SGLang's scheduler ends up running (resolveSchedulePolicy). */
export const SchedulePolicyName = {
  fcfs: 'fcfs',
  lof: 'lof',
  lpm: 'lpm',
  dfsWeight: 'dfs-weight',
  hrrn: 'hrrn',
  random: 'random',
  routingKey: 'routing-key',
} as const;
export type SchedulePolicyName = (typeof SchedulePolicyName)[keyof typeof SchedulePolicyName];

const CACHE_AWARE: readonly string[] = ['lpm', 'dfs-weight', 'hrrn', 'shortest-prefill-first'];
const SIMULATED: readonly string[] = Object.values(SchedulePolicyName);

/**
 * The policy a server launched with `a` runs, or why it does not start. After SGLang's
 * SchedulePolicy._validate_and_adjust_policy, run by every scheduler at start: a cache-aware
 * policy becomes fcfs with the radix cache disabled (shortest-prefill-first refuses instead),
 * and `priority`, which the flag's choices list, is no policy at all. A PD decode server sorts
 * its queue only with priority scheduling on (disaggregation/decode.py _get_new_prebuilt_batch),
 * where SGLang allows only fcfs and lof (startup-checks.ts); off, it leaves its queue as it is.
 */
export function resolveSchedulePolicy(
  a: SglangArgs,
  radixCache: boolean,
): Result<SchedulePolicyName, string> {
  const policy = a.schedule_policy;
  const unknown = `Unknown schedule_policy: policy='${policy}'`;
  // SGLang raises "Experimental shortest-prefill-first requires prefix caching" inside the try
  // whose `except ValueError` then finds no cache-agnostic policy of that name: what the
  // server dies with is the outer "Unknown schedule_policy", the inner one its context.
  if (policy === 'shortest-prefill-first' && !radixCache)
    return {
      ok: false,
      error: `${unknown} (during: Experimental shortest-prefill-first requires prefix caching)`,
    };
  if (!CACHE_AWARE.includes(policy) && !SIMULATED.includes(policy)) return { ok: false, error: unknown };
  if (a.disaggregation_mode === 'decode' && a['enable_priority_scheduling'] !== true)
    return { ok: true, value: 'fcfs' };
  if (CACHE_AWARE.includes(policy) && !radixCache) return { ok: true, value: 'fcfs' };
  // Its sort alone would be easy; its cap on a chunked prefill (shortest_prefill_chunk_limit) is
  // half the policy, and the simulator prefills a request whole.
  if (policy === 'shortest-prefill-first')
    return {
      ok: false,
      error:
        '--schedule-policy shortest-prefill-first: the simulator does not model this policy (it caps chunked prefills, which the simulator does not run)',
    };
  return { ok: true, value: policy as SchedulePolicyName };
}

/** The launch settings the order depends on (a part of the engine's config). */
export interface SchedulePolicyConfig {
  readonly priorityScheduling?: PriorityScheduling | null;
  /** What the scheduler runs (resolveSchedulePolicy); absent: fcfs. */
  readonly schedulePolicy?: SchedulePolicyName;
  /** random's seed (`--random-seed`, else 0, so that a run repeats); absent: 0. */
  readonly randomSeed?: number;
}

/** What the policies read of a waiting request (the engine's own record is one). */
export interface WaitingRequest {
  readonly spec: Pick<
    RequestSpec,
    'rid' | 'namespace' | 'promptIds' | 'outputIds' | 'maxNewTokens' | 'routingKey'
  >;
  readonly arrivedAt: number;
  /** Its effective priority with priority scheduling on, else 0 (unused). */
  readonly priority: number;
  /** hrrn: the prefill tokens the server had processed when it entered the queue (arrival_processed_tokens). */
  readonly arrivalProcessedTokens: number;
}

/** What a pass reads of the scheduler besides its queue. */
export interface SchedulerView {
  /** The radix cache; null when disabled. */
  readonly tree: RadixTree | null;
  /** The running batch (routing-key counts its keys). */
  readonly running: readonly { readonly spec: Pick<RequestSpec, 'routingKey'> }[];
  /** Prefill tokens computed so far (hrrn; Scheduler.processed_tokens_counter). */
  readonly processedTokens: number;
  readonly now: number;
}

// schedule_policy.py's module constants at their defaults (the environment variables that move
// the two thresholds are not read).
const WAITING_QUEUE_PREFIX_MATCH_MAX = 128;
const IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD = 32;
const IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD = 32;

/** A waiting request's match, as match_kv_cache leaves it on the request. */
interface PrefixMatch {
  /** num_matched_prefix_tokens: device + host hits, at most the prompt - 1. */
  readonly matched: number;
  /** last_node: the deepest device node of the match. */
  readonly lastNode: TreeNode;
}

/** SGLang's SchedulePolicy for one server: its policy, and random's generator. */
export class WaitingQueueOrder {
  readonly #policy: SchedulePolicyName;
  readonly #priority: PriorityScheduling | null;
  readonly #random: () => number;

  constructor(cfg: SchedulePolicyConfig) {
    this.#policy = cfg.schedulePolicy ?? 'fcfs';
    this.#priority = cfg.priorityScheduling ?? null;
    this.#random = createRandom(cfg.randomSeed ?? 0);
  }

  /** Order `waiting` in place as SchedulePolicy.calc_priority does before a prefill batch forms. */
  order<T extends WaitingRequest>(waiting: T[], view: SchedulerView): void {
    const policy = this.#policy;
    if (policy === 'fcfs') {
      if (this.#priority) sortByPriorityAndFcfs(waiting, this.#priority);
    } else if (policy === 'lof') sortByLongestOutput(waiting, this.#priority);
    else if (policy === 'random') shuffle(waiting, this.#random);
    else if (policy === 'routing-key') sortByRoutingKey(waiting, view.running);
    else if (view.tree && !isQueueTooLongToMatch(policy, waiting.length)) {
      const { matches, deprioritized } = computePrefixMatches(waiting, view.tree, view.now);
      if (policy === 'lpm') sortByLongestPrefix(waiting, matches, deprioritized);
      else if (policy === 'hrrn') sortByHrrn(waiting, matches, deprioritized, view.processedTokens);
      else sortByDfsWeight(waiting, matches, view.tree);
    }
  }
}

/** _determine_active_policy: lpm and hrrn turn to fcfs (leave the queue) past 128 waiting; dfs-weight never. */
function isQueueTooLongToMatch(policy: SchedulePolicyName, waiting: number): boolean {
  return (policy === 'lpm' || policy === 'hrrn') && waiting > WAITING_QUEUE_PREFIX_MATCH_MAX;
}

/**
 * SchedulePolicy._compute_prefix_matches: each prompt matched against the tree (the whole prompt,
 * page-aligned, as match_kv_cache passes origin_input_ids), and the in-batch prefix check: a
 * request with at most 32 device tokens cached whose first 32+ tokens an earlier such request in
 * the queue shares is held back this pass (the earlier one's prefill will cache them), the rest
 * are inserted in a throwaway tree of the queue (page size 1, create_simulated's).
 */
function computePrefixMatches(
  waiting: readonly WaitingRequest[],
  tree: RadixTree,
  now: number,
): { matches: Map<WaitingRequest, PrefixMatch>; deprioritized: Set<WaitingRequest> } {
  const matches = new Map<WaitingRequest, PrefixMatch>();
  const deprioritized = new Set<WaitingRequest>();
  const queueTree = new RadixTree({ pageSize: 1, hostCapacity: 0, writePolicy: 'write_back' });
  for (const r of waiting) {
    const ids = r.spec.promptIds;
    const m = tree.probe(r.spec.namespace, ids, now);
    const matched = Math.min(m.deviceTokens + m.hostTokens, Math.max(0, ids.length - 1));
    matches.set(r, { matched, lastNode: m.deviceNode });
    if (m.deviceTokens > IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD) continue;
    const inQueue = queueTree.peek(r.spec.namespace, ids).deviceTokens;
    if (inQueue >= IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD) deprioritized.add(r);
    else queueTree.insert(r.spec.namespace, ids, now);
  }
  return { matches, deprioritized };
}

const matchedOf = (matches: ReadonlyMap<WaitingRequest, PrefixMatch>, r: WaitingRequest): number =>
  matches.get(r)?.matched ?? 0;

/** _sort_by_longest_prefix: the most matched tokens first, the held-back last; ties keep their place. */
function sortByLongestPrefix(
  waiting: WaitingRequest[],
  matches: ReadonlyMap<WaitingRequest, PrefixMatch>,
  deprioritized: ReadonlySet<WaitingRequest>,
): void {
  const key = (r: WaitingRequest): number => (deprioritized.has(r) ? Infinity : -matchedOf(matches, r));
  waiting.sort((a, b) => compareNumbers(key(a), key(b)));
}

/**
 * _sort_by_hrrn: the highest response ratio first, its wait counted in prefill tokens the server
 * computed since the request queued (token-based aging) over the tokens it has to prefill; one
 * with nothing to prefill first, the held-back last, ties by rid (not by arrival).
 */
function sortByHrrn(
  waiting: WaitingRequest[],
  matches: ReadonlyMap<WaitingRequest, PrefixMatch>,
  deprioritized: ReadonlySet<WaitingRequest>,
  processedTokens: number,
): void {
  const key = (r: WaitingRequest): number => {
    if (deprioritized.has(r)) return Infinity;
    const uncached = Math.max(0, r.spec.promptIds.length - matchedOf(matches, r));
    if (uncached <= 0) return -Infinity;
    return -Math.max(0, processedTokens - r.arrivalProcessedTokens) / uncached;
  };
  waiting.sort((a, b) => compareNumbers(key(a), key(b)) || compareStrings(a.spec.rid, b.spec.rid));
}

/**
 * _sort_by_dfs_weight (base_prefix_cache._dfs_weight_order): a depth-first walk of the tree from
 * its root, heavier subtrees (more waiting requests ending in them) first, ties in the root's or
 * node's child order; a node's own requests after its subtree's. A request's node is its match's
 * last device node; SGLang's tree has one root, so every namespace's root is that root here.
 */
function sortByDfsWeight(
  waiting: WaitingRequest[],
  matches: ReadonlyMap<WaitingRequest, PrefixMatch>,
  tree: RadixTree,
): void {
  type Slot = TreeNode | null; // null: the one root
  const slotOf = (n: TreeNode | null | undefined): Slot => (n?.parent ? n : null);
  const own = new Map<Slot, WaitingRequest[]>();
  const weight = new Map<Slot, number>();
  for (const r of waiting) {
    const slot = slotOf(matches.get(r)?.lastNode);
    const mine = own.get(slot) ?? [];
    mine.push(r);
    own.set(slot, mine);
    // A subtree's weight is the requests ending in it: one more on each node up to the root.
    let n: Slot = slot;
    for (; n !== null; n = slotOf(n.parent)) weight.set(n, (weight.get(n) ?? 0) + 1);
    weight.set(null, (weight.get(null) ?? 0) + 1);
  }
  const weightOf = (n: Slot): number => weight.get(n) ?? 0;
  const childrenOf = (n: Slot): TreeNode[] =>
    (n === null ? tree.topNodes() : [...n.children.values()])
      .filter((c) => weightOf(c) > 0)
      .sort((a, b) => weightOf(b) - weightOf(a));
  const order: WaitingRequest[] = [];
  const stack: [Slot, boolean][] = [[null, false]];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const [node, visited] = top;
    if (visited) {
      order.push(...(own.get(node) ?? []));
      continue;
    }
    stack.push([node, true]);
    for (const c of childrenOf(node).reverse()) stack.push([c, false]);
  }
  waiting.splice(0, waiting.length, ...order);
}

/**
 * _sort_by_routing_key: requests whose routing key the running batch has, the most frequent key
 * first (then by key); the rest after them by key (none as ''). Left as it is when no running
 * request has a key.
 */
function sortByRoutingKey(waiting: WaitingRequest[], running: SchedulerView['running']): void {
  const counts = new Map<string, number>();
  for (const r of running) {
    const k = r.spec.routingKey;
    if (k) counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  if (counts.size === 0) return;
  const key = (r: WaitingRequest): [number, number, string] => {
    const k = r.spec.routingKey;
    const count = k ? counts.get(k) : undefined;
    return count === undefined ? [1, 0, k ?? ''] : [0, -count, k ?? ''];
  };
  waiting.sort((a, b) => {
    const [ga, ca, ka] = key(a);
    const [gb, cb, kb] = key(b);
    return ga - gb || ca - cb || compareStrings(ka, kb);
  });
}

/**
 * _sort_randomly: random.shuffle's Fisher-Yates (from the end, j uniform in [0, i]). SGLang draws
 * from Python's generator seeded by --random-seed (a random one when absent); this one is seeded
 * by the same flag, else 0, so a run repeats; the orders are not Python's.
 */
function shuffle(waiting: WaitingRequest[], random: () => number): void {
  for (let i = waiting.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const a = waiting[i];
    const b = waiting[j];
    if (a === undefined || b === undefined) continue;
    waiting[i] = b;
    waiting[j] = a;
  }
}

/**
 * mulberry32, as lib/kube/seeded-random.ts has it: the simulator may import only the SGLang
 * contract of the shared library (ADR 0021, hack/project-boundaries.test.ts), not the kube kit.
 */
function createRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** SchedulePolicy.priority_sign: 1 when low values run first, -1 otherwise. */
const priorityKey = (l: WaitingRequest, p: PriorityScheduling): number =>
  l.priority * (p.lowValuesFirst ? 1 : -1);

const compareNumbers = (a: number, b: number): number => (a < b ? -1 : a > b ? 1 : 0);

/** Python's str order (code points; rids and routing keys are ASCII in practice). */
const compareStrings = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

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
