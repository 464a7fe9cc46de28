import { describe, expect, it } from 'vitest';
import { RadixTree } from './radix-tree.ts';
import {
  WaitingQueueOrder,
  type SchedulePolicyConfig,
  type SchedulerView,
  type WaitingRequest,
} from './schedule-policy.ts';

const tokens = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

interface Queued {
  readonly prompt: readonly number[];
  readonly namespace?: string;
  readonly routingKey?: string;
  readonly arrivalProcessedTokens?: number;
}

/** Hand-built waiting requests rid r0, r1, ... in queue order. */
const queueOf = (queued: readonly Queued[]): WaitingRequest[] =>
  queued.map((q, i) => ({
    spec: {
      rid: `r${i}`,
      namespace: q.namespace ?? '',
      promptIds: q.prompt,
      outputIds: [1],
      routingKey: q.routingKey,
    },
    arrivedAt: i,
    priority: 0,
    arrivalProcessedTokens: q.arrivalProcessedTokens ?? 0,
  }));

const newTree = (): RadixTree => new RadixTree({ pageSize: 1, hostCapacity: 0, writePolicy: 'write_back' });

function orderOf(
  cfg: SchedulePolicyConfig,
  queue: WaitingRequest[],
  view: Partial<SchedulerView> = {},
): string[] {
  new WaitingQueueOrder(cfg).order(queue, { tree: null, running: [], processedTokens: 0, now: 0, ...view });
  return queue.map((r) => r.spec.rid);
}

describe('lpm (SchedulePolicy._sort_by_longest_prefix)', () => {
  it('serves the longest cached prefix first, ties in their queue order', () => {
    const tree = newTree();
    tree.insert('', tokens(0, 100), 0);
    const queue = queueOf([
      { prompt: tokens(1000, 50) },
      { prompt: [...tokens(0, 40), ...tokens(2000, 10)] },
      { prompt: [...tokens(0, 80), ...tokens(3000, 10)] },
      { prompt: tokens(4000, 50) },
    ]);
    expect(orderOf({ schedulePolicy: 'lpm' }, queue, { tree })).toEqual(['r2', 'r1', 'r0', 'r3']);
  });

  it('counts at most the prompt - 1 tokens, as the last one is always computed', () => {
    const tree = newTree();
    tree.insert('', tokens(0, 100), 0);
    // r0: 59 of 70 cached; r1: the whole 60-token prompt cached (59 counted). A tie: queue order.
    const queue = queueOf([{ prompt: [...tokens(0, 59), ...tokens(500, 11)] }, { prompt: tokens(0, 60) }]);
    expect(orderOf({ schedulePolicy: 'lpm' }, queue, { tree })).toEqual(['r0', 'r1']);
  });

  // _compute_prefix_matches' in-batch prefix caching: of the uncached requests sharing 32+ tokens,
  // only the first is served ahead; the others wait for it to cache their prefix.
  it('holds back a request whose uncached prefix an earlier waiting request shares', () => {
    const shared = tokens(7000, 64);
    const queue = queueOf([
      { prompt: [...shared, ...tokens(100, 10)] },
      { prompt: [...shared, ...tokens(200, 10)] },
      { prompt: tokens(300, 40) },
    ]);
    expect(orderOf({ schedulePolicy: 'lpm' }, queue, { tree: newTree() })).toEqual(['r0', 'r2', 'r1']);
  });

  it('leaves a queue of more than 128 as it is (_determine_active_policy)', () => {
    const tree = newTree();
    tree.insert('', tokens(0, 100), 0);
    const queued = Array.from({ length: 129 }, (_, i) => ({ prompt: tokens(10_000 * (i + 1), 50) }));
    const queue = queueOf([...queued.slice(1), { prompt: tokens(0, 100) }]);
    const before = queue.map((r) => r.spec.rid);
    expect(orderOf({ schedulePolicy: 'lpm' }, queue, { tree })).toEqual(before);
    // One fewer and it sorts: the cached prompt goes first.
    expect(orderOf({ schedulePolicy: 'lpm' }, queue.slice(1), { tree })[0]).toBe('r128');
  });
});

describe('hrrn (SchedulePolicy._sort_by_hrrn, token-based aging)', () => {
  it('serves the highest ratio of prefill tokens waited to tokens to prefill first', () => {
    const tree = newTree();
    tree.insert('', tokens(0, 900), 0);
    const queue = queueOf([
      // waited 1,000 tokens for 1,000 uncached: 1
      { prompt: tokens(10_000, 1000), arrivalProcessedTokens: 0 },
      // waited 500 for 100: 5
      { prompt: tokens(20_000, 100), arrivalProcessedTokens: 500 },
      // waited 1,000 for 100 (900 cached): 10
      { prompt: [...tokens(0, 900), ...tokens(30_000, 100)], arrivalProcessedTokens: 0 },
    ]);
    expect(orderOf({ schedulePolicy: 'hrrn' }, queue, { tree, processedTokens: 1000 })).toEqual([
      'r2',
      'r1',
      'r0',
    ]);
  });

  it('breaks a tie by rid, not by arrival', () => {
    const queue = queueOf([{ prompt: tokens(10_000, 100) }, { prompt: tokens(20_000, 100) }]);
    queue.reverse();
    expect(orderOf({ schedulePolicy: 'hrrn' }, queue, { tree: newTree(), processedTokens: 100 })).toEqual([
      'r0',
      'r1',
    ]);
  });
});

