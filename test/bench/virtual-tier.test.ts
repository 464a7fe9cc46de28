import { describe, expect, it } from 'vitest';
import { RoutingSettings } from '#api';
import type { TraceRecord } from './replay-trace.ts';
import { runTier, type TierRunOptions } from './virtual-tier.ts';

/** `bursts` bursts of `size` prompts no runtime holds, all of a burst at one instant, 10 s apart. */
function missBursts(bursts: number, size: number): TraceRecord[] {
  return Array.from({ length: bursts * size }, (_, i) => ({
    timestamp: Math.floor(i / size) * 10_000,
    input_length: 2048,
    output_length: 4,
    hash_ids: [4 * i + 1, 4 * i + 2, 4 * i + 3, 4 * i + 4],
  }));
}

/** A cache-aware tier of `replicas` on four engines, the engines' and refresh's bench figures. */
function tierOptions(
  records: readonly TraceRecord[],
  replicas: number,
  extra: Partial<TierRunOptions> = {},
): TierRunOptions {
  return {
    records,
    stretch: 1,
    workers: 4,
    maxTotalTokens: 200_000,
    prefillTps: 8000,
    replicas,
    router: 'cache-aware',
    routing: RoutingSettings.parse({ policy: 'cache-aware' }),
    runtimeLoadMs: 30,
    ...extra,
  };
}

describe('runTier', () => {
  it('spreads a burst of misses over every runtime with two replicas sharing load at one instant', () => {
    const records = missBursts(8, 4);
    const res = runTier(tierOptions(records, 2, { exchangeMs: 20 }));
    const worker = new Map(res.records.map((r) => [r.index, r.worker]));
    // The first bursts teach each replica that its picks come in bursts; the rest must not pile up.
    for (let b = 4; b < 8; b++) {
      const used = new Set([0, 1, 2, 3].map((k) => worker.get(4 * b + k)));
      expect(used.size, `burst ${b}`).toBe(4);
    }
  });

  it("keeps each link's messages in order when a later one draws a shorter delay", () => {
    // One message in three is slow (a stall): unordered, an older share lands last and sticks.
    let n = 0;
    const res = runTier(tierOptions(missBursts(6, 4), 3, { exchangeMs: () => (n++ % 3 === 0 ? 50 : 0.1) }));
    expect(res.records).toHaveLength(24);
    expect(res.unsettledViews).toBe(0);
  });

  it('draws again under another salt: picks in transit split differently, one replica alone does not', () => {
    // Misses 5 ms apart, under the exchange's 20 ms: each replica's pick meets the peers' in transit.
    const records = Array.from({ length: 48 }, (_, i) => ({
      timestamp: i * 5,
      input_length: 2048,
      output_length: 4,
      hash_ids: [4 * i + 1, 4 * i + 2, 4 * i + 3, 4 * i + 4],
    }));
    const workersOf = (replicas: number, drawSalt?: string): string[] => {
      const res = runTier(
        tierOptions(records, replicas, { exchangeMs: 20, ...(drawSalt === undefined ? {} : { drawSalt }) }),
      );
      return [...res.records].sort((a, b) => a.index - b.index).map((r) => r.worker);
    };
    expect(workersOf(3, 'a')).not.toEqual(workersOf(3, 'b'));
    expect(workersOf(1, 'a')).toEqual(workersOf(1));
  });

  it('behind the gateway queue, prefills one request at a time on a runtime, the shortest held first', () => {
    // A long prompt, then while it prefills a middling one and a short one, on one runtime.
    let id = 0;
    const prompt = (at: number, blocks: number): TraceRecord => ({
      timestamp: at,
      input_length: blocks * 512,
      output_length: 4,
      hash_ids: Array.from({ length: blocks }, () => ++id),
    });
    const records = [prompt(0, 16), prompt(10, 8), prompt(20, 2)];
    const ttft = (gatewayQueue: boolean): number[] =>
      runTier(tierOptions(records, 1, { workers: 1, gatewayQueue }))
        .records.sort((a, b) => a.index - b.index)
        .map((r) => r.ttftMs);
    // The runtime batches the two that queued: the short one waits for the middling one's prefill.
    const batched = ttft(false);
    expect(batched[2]).toBeCloseTo((batched[1] as number) - 10, 0);
    // Held and released shortest first: the short one's prefill (about 130 ms) follows the long one's.
    const queued = ttft(true);
    expect(queued[2]).toBeLessThan((batched[2] as number) - 400);
    expect(queued[1]).toBeGreaterThan(queued[2] as number);
  });

  it("dumps each request as routed and timed, what the replica knew, and changes none of the run's figures", () => {
    const records = missBursts(4, 4);
    const plain = runTier(tierOptions(records, 2, { exchangeMs: 20 }));
    const dumped = runTier(tierOptions(records, 2, { exchangeMs: 20, dumpRequests: true }));
    expect(plain.dump).toBeUndefined();
    expect(dumped.records).toEqual(plain.records);
    const lines = dumped.dump ?? [];
    expect(lines.map((l) => l.i)).toEqual(records.map((_r, i) => i));
    const worker = new Map(plain.records.map((r) => [r.index, r]));
    for (const l of lines) {
      const rec = worker.get(l.i);
      expect(l.runtime).toBe(rec?.worker);
      expect(l.replica).toBe(l.i % 2);
      expect(l.ttftMs).toBeCloseTo(rec?.ttftMs ?? NaN, 6);
      expect(l.ttftMs).toBeCloseTo(l.firstTokenMs - l.sentMs + l.holdMs, 6);
      expect(l.prefillStartMs).toBeGreaterThanOrEqual(l.sentMs);
      expect(l.reason).toMatch(/cheapest|spill|in-transit/);
      expect(l.knew).toHaveLength(4);
      expect(l.cost).toHaveLength(4);
    }
    // The second of a burst at one replica knows its own first pick's backlog at once.
    const second = lines[2] as (typeof lines)[number];
    const first = lines[0] as (typeof lines)[number];
    const w = second.runtimes.indexOf(first.runtime);
    expect(second.knew[w]?.backlog).toBeGreaterThan(0);
    expect(second.truth[w]?.backlog).toBeGreaterThanOrEqual(second.knew[w]?.backlog ?? 0);
  });

  it('sends requests to replicas drawn at random when asked, the same for a salt, not i mod R', () => {
    const records = missBursts(4, 4);
    const replicasOf = (drawSalt?: string) =>
      (
        runTier(
          tierOptions(records, 3, {
            exchangeMs: 20,
            dumpRequests: true,
            assign: 'random',
            ...(drawSalt === undefined ? {} : { drawSalt }),
          }),
        ).dump ?? []
      ).map((l) => l.replica);
    const drawn = replicasOf();
    expect(drawn).toHaveLength(records.length);
    expect(drawn).not.toEqual(records.map((_r, i) => i % 3));
    expect(new Set(drawn)).toEqual(new Set([0, 1, 2]));
    expect(replicasOf()).toEqual(drawn);
    expect(replicasOf('s1')).not.toEqual(drawn);
  });
});
