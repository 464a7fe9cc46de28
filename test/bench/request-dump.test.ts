import { describe, expect, it } from 'vitest';
import {
  compareRequests,
  findBatches,
  findOverLine,
  groupSlower,
  medianCrossers,
  parseDump,
  summarizeViews,
  viewGapOf,
  type DumpLine,
} from './request-dump.ts';

const idle = { cached: 0, backlog: 0, inFlight: 0 };
const quiet = { backlog: 0, inFlight: 0, waiting: 0, running: 0 };

/** A request sent at `sentMs` to `runtime`, queued `queue` ms, prefilled until `firstTokenMs`. */
function line(
  i: number,
  runtime: string,
  t: { sentMs?: number; queue?: number; firstTokenMs: number; holdMs?: number },
  tokens: { prompt?: number; cached?: number } = {},
): DumpLine {
  const sentMs = t.sentMs ?? 0;
  const holdMs = t.holdMs ?? 0;
  return {
    i,
    id: String(i),
    arrivalMs: sentMs - holdMs,
    replica: 0,
    runtime,
    runtimes: ['w0', 'w1'],
    knew: [idle, idle],
    truth: [quiet, quiet],
    holdMs,
    sentMs,
    prefillStartMs: sentMs + (t.queue ?? 0),
    firstTokenMs: t.firstTokenMs,
    promptTokens: tokens.prompt ?? 1000,
    cachedTokens: tokens.cached ?? 0,
    outputTokens: 10,
    ttftMs: t.firstTokenMs - sentMs + holdMs,
    e2eMs: t.firstTokenMs - sentMs + holdMs + 100,
  };
}

describe('parseDump', () => {
  it('reads one checked line a request and names the first bad line', () => {
    const good = JSON.stringify(line(0, 'w0', { firstTokenMs: 100 }));
    const read = parseDump(`${good}\n\n${good}\n`);
    expect(read.ok && read.lines.length).toBe(2);
    expect(parseDump(`${good}\n{"i":1}\n`)).toMatchObject({
      ok: false,
      error: expect.stringContaining('line 2'),
    });
    expect(parseDump('nope')).toEqual({ ok: false, error: 'line 1: not JSON' });
  });
});

describe('findBatches', () => {
  it("groups one runtime's requests whose first tokens came together, not another runtime's", () => {
    const batches = findBatches([
      line(0, 'w0', { firstTokenMs: 200 }, { prompt: 1000, cached: 200 }),
      line(1, 'w0', { sentMs: 50, firstTokenMs: 200 }, { prompt: 500 }),
      line(2, 'w1', { firstTokenMs: 200 }),
      line(3, 'w0', { sentMs: 210, firstTokenMs: 300 }),
    ]);
    expect(batches.get(0)).toEqual({ size: 2, uncached: 1300, ms: 150, members: [0, 1] });
    expect(batches.get(2)?.size).toBe(1);
    expect(batches.get(3)?.members).toEqual([3]);
  });
});

describe('compareRequests', () => {
  it("splits a slower TTFT into hold, queue and prefill step, and names B's new batch-mates", () => {
    const a = [
      line(0, 'w0', { firstTokenMs: 100 }),
      line(1, 'w1', { firstTokenMs: 400 }, { prompt: 4000 }),
      line(2, 'w1', { sentMs: 10, firstTokenMs: 400 }, { prompt: 300 }),
    ];
    const b = [
      // Held 20 ms, then queued 30 ms behind a prefill, then prefilled with two long ones.
      line(0, 'w1', { sentMs: 20, holdMs: 20, queue: 30, firstTokenMs: 500 }),
      line(1, 'w1', { firstTokenMs: 500 }, { prompt: 4000 }),
      line(2, 'w1', { sentMs: 10, firstTokenMs: 500 }, { prompt: 300 }),
    ];
    const [d0] = compareRequests(a, b);
    expect(d0).toMatchObject({
      i: 0,
      delta: 400,
      holdDelta: 20,
      queueDelta: 30,
      batchDelta: 350,
      part: 'batch',
      otherRuntime: true,
      lostHit: 0,
      batchSizeA: 1,
      batchSizeB: 3,
      newMates: [1, 2],
      sameInstantMates: 0,
    });
  });

  it('counts the batch-mates that reached another replica at the same instant', () => {
    const a = [0, 1, 2].map((i) => line(i, `w${i}`, { firstTokenMs: 100 }));
    // 0 and 1 arrive together at replicas 0 and 1 and pile on w0; 2 arrives there later, same replica as 0.
    const b = [
      line(0, 'w0', { firstTokenMs: 300 }),
      { ...line(1, 'w0', { firstTokenMs: 300 }), replica: 1 },
      { ...line(2, 'w0', { firstTokenMs: 300 }), arrivalMs: 5 },
    ];
    const [d0, d1, d2] = compareRequests(a, b);
    expect([d0?.sameInstantMates, d1?.sameInstantMates, d2?.sameInstantMates]).toEqual([1, 1, 0]);
  });

  it('names a lower hit and a longer queue wait on the same runtime', () => {
    const a = [line(0, 'w0', { firstTokenMs: 100 }, { cached: 500 })];
    const b = [line(0, 'w0', { queue: 300, firstTokenMs: 450 }, { cached: 400 })];
    const [d] = compareRequests(a, b);
    expect(d).toMatchObject({ part: 'queue', otherRuntime: false, lostHit: 100, newMates: [] });
  });
});

