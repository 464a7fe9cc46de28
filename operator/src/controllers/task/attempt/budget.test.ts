import { describe, expect, it } from 'vitest';
import {
  computeCost,
  computeLedger,
  computeMaxNewTokens,
  formatDecimal,
  parseDecimal,
  planBudgetAfter,
  planBudgetBefore,
  type Budget,
} from './budget.ts';

const prices = {
  inputPerMillion: '2.50',
  outputPerMillion: '10',
  cachedInputPerMillion: '1.25',
  cacheWritePerMillion: '3.125',
};
const budget: Budget = {
  maxInputTokens: 1000,
  maxOutputTokens: 100,
  prices,
  maxCost: '0.01',
  currency: 'USD',
};

describe('decimals', () => {
  it.each([
    ['0', '0'],
    ['1', '1'],
    ['2.50', '2.5'],
    ['0.000000000000000001', '0.000000000000000001'],
    ['123456789012.5', '123456789012.5'],
  ])('round-trips %s', (s, out) => {
    expect(formatDecimal(parseDecimal(s))).toBe(out);
  });

  it('rounds digits past 18 up, so caps never pass by rounding', () => {
    expect(formatDecimal(parseDecimal('0.0000000000000000001'))).toBe('0.000000000000000001');
  });

  it('has no float error: 0.1 + 0.2 is 0.3', () => {
    expect(formatDecimal(parseDecimal('0.1') + parseDecimal('0.2'))).toBe('0.3');
  });
});

describe('computeCost', () => {
  const usage = { promptTokens: 1000, completionTokens: 100, cachedTokens: 200, cacheWriteTokens: 300 };
  it('prices OpenRouter cache read and write at their own rates', () => {
    // 500 x 2.5 + 200 x 1.25 + 300 x 3.125 + 100 x 10 = 1250 + 250 + 937.5 + 1000 = 3437.5 per million
    expect(formatDecimal(computeCost(usage, prices, 'openrouter'))).toBe('0.0034375');
  });
  it('prices every SGLang prompt token as input (KV hits are not a discount)', () => {
    // 1000 x 2.5 + 100 x 10 = 3500 per million
    expect(formatDecimal(computeCost(usage, prices, 'sglang'))).toBe('0.0035');
  });
  it('falls back to the input price without cache prices', () => {
    const plain = { inputPerMillion: '1', outputPerMillion: '1' };
    expect(formatDecimal(computeCost(usage, plain, 'openrouter'))).toBe('0.0011');
  });
});

describe('computeMaxNewTokens', () => {
  it('lowers the output cap to the budget', () => {
    expect(computeMaxNewTokens({ maxOutputTokens: 500, budget })).toBe(100);
    expect(computeMaxNewTokens({ maxOutputTokens: 50, budget })).toBe(50);
    expect(computeMaxNewTokens({ maxOutputTokens: 50, budget: { maxInputTokens: 1, currency: 'USD' } })).toBe(
      50,
    );
  });
});

describe('planBudgetBefore', () => {
  it('passes within caps with an estimate', () => {
    const r = planBudgetBefore({
      budget,
      provider: 'sglang',
      inputTokens: 1000,
      maxNewTokens: 100,
      spent: 0n,
    });
    expect(r.ok && r.value.estimate !== undefined && formatDecimal(r.value.estimate)).toBe('0.0035');
  });
  it.each<[string, Parameters<typeof planBudgetBefore>[0], string, string]>([
    [
      'SGLang input over cap',
      { budget, provider: 'sglang', inputTokens: 1001, maxNewTokens: 1, spent: 0n },
      'InputOverCap',
      'InputOverCap',
    ],
    [
      'OpenRouter reservation over cap',
      { budget, provider: 'openrouter', inputTokens: 1001, maxNewTokens: 1, spent: 0n },
      'InputOverCap',
      'ReservationOverCap',
    ],
    [
      'worst-case cost over cap',
      {
        budget: { ...budget, maxCost: '0.003' },
        provider: 'sglang',
        inputTokens: 1000,
        maxNewTokens: 100,
        spent: 0n,
      },
      'BudgetExceeded',
      'CostEstimateOverCap',
    ],
    [
      'earlier attempts spent the rest',
      { budget, provider: 'sglang', inputTokens: 1000, maxNewTokens: 100, spent: parseDecimal('0.0066') },
      'BudgetExceeded',
      'CostEstimateOverCap',
    ],
  ])('fails: %s', (_n, input, reason, code) => {
    expect(planBudgetBefore(input)).toEqual({ ok: false, error: expect.objectContaining({ reason, code }) });
  });
  it('uses the dearest input price for an OpenRouter estimate', () => {
    const r = planBudgetBefore({
      budget,
      provider: 'openrouter',
      inputTokens: 1000,
      maxNewTokens: 0,
      spent: 0n,
    });
    expect(r.ok && r.value.estimate !== undefined && formatDecimal(r.value.estimate)).toBe('0.003125');
  });
});

describe('planBudgetAfter', () => {
  const usage = { promptTokens: 1000, completionTokens: 100, cachedTokens: 0, cacheWriteTokens: 0 };
  it('passes and returns the cost', () => {
    const r = planBudgetAfter({ budget, provider: 'openrouter', usage, spent: 0n });
    expect(r.ok && r.value.cost !== undefined && formatDecimal(r.value.cost)).toBe('0.0035');
  });
  it.each<[string, Parameters<typeof planBudgetAfter>[0], string, string]>([
    [
      'reservation overrun',
      { budget, provider: 'openrouter', usage, spent: 0n, inputTokenUpperBound: 999 },
      'InputOverCap',
      'ReservationOverrun',
    ],
    [
      'reported input over cap',
      { budget: { ...budget, maxInputTokens: 999 }, provider: 'openrouter', usage, spent: 0n },
      'InputOverCap',
      'ReportedInputOverCap',
    ],
    [
      'output over cap',
      { budget: { ...budget, maxOutputTokens: 99 }, provider: 'sglang', usage, spent: 0n },
      'BudgetExceeded',
      'OutputOverCap',
    ],
    [
      'cost over cap',
      { budget: { ...budget, maxCost: '0.0034' }, provider: 'sglang', usage, spent: 0n },
      'BudgetExceeded',
      'CostOverCap',
    ],
  ])('fails: %s', (_n, input, reason, code) => {
    expect(planBudgetAfter(input)).toEqual({ ok: false, error: expect.objectContaining({ reason, code }) });
  });
});

describe('computeLedger', () => {
  it('sums attempts and prices them', () => {
    const l = computeLedger(
      [
        {
          promptTokens: 10,
          completionTokens: 5,
          cachedTokens: 0,
          cachedTokensDevice: 0,
          cachedTokensHost: 0,
        },
        {
          promptTokens: 20,
          completionTokens: 5,
          cachedTokens: 8,
          cachedTokensDevice: 6,
          cachedTokensHost: 2,
        },
      ],
      { inputPerMillion: '1', outputPerMillion: '2' },
      'sglang',
    );
    expect(l.usage).toEqual({
      promptTokens: 30,
      completionTokens: 10,
      cachedTokens: 8,
      cachedTokensDevice: 6,
      cachedTokensHost: 2,
      newGeneration: true,
    });
    expect(l.cost).toBe('0.00005');
  });
  it('records no generation and no cost without attempts', () => {
    expect(computeLedger([], undefined, 'sglang')).toEqual({
      usage: { promptTokens: 0, completionTokens: 0, cachedTokens: 0, newGeneration: false },
      spent: 0n,
    });
  });
});
