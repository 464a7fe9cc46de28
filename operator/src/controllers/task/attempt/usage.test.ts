import { describe, expect, it } from 'vitest';
import { computeOpenRouterUsage, computeSglangUsage, toAttemptError } from './usage.ts';

const ctx = { sentInputTokens: 10, maxNewTokens: 8 };
const meta = {
  prompt_tokens: 10,
  completion_tokens: 8,
  cached_tokens: 6,
  cached_tokens_details: { device: 4, host: 2 },
};

describe('computeSglangUsage', () => {
  it('reads prompt, completion, cached and device/host exactly', () => {
    expect(computeSglangUsage(meta, ctx)).toEqual({
      ok: true,
      value: {
        promptTokens: 10,
        completionTokens: 8,
        cachedTokens: 6,
        cachedTokensDevice: 4,
        cachedTokensHost: 2,
      },
    });
  });

  it('accepts a runtime without cache details', () => {
    const { cached_tokens_details: _, ...noDetails } = meta;
    expect(computeSglangUsage(noDetails, ctx)).toEqual({
      ok: true,
      value: { promptTokens: 10, completionTokens: 8, cachedTokens: 6 },
    });
  });

  // SGLang 0.5.23 sends cached_tokens_details null when nothing was cached (seen on the real server).
  it('reads null details with nothing cached as zero on every tier', () => {
    expect(computeSglangUsage({ ...meta, cached_tokens: 0, cached_tokens_details: null }, ctx)).toEqual({
      ok: true,
      value: {
        promptTokens: 10,
        completionTokens: 8,
        cachedTokens: 0,
        cachedTokensDevice: 0,
        cachedTokensHost: 0,
      },
    });
  });

  it('leaves the tiers unknown when details are null but something was cached', () => {
    expect(computeSglangUsage({ ...meta, cached_tokens_details: null }, ctx)).toEqual({
      ok: true,
      value: { promptTokens: 10, completionTokens: 8, cachedTokens: 6 },
    });
  });

  it.each<[string, unknown, string, string]>([
    ['no meta_info', undefined, 'UsageMissing', 'meta_info'],
    ['meta_info not an object', 'x', 'UsageMissing', 'meta_info'],
    [
      'prompt_tokens missing',
      { ...meta, prompt_tokens: undefined },
      'CounterMissing',
      'meta_info.prompt_tokens',
    ],
    ['prompt_tokens null', { ...meta, prompt_tokens: null }, 'CounterMissing', 'meta_info.prompt_tokens'],
    [
      'completion_tokens missing',
      { ...meta, completion_tokens: undefined },
      'CounterMissing',
      'meta_info.completion_tokens',
    ],
    [
      'cached_tokens missing',
      { ...meta, cached_tokens: undefined },
      'CounterMissing',
      'meta_info.cached_tokens',
    ],
    ['negative counter', { ...meta, completion_tokens: -1 }, 'CounterInvalid', 'meta_info.completion_tokens'],
    ['fractional counter', { ...meta, cached_tokens: 1.5 }, 'CounterInvalid', 'meta_info.cached_tokens'],
    ['string counter', { ...meta, prompt_tokens: '10' }, 'CounterInvalid', 'meta_info.prompt_tokens'],
    [
      'prompt differs from tokens sent',
      { ...meta, prompt_tokens: 11 },
      'CountersContradictory',
      'meta_info.prompt_tokens',
    ],
    [
      'cached exceeds prompt',
      { ...meta, cached_tokens: 11, cached_tokens_details: null },
      'CountersContradictory',
      'meta_info.cached_tokens',
    ],
    [
      'completion exceeds max_new_tokens',
      { ...meta, completion_tokens: 9 },
      'CountersContradictory',
      'meta_info.completion_tokens',
    ],
    [
      'device + host differ from cached',
      { ...meta, cached_tokens_details: { device: 4, host: 1 } },
      'CountersContradictory',
      'meta_info.cached_tokens_details',
    ],
  ])('fails closed: %s', (_name, raw, code, path) => {
    const r = computeSglangUsage(raw, ctx);
    expect(r).toEqual({ ok: false, error: expect.objectContaining({ code, path }) });
    if (!r.ok) expect(toAttemptError(r.error).reason).toBe('UsageUnknown');
  });
});

const usage = {
  prompt_tokens: 100,
  completion_tokens: 20,
  total_tokens: 120,
  prompt_tokens_details: { cached_tokens: 30, cache_write_tokens: 50 },
  completion_tokens_details: { reasoning_tokens: 5 },
};
const noWrite = {
  prompt_tokens: 100,
  completion_tokens: 20,
  prompt_tokens_details: { cached_tokens: 0 },
};