describe('dfs-weight (SchedulePolicy._sort_by_dfs_weight)', () => {
  it('walks the tree depth-first, heavier subtrees first, a node after its subtree', () => {
    const tree = newTree();
    const p = tokens(0, 40);
    tree.insert('', [...p, ...tokens(100, 40)], 0);
    tree.insert('', [...p, ...tokens(200, 40)], 0);
    const queue = queueOf([
      { prompt: [...p, ...tokens(100, 40), 9] }, // ends at the first branch
      { prompt: tokens(5000, 10) }, // matches nothing: the root's
      { prompt: [...p, ...tokens(200, 40), 9] }, // ends at the second branch's tail
      { prompt: [...p, ...tokens(200, 20), 9] }, // splits the second branch, ends at its head
    ]);
    expect(orderOf({ schedulePolicy: 'dfs-weight' }, queue, { tree })).toEqual(['r2', 'r3', 'r0', 'r1']);
  });

  // SGLang keeps one root for every cache_salt/extra_key: equal subtrees go in its children's order.
  it("orders equal subtrees of different namespaces as the one root's children were inserted", () => {
    const tree = newTree();
    tree.insert('a', tokens(0, 40), 0);
    tree.insert('b', tokens(0, 40), 0);
    tree.insert('a', tokens(1000, 40), 0);
    const queue = queueOf([
      { prompt: [...tokens(1000, 40), 9], namespace: 'a' },
      { prompt: [...tokens(0, 40), 9], namespace: 'b' },
    ]);
    expect(orderOf({ schedulePolicy: 'dfs-weight' }, queue, { tree })).toEqual(['r1', 'r0']);
  });
});

describe('routing-key (SchedulePolicy._sort_by_routing_key)', () => {
  const running = ['k1', 'k1', 'k2', undefined].map((routingKey) => ({ spec: { routingKey } }));

  it("serves the running batch's most frequent keys first, then the rest by key", () => {
    const queue = queueOf([
      { prompt: [1] },
      { prompt: [2], routingKey: 'k3' },
      { prompt: [3], routingKey: 'k2' },
      { prompt: [4], routingKey: 'k1' },
      { prompt: [5], routingKey: 'k2' },
      { prompt: [6], routingKey: 'k0' },
    ]);
    expect(orderOf({ schedulePolicy: 'routing-key' }, queue, { running })).toEqual([
      'r3',
      'r2',
      'r4',
      'r0',
      'r5',
      'r1',
    ]);
  });

  it('leaves the queue as it is when no running request has a key', () => {
    const queue = queueOf([
      { prompt: [1], routingKey: 'k2' },
      { prompt: [2], routingKey: 'k1' },
    ]);
    expect(orderOf({ schedulePolicy: 'routing-key' }, queue, { running: [] })).toEqual(['r0', 'r1']);
  });
});

describe('random (SchedulePolicy._sort_randomly)', () => {
  const ten = (): WaitingRequest[] => queueOf(Array.from({ length: 10 }, (_, i) => ({ prompt: [i] })));

  it('shuffles the queue, the same way for the same seed', () => {
    const a = orderOf({ schedulePolicy: 'random', randomSeed: 1 }, ten());
    expect(a).toEqual(orderOf({ schedulePolicy: 'random', randomSeed: 1 }, ten()));
    expect(a).not.toEqual(ten().map((r) => r.spec.rid));
    expect([...a].sort()).toEqual(
      ten()
        .map((r) => r.spec.rid)
        .sort(),
    );
    expect(orderOf({ schedulePolicy: 'random', randomSeed: 2 }, ten())).not.toEqual(a);
  });

  it('shuffles anew at each pass', () => {
    const order = new WaitingQueueOrder({ schedulePolicy: 'random', randomSeed: 1 });
    const view = { tree: null, running: [], processedTokens: 0, now: 0 };
    const first = ten();
    order.order(first, view);
    const second = ten();
    order.order(second, view);
    expect(second.map((r) => r.spec.rid)).not.toEqual(first.map((r) => r.spec.rid));
  });
});

describe('fcfs', () => {
  it('leaves the queue as it is without priority scheduling', () => {
    const queue = queueOf([{ prompt: [1] }, { prompt: [2] }]).reverse();
    expect(orderOf({}, queue)).toEqual(['r1', 'r0']);
  });
});
