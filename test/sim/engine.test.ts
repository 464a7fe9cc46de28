import { describe, expect, it } from 'vitest';
import { VirtualClock } from './clock.ts';
import { Engine, type EngineConfig, type RequestResult } from './engine.ts';
import type { PriorityScheduling } from './schedule-policy.ts';

const base: EngineConfig = {
  maxRunningRequests: 256,
  maxTotalTokens: 100_000,
  maxPrefillTokens: 16_384,
  pageSize: 1,
  radixCache: true,
  hostCapacity: 0,
  writePolicy: 'write_through',
  prefillTps: 8000,
  hostLoadTps: 80_000,
  decodeBaseMs: 6,
  decodePerReqMs: 0.35,
};

function setup(cfg: Partial<EngineConfig> = {}) {
  const clock = new VirtualClock();
  const engine = new Engine({ ...base, ...cfg }, clock);
  const results = new Map<string, RequestResult>();
  let n = 0;
  const submit = (prompt: number[], outputLen = 1, namespace = '') => {
    const rid = `r${n++}`;
    engine.submit(
      { rid, namespace, promptIds: prompt, outputIds: Array.from({ length: outputLen }, (_, i) => 1000 + i) },
      { onTokens: () => undefined, onFinish: (r) => results.set(rid, r) },
    );
    return rid;
  };
  const run = (rid: string): RequestResult => {
    clock.runAll();
    const r = results.get(rid);
    if (!r) throw new Error(`${rid} did not finish`);
    return r;
  };
  return { clock, engine, submit, run, results };
}
const seq = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

