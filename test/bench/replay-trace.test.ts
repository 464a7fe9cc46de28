import { describe, expect, it } from 'vitest';
import { encode } from '../sim/tokenizer.ts';
import {
  BLOCK_TOKENS,
  buildPromptIds,
  buildPromptText,
  computeBound,
  parseTrace,
  type TraceRecord,
} from './replay-trace.ts';
import { computeSummary, percentile, type RequestRecord } from './replay-stats.ts';

const rec = (hash_ids: number[], input_length: number, timestamp = 0): TraceRecord => ({
  timestamp,
  input_length,
  output_length: 10,
  hash_ids,
});

describe('trace → prompts', () => {
  it('turns equal hash ids into equal 512-token prefixes and cuts the last block', () => {
    const a = buildPromptIds(rec([1, 2, 3], 1100));
    const b = buildPromptIds(rec([1, 2, 9], 1300));
    expect(a).toHaveLength(1100);
    expect(b).toHaveLength(1300);
    expect(a.slice(0, 2 * BLOCK_TOKENS)).toEqual(b.slice(0, 2 * BLOCK_TOKENS));
    expect(a[2 * BLOCK_TOKENS]).not.toBe(b[2 * BLOCK_TOKENS]);
    expect(buildPromptIds(rec([7], 512))).not.toEqual(buildPromptIds(rec([8], 512)));
  });

  it('renders text the simulator tokenizes back to exactly the same ids (one word a token)', () => {
    const r = rec([4, 5], 700);
    expect(encode(buildPromptText(r))).toEqual(buildPromptIds(r));
  });

  it('parses JSONL with skip and limit and reports bad lines', () => {
    const text = [rec([1], 10, 0), rec([2], 10, 5), rec([3], 10, 9)].map((r) => JSON.stringify(r)).join('\n');
    const p = parseTrace(text, 1, 1);
    expect(p).toEqual({ ok: true, value: [rec([2], 10, 5)] });
    expect(parseTrace('{"timestamp":1}')).toMatchObject({ ok: false });
  });
});

describe('infinite-cache bound', () => {
  it('counts leading blocks seen before, prefix-wise, at most input - 1', () => {
    const b = computeBound([rec([1, 2], 1024), rec([1, 2, 3], 1500), rec([9, 2], 1024), rec([1, 2], 1024)]);
    // r2 reuses 1024; r3 nothing (block 2 under a different parent); r4 reuses 1023.
    expect(b.cached).toBe(1024 + 0 + 1023);
    expect(b.prompt).toBe(1024 + 1500 + 1024 + 1024);
  });

  it('does not reuse a partial block for a longer one', () => {
    expect(computeBound([rec([1], 100), rec([1], 300)]).cached).toBe(0);
    expect(computeBound([rec([1], 300), rec([1], 100)]).cached).toBe(99);
  });
});

describe('summary', () => {
  const r = (i: number, worker: string, ttft: number, cached: number): RequestRecord => ({
    index: i,
    ok: true,
    status: 200,
    worker,
    sentAtMs: 0,
    ttftMs: ttft,
    e2eMs: ttft * 2,
    promptTokens: 100,
    cachedTokens: cached,
    completionTokens: 5,
  });

  it('computes hit rate, ratio to bound, percentiles, per-worker counts and imbalance', () => {
    const s = computeSummary(
      [r(0, 'a', 10, 0), r(1, 'a', 20, 50), r(2, 'b', 30, 50), r(3, 'a', 40, 100)],
      0.5,
      2000,
      10,
    );
    expect(s).toMatchObject({
      requests: 4,
      ok: 4,
      hit_rate: 0.5,
      bound: 0.5,
      hit_rate_vs_bound: 1,
      ttft_p50_ms: 20,
      ttft_p99_ms: 40,
      throughput_rps: 2,
      per_worker: { a: 3, b: 1 },
      imbalance: 1.5,
    });
  });

  it.each([
    [[], 50, 0],
    [[5], 99, 5],
    [[1, 2, 3, 4], 50, 2],
    [[1, 2, 3, 4], 100, 4],
  ])('percentile(%j, %i) = %i', (values, p, want) => {
    expect(percentile(values, p)).toBe(want);
  });
});