describe('groupSlower', () => {
  it('groups the requests slower by more than the floor by cause, most added time first', () => {
    const a = [0, 1, 2, 3].map((i) => line(i, 'w0', { firstTokenMs: 100 }));
    const b = [
      line(0, 'w1', { firstTokenMs: 300 }),
      line(1, 'w0', { queue: 250, firstTokenMs: 400 }),
      line(2, 'w0', { queue: 50, firstTokenMs: 160 }),
      line(3, 'w0', { firstTokenMs: 100.5 }),
    ];
    expect(groupSlower(compareRequests(a, b), 1)).toEqual([
      { cause: 'same runtime, same hit, queue', count: 2, addedMs: 360 },
      { cause: 'other runtime, same hit, batch', count: 1, addedMs: 200 },
    ]);
  });
});

describe('medianCrossers', () => {
  it("finds the requests that went over A's median in B and those that came under it", () => {
    const ttftA = [100, 200, 300, 400, 500];
    const ttftB = [100, 350, 250, 400, 500];
    const a = ttftA.map((t, i) => line(i, 'w0', { firstTokenMs: t }));
    const b = ttftB.map((t, i) => line(i, 'w0', { firstTokenMs: t }));
    const m = medianCrossers(compareRequests(a, b));
    expect([m.medianA, m.medianB]).toEqual([300, 350]);
    expect(m.up.map((d) => d.i)).toEqual([1]);
    expect(m.down).toEqual([]);
  });
});

describe('viewGapOf', () => {
  it('tells the backlog the replica missed and whether the true backlog would have moved the pick', () => {
    const l: DumpLine = {
      ...line(0, 'w0', { firstTokenMs: 100 }),
      cost: [1000, 1500],
      knew: [idle, { ...idle, backlog: 500 }],
      truth: [
        { ...quiet, backlog: 2000, inFlight: 2 },
        { ...quiet, backlog: 500, inFlight: 1 },
      ],
    };
    expect(viewGapOf(l)).toEqual({ unseenBacklog: 2000, unseenInFlight: 2, cheapestByTruth: false });
    expect(viewGapOf({ ...l, truth: [quiet, quiet] }).cheapestByTruth).toBe(true);
  });
});

describe('summarizeViews', () => {
  it('counts the picks that missed backlog, and those made at an instant another request arrived at', () => {
    const blind: DumpLine = {
      ...line(1, 'w0', { firstTokenMs: 100 }),
      cost: [1000, 1500],
      truth: [{ ...quiet, backlog: 2000, inFlight: 1 }, quiet],
    };
    const lines = [
      line(0, 'w0', { firstTokenMs: 100 }),
      // Arrived with 0, at another replica: 0's pick was not in its view.
      { ...blind, replica: 1 },
      // Arrived later, knowing nothing of a backlog that did not change the pick.
      { ...line(2, 'w1', { firstTokenMs: 200 }), arrivalMs: 50, truth: [quiet, { ...quiet, backlog: 10 }] },
    ];
    expect(summarizeViews(lines)).toEqual({
      decisions: 3,
      sameInstant: 1,
      unseen: 2,
      unseenSameInstant: 1,
      misPicks: 1,
      misPicksSameInstant: 1,
    });
  });
});

describe('findOverLine', () => {
  it('tells the requests over the line by cause: too long to prefill alone, a waiting hit, a miss', () => {
    // 8 tokens a ms, a 100 ms line: 800 uncached tokens or more are over it alone.
    const lines = [
      line(0, 'w0', { queue: 5, firstTokenMs: 130 }, { prompt: 1000, cached: 0 }),
      line(1, 'w0', { queue: 150, firstTokenMs: 160 }, { prompt: 1000, cached: 900 }),
      // Some of it cached, under half: a miss.
      line(2, 'w1', { queue: 80, firstTokenMs: 150 }, { prompt: 700, cached: 100 }),
      line(3, 'w1', { queue: 0, firstTokenMs: 90 }, { prompt: 600, cached: 0 }),
    ];
    expect(findOverLine(lines, 100, 8).map((o) => [o.i, o.cause, o.queueMs])).toEqual([
      [1, 'hit', 150],
      [2, 'miss', 80],
      [0, 'too-long', 5],
    ]);
  });
});