describe('Engine timing model', () => {
  it('charges prefill on uncached tokens only: a warm prompt is faster', () => {
    const s = setup();
    const cold = s.run(s.submit(seq(0, 8000)));
    expect(cold.cachedTokens).toBe(0);
    expect(cold.ttftMs).toBeCloseTo(1000, 6); // 8000 tokens at 8000 tok/s
    const warm = s.run(s.submit(seq(0, 8000)));
    expect(warm.cachedTokens).toBe(7999); // the last token is always recomputed
    expect(warm.ttftMs).toBeCloseTo(1000 / 8000, 6);
  });

  it('decode steps cost base + per-request time', () => {
    const s = setup();
    const r = s.run(s.submit(seq(0, 8), 11));
    expect(r.completionTokens).toBe(11);
    expect(r.e2eMs - r.ttftMs).toBeCloseTo(10 * (6 + 0.35), 6);
  });

  it('queues requests beyond max-running-requests (overload)', () => {
    const s = setup({ maxRunningRequests: 2 });
    const rids = [0, 1, 2, 3].map((i) => s.submit(seq(i * 100, 80), 10));
    s.clock.runAll();
    const rs = rids.map((rid) => s.results.get(rid)!);
    expect(rs[0]!.queueMs).toBe(0);
    expect(rs[1]!.queueMs).toBe(0);
    expect(rs[2]!.queueMs).toBeGreaterThan(50);
    expect(rs[3]!.queueMs).toBeGreaterThan(50);
    expect(rs[2]!.ttftMs).toBeGreaterThan(rs[0]!.e2eMs);
  });

  it('queues on KV capacity and evicts cache to admit', () => {
    const s = setup({ maxTotalTokens: 1000 });
    s.run(s.submit(seq(0, 600), 1)); // cached afterwards
    expect(s.engine.tree.sizes().deviceSize).toBe(600);
    const a = s.submit(seq(1000, 500), 50);
    const b = s.submit(seq(2000, 450), 50);
    s.clock.runAll();
    const ra = s.results.get(a)!;
    const rb = s.results.get(b)!;
    expect(rb.queueMs).toBeGreaterThanOrEqual(ra.e2eMs - 1e-9); // b waits until a frees its KV
    expect(s.engine.counters.evictedDeviceTokens).toBeGreaterThan(0);
    expect(s.engine.usedTokens).toBeLessThanOrEqual(1000);
  });

  it('isolates namespaces', () => {
    const s = setup();
    s.run(s.submit(seq(0, 100), 1, 'a'));
    expect(s.run(s.submit(seq(0, 100), 1, 'b')).cachedTokens).toBe(0);
    expect(s.run(s.submit(seq(0, 100), 1, 'a')).cachedTokens).toBe(99);
  });

  it('reuses nothing with the radix cache disabled', () => {
    const s = setup({ radixCache: false });
    s.run(s.submit(seq(0, 100)));
    expect(s.run(s.submit(seq(0, 100))).cachedTokens).toBe(0);
  });

  it('serves host-tier hits at load cost well below recompute', () => {
    const s = setup({ maxTotalTokens: 10_000, hostCapacity: 20_000 });
    s.run(s.submit(seq(0, 8000)));
    s.run(s.submit(seq(100_000, 8000))); // pushes the first prompt to the host tier
    const r = s.run(s.submit(seq(0, 8000)));
    expect(r.cachedHost).toBeGreaterThan(0);
    expect(r.cachedTokens).toBe(7999);
    expect(r.ttftMs).toBeLessThan(1000 / 5); // recompute would take 1000 ms
  });

  it('pages align matches', () => {
    const s = setup({ pageSize: 16 });
    s.run(s.submit(seq(0, 100)));
    expect(s.run(s.submit(seq(0, 100))).cachedTokens).toBe(96);
  });

  it('aborts a waiting request without running it', () => {
    const s = setup({ maxRunningRequests: 1 });
    s.submit(seq(0, 10), 5);
    const b = s.submit(seq(100, 10), 5);
    s.engine.abort(b);
    s.clock.runAll();
    expect(s.results.get(b)!.finish).toBe('abort');
    expect(s.engine.usedTokens).toBe(s.engine.tree.sizes().deviceSize);
  });

  it('reports used tokens as SGLang does: cache no request holds is evictable, not used', () => {
    const s = setup({ maxTotalTokens: 10_000 });
    s.submit(seq(0, 4000), 50);
    s.clock.advanceBy(700); // decoding (prefill takes 500 ms): the prompt's path is locked
    const busy = s.engine.snapshot();
    expect(busy.numRunningReqs).toBe(1);
    expect(busy.numUsedTokens).toBeGreaterThanOrEqual(4000);
    s.clock.runAll();
    const idle = s.engine.snapshot();
    expect(idle.deviceCachedTokens).toBeGreaterThanOrEqual(4000);
    expect(idle).toMatchObject({ numRunningReqs: 0, numUsedTokens: 0, tokenUsage: 0 });
  });

  it('refuses to flush while busy', () => {
    const s = setup();
    s.submit(seq(0, 10), 5);
    expect(s.engine.flushCache()).toBe(false);
    s.clock.runAll();
    expect(s.engine.flushCache()).toBe(true);
    expect(s.engine.tree.sizes().deviceSize).toBe(0);
  });
});

/** A queued request's scheduling fields: its `priority` and its max_new_tokens (lof's key). */
interface Queued {
  readonly priority?: number;
  readonly maxNewTokens?: number;
}

// One 8,000-token prefill runs while 10,000-token prompts queue behind it: a prefill batch holds one
// of them (maxPrefillTokens 16,384), so the queue's order is the order of their first tokens.
function firstTokenOrder(cfg: Partial<EngineConfig>, queued: readonly Queued[]): string[] {
  const clock = new VirtualClock();
  const engine = new Engine({ ...base, maxTotalTokens: 200_000, ...cfg }, clock);
  const firsts: string[] = [];
  const send = (rid: string, prompt: number[], q: Queued) =>
    engine.submit(
      { rid, namespace: '', promptIds: prompt, outputIds: [1], ...q },
      { onTokens: () => firsts.push(rid), onFinish: () => undefined },
    );
  send('running', seq(0, 8000), {});
  clock.advanceBy(1);
  queued.forEach((q, i) => {
    clock.advanceBy(1);
    send(`q${i}`, seq(100_000 * (i + 1), 10_000), q);
  });
  clock.runAll();
  return firsts.filter((rid) => rid !== 'running');
}

