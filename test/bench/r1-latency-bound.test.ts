import { describe, expect, it } from 'vitest';
import { computePooledBound, pooledCachedPerRequest } from './pooled-bound.ts';
import { aloneLatency, leastWorkTtft, shortestFirstTtft } from './r1-latency-bound.ts';
import { BLOCK_TOKENS, type TraceRecord } from './replay-trace.ts';

const B = BLOCK_TOKENS;
const req = (hash_ids: number[], output_length = 1, input_length = hash_ids.length * B): TraceRecord => ({
  timestamp: 0,
  input_length,
  output_length,
  hash_ids,
});

describe('pooledCachedPerRequest', () => {
  it('sums to the pooled bound, request by request', () => {
    const records = [req([1, 2]), req([3, 4]), req([1, 2]), req([1, 2, 5]), req([3])];
    for (const cap of [2 * B, 3 * B, 1e9]) {
      const each = pooledCachedPerRequest(records, cap);
      expect(each.reduce((s, x) => s + x, 0)).toBe(computePooledBound(records, cap).cached);
    }
    expect(pooledCachedPerRequest(records, Infinity)).toEqual([0, 0, 2 * B - 1, 2 * B, B - 1]);
  });
});

describe('aloneLatency', () => {
  it('prefills the uncached part, then decodes in a batch of one', () => {
    const t = { prefillTps: 8000, decodeBaseMs: 6, decodePerReqMs: 0.35 };
    const { ttftMs, e2eMs } = aloneLatency([req([1, 2], 101)], [24], t);
    expect(ttftMs[0]).toBeCloseTo(((2 * B - 24) / 8000) * 1000);
    expect(e2eMs[0]).toBeCloseTo((ttftMs[0] as number) + 100 * 6.35);
  });
});

describe('leastWorkTtft', () => {
  it('sends each request to the runtime that frees first, each prefilling FCFS', () => {
    // Two runtimes; three arrive at 0 (1,000, 1,000 and 500 ms), one at 1,800 (100 ms).
    expect(leastWorkTtft([0, 0, 0, 1800], [1000, 1000, 500, 100], 2)).toEqual([1000, 1000, 1500, 100]);
  });
});

describe('shortestFirstTtft', () => {
  it('starts the shortest waiting prefill whenever a runtime frees', () => {
    // One runtime: a long one at 0, then while it runs a 900-ms one and a 100-ms one.
    expect(shortestFirstTtft([0, 10, 20], [1000, 900, 100], 1)).toEqual([1000, 1990, 1080]);
  });

  it('is FCFS when nothing waits, and fills every runtime', () => {
    expect(shortestFirstTtft([0, 0, 0, 1800], [1000, 1000, 500, 100], 2)).toEqual([1000, 1500, 500, 100]);
    expect(shortestFirstTtft([0, 5000], [100, 100], 3)).toEqual([100, 100]);
    // A runtime idle since 0 does not start a request before it arrives.
    expect(shortestFirstTtft([5000, 5000], [100, 300], 2)).toEqual([100, 300]);
  });
});
