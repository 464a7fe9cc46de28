import { describe, expect, it } from 'vitest';
import { generateSharedDocTrace, judgeL3Goals } from './bench-hicache-l3.ts';
import { computePooledBound } from './pooled-bound.ts';

const opts = { docs: 8, docBlocks: 4, requests: 200, meanGapMs: 100, outputTokens: 16, seed: 1 };

describe('the long-shared-document workload', () => {
  it('is the same for a seed; each request is one whole document and a question of its own', () => {
    const a = generateSharedDocTrace(opts);
    expect(generateSharedDocTrace(opts)).toEqual(a);
    const questions = new Set<number>();
    for (const r of a) {
      const doc = (r.hash_ids[0] ?? 0) / 4;
      expect(r.hash_ids.slice(0, 4)).toEqual([0, 1, 2, 3].map((b) => doc * 4 + b));
      questions.add(r.hash_ids[4] ?? -1);
      expect(r.input_length).toBeGreaterThan(4 * 512);
    }
    expect(questions.size).toBe(200);
    expect(new Set(a.map((r) => r.hash_ids[0])).size).toBe(8);
  });

  it('gains from L3 only where the pooled tiers cannot hold every document', () => {
    const trace = generateSharedDocTrace(opts);
    const unbounded = computePooledBound(trace, Number.MAX_SAFE_INTEGER, 16).hitRate;
    expect(computePooledBound(trace, 3 * 2048, 16).hitRate).toBeLessThan(unbounded * 0.8);
  });
});

describe('the hicache-l3 goals', () => {
  it('hold the L3 row to 0.8 of the TTFT without L3 and 0.98 of the bound', () => {
    const ok = judgeL3Goals({
      'cache-aware+l3': { ttft_p50_ms: 80, hit_rate_vs_bound: 0.99 },
      'cache-aware': { ttft_p50_ms: 100 },
    });
    expect(ok.map((g) => g.met)).toEqual([true, true]);
    const bad = judgeL3Goals({
      'cache-aware+l3': { ttft_p50_ms: 81, hit_rate_vs_bound: 0.97 },
      'cache-aware': { ttft_p50_ms: 100 },
    });
    expect(bad.map((g) => g.met)).toEqual([false, false]);
    expect(judgeL3Goals({}).map((g) => g.met)).toEqual([null, null]);
  });
});