describe('Engine priority scheduling (SGLang _sort_by_priority_and_fcfs)', () => {
  const byPriority = (
    priorityScheduling: PriorityScheduling | null,
    priorities: readonly (number | undefined)[],
  ): string[] =>
    firstTokenOrder(
      { priorityScheduling },
      priorities.map((priority) => (priority === undefined ? {} : { priority })),
    );

  it('without it, serves the queue in arrival order whatever the priorities', () => {
    expect(byPriority(null, [1, 5, 3])).toEqual(['q0', 'q1', 'q2']);
  });

  it('serves higher values first by default, arrival order within one value', () => {
    const p = { lowValuesFirst: false, defaultPriority: null };
    expect(byPriority(p, [1, 5, 3])).toEqual(['q1', 'q2', 'q0']);
    expect(byPriority(p, [2, 7, 2])).toEqual(['q1', 'q0', 'q2']);
  });

  it('serves lower values first with --schedule-low-priority-values-first', () => {
    const p = { lowValuesFirst: true, defaultPriority: null };
    expect(byPriority(p, [1, 5, 3])).toEqual(['q0', 'q2', 'q1']);
  });

  it.each([false, true])(
    'puts a request without a priority after every one with one (low values first: %s)',
    (lowValuesFirst) => {
      const p = { lowValuesFirst, defaultPriority: null };
      expect(byPriority(p, [undefined, -1e15, 1e15])).toEqual(
        lowValuesFirst ? ['q1', 'q2', 'q0'] : ['q2', 'q1', 'q0'],
      );
    },
  );

  it('gives a request without a priority --default-priority-value', () => {
    const p = { lowValuesFirst: false, defaultPriority: 4 };
    expect(byPriority(p, [undefined, 3, 5])).toEqual(['q2', 'q0', 'q1']);
  });

  // A long and a short prompt (low values first: the short one ahead) queue behind an 8,000-token prefill.
  function firstTokensOfLongAndShort(prefillMaxRequests: number | null): Map<string, number> {
    const clock = new VirtualClock();
    const priorityScheduling = { lowValuesFirst: true, defaultPriority: null };
    const engine = new Engine({ ...base, prefillMaxRequests, priorityScheduling }, clock);
    const firsts = new Map<string, number>();
    const send = (rid: string, prompt: number[], priority: number) =>
      engine.submit(
        { rid, namespace: '', promptIds: prompt, outputIds: [1], priority },
        { onTokens: (_n, now) => firsts.set(rid, now), onFinish: () => undefined },
      );
    send('running', seq(0, 8000), 0);
    clock.advanceBy(1);
    send('long', seq(100_000, 4000), 9);
    send('short', seq(200_000, 800), 0);
    clock.runAll();
    return firsts;
  }

  it('with --prefill-max-requests 1, prefills the queue one request at a time in its order', () => {
    const firsts = firstTokensOfLongAndShort(1);
    expect(firsts.get('short')).toBeCloseTo(1000 + 100, 6);
    expect(firsts.get('long')).toBeCloseTo(1100 + 500, 6);
  });

  it('still batches behind the head whatever fits the prefill budget', () => {
    const firsts = firstTokensOfLongAndShort(null);
    // Ordered short first, but one batch: the short prompt's first token waits for the long one's prefill.
    expect(firsts.get('short')).toBe(firsts.get('long'));
    expect(firsts.get('short')).toBeCloseTo(1000 + (4800 / 8000) * 1000, 6);
  });
});