describe('computeOpenRouterUsage', () => {
  it('reads totals, cache read and the required write counter', () => {
    expect(computeOpenRouterUsage(usage, { cacheWriteUsage: 'required' })).toEqual({
      ok: true,
      value: {
        promptTokens: 100,
        completionTokens: 20,
        cachedTokens: 30,
        cacheWriteTokens: 50,
        reasoningTokens: 5,
      },
    });
  });

  it('allows an absent write counter under not_applicable, as zero', () => {
    expect(computeOpenRouterUsage(noWrite, { cacheWriteUsage: 'not_applicable' })).toEqual({
      ok: true,
      value: { promptTokens: 100, completionTokens: 20, cachedTokens: 0, cacheWriteTokens: 0 },
    });
  });

  it('allows an explicit zero write under not_applicable', () => {
    const zero = { ...noWrite, prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 } };
    expect(computeOpenRouterUsage(zero, { cacheWriteUsage: 'not_applicable' }).ok).toBe(true);
  });

  it('allows an explicit zero write under required', () => {
    const zero = { ...noWrite, prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 } };
    expect(computeOpenRouterUsage(zero, { cacheWriteUsage: 'required' }).ok).toBe(true);
  });

  it.each<[string, unknown, 'required' | 'not_applicable', string, string]>([
    ['no usage object', undefined, 'required', 'UsageMissing', 'usage'],
    ['usage null', null, 'required', 'UsageMissing', 'usage'],
    [
      'prompt_tokens missing',
      { ...usage, prompt_tokens: undefined },
      'required',
      'CounterMissing',
      'usage.prompt_tokens',
    ],
    [
      'completion_tokens missing',
      { ...usage, completion_tokens: undefined },
      'required',
      'CounterMissing',
      'usage.completion_tokens',
    ],
    [
      'prompt_tokens_details missing',
      { ...usage, prompt_tokens_details: undefined },
      'not_applicable',
      'CounterMissing',
      'usage.prompt_tokens_details.cached_tokens',
    ],
    [
      'cache read missing',
      { ...usage, prompt_tokens_details: { cache_write_tokens: 0 } },
      'required',
      'CounterMissing',
      'usage.prompt_tokens_details.cached_tokens',
    ],
    [
      'write counter missing under required',
      noWrite,
      'required',
      'CounterMissing',
      'usage.prompt_tokens_details.cache_write_tokens',
    ],
    [
      'write counter null under required',
      { ...noWrite, prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: null } },
      'required',
      'CounterMissing',
      'usage.prompt_tokens_details.cache_write_tokens',
    ],
    [
      'nonzero write under not_applicable',
      usage,
      'not_applicable',
      'CacheWriteUnexpected',
      'usage.prompt_tokens_details.cache_write_tokens',
    ],
    [
      'negative counter',
      { ...usage, completion_tokens: -2 },
      'required',
      'CounterInvalid',
      'usage.completion_tokens',
    ],
    [
      'fractional counter',
      { ...usage, prompt_tokens: 100.5 },
      'required',
      'CounterInvalid',
      'usage.prompt_tokens',
    ],
    [
      'string counter',
      { ...usage, prompt_tokens_details: { cached_tokens: '3', cache_write_tokens: 0 } },
      'required',
      'CounterInvalid',
      'usage.prompt_tokens_details.cached_tokens',
    ],
    [
      'cache read exceeds prompt',
      { ...usage, prompt_tokens_details: { cached_tokens: 101, cache_write_tokens: 0 } },
      'required',
      'CountersContradictory',
      'usage.prompt_tokens_details',
    ],
    [
      'read + write exceed prompt (not disjoint)',
      { ...usage, prompt_tokens_details: { cached_tokens: 60, cache_write_tokens: 50 } },
      'required',
      'CountersContradictory',
      'usage.prompt_tokens_details',
    ],
    [
      'total is not prompt + completion',
      { ...usage, total_tokens: 119 },
      'required',
      'CountersContradictory',
      'usage.total_tokens',
    ],
    [
      'reasoning exceeds completion',
      { ...usage, completion_tokens_details: { reasoning_tokens: 21 } },
      'required',
      'CountersContradictory',
      'usage.completion_tokens_details.reasoning_tokens',
    ],
  ])('fails closed: %s', (_name, raw, cacheWriteUsage, code, path) => {
    const r = computeOpenRouterUsage(raw, { cacheWriteUsage });
    expect(r).toEqual({ ok: false, error: expect.objectContaining({ code, path }) });
    if (!r.ok) expect(toAttemptError(r.error)).toMatchObject({ reason: 'UsageUnknown', code });
  });
});