describe('Engine --schedule-policy lof (SGLang _sort_by_longest_output)', () => {
  const asked: readonly Queued[] = [
    { priority: 1, maxNewTokens: 5 },
    { priority: 5, maxNewTokens: 4 },
    { priority: 5, maxNewTokens: 9 },
    { priority: 1, maxNewTokens: 20 },
    { priority: 1, maxNewTokens: 9 },
  ];

  // Regression: lof without priority scheduling served the queue in arrival order.
  it('without priority scheduling, serves the longest max_new_tokens first, arrival within a length', () => {
    expect(firstTokenOrder({ schedulePolicy: 'lof' }, asked)).toEqual(['q3', 'q2', 'q4', 'q0', 'q1']);
  });

  it('with priority scheduling, by priority first, then the longest max_new_tokens', () => {
    const priorityScheduling = { lowValuesFirst: false, defaultPriority: null };
    expect(firstTokenOrder({ schedulePolicy: 'lof', priorityScheduling }, asked)).toEqual([
      'q2',
      'q1',
      'q3',
      'q4',
      'q0',
    ]);
  });

  it('sorts with the radix cache disabled too (lof is cache-agnostic)', () => {
    expect(firstTokenOrder({ schedulePolicy: 'lof', radixCache: false }, asked)).toEqual([
      'q3',
      'q2',
      'q4',
      'q0',
      'q1',
    ]);
  });
});

describe("Engine --schedule-policy: the scheduler's state a policy reads", () => {
  interface Arrival {
    readonly rid: string;
    readonly at: number;
    readonly prompt: number[];
    readonly routingKey?: string;
  }

  // 'running' (8,000 tokens, 50 to generate) prefills first; the others arrive at their times.
  function firstTokenOrderOf(cfg: Partial<EngineConfig>, arrivals: readonly Arrival[]): string[] {
    const clock = new VirtualClock();
    const engine = new Engine({ ...base, maxTotalTokens: 200_000, ...cfg }, clock);
    const firsts: string[] = [];
    const send = (rid: string, promptIds: number[], outputs: number, routingKey?: string) =>
      engine.submit(
        { rid, namespace: '', promptIds, outputIds: seq(1, outputs), routingKey },
        { onTokens: (n) => (n === 1 ? firsts.push(rid) : undefined), onFinish: () => undefined },
      );
    send('running', seq(0, 8000), 50, 'k');
    for (const a of arrivals) {
      clock.advanceTo(a.at);
      send(a.rid, a.prompt, 1, a.routingKey);
    }
    clock.runAll();
    return firsts.filter((rid) => rid !== 'running');
  }

  it("lpm: matches the queue against the engine's radix tree", () => {
    const arrivals = [
      { rid: 'a', at: 1, prompt: seq(100_000, 10_000) },
      { rid: 'b', at: 2, prompt: [...seq(0, 8000), ...seq(200_000, 2000)] },
    ];
    expect(firstTokenOrderOf({ schedulePolicy: 'lpm' }, arrivals)).toEqual(['b', 'a']);
  });

  // Scheduler.processed_tokens_counter grows as each prefill batch launches; a request's
  // arrival_processed_tokens is the counter when it queued.
  it('hrrn: ages a request by the prefill tokens computed since it queued', () => {
    const arrivals = [
      { rid: 'z1', at: 1, prompt: seq(100_000, 10_000) },
      { rid: 'z2', at: 2, prompt: seq(200_000, 10_000) },
      { rid: 'a', at: 1001, prompt: seq(300_000, 10_000) },
    ];
    expect(firstTokenOrderOf({ schedulePolicy: 'hrrn' }, arrivals)).toEqual(['z1', 'z2', 'a']);
  });

  it("routing-key: counts the keys of the engine's running requests", () => {
    const arrivals = [
      { rid: 'x', at: 1, prompt: seq(100_000, 10_000), routingKey: 'other' },
      { rid: 'y', at: 2, prompt: seq(200_000, 10_000), routingKey: 'k' },
    ];
    expect(firstTokenOrderOf({ schedulePolicy: 'routing-key' }, arrivals)).toEqual(['y', 'x']);
  });
});
