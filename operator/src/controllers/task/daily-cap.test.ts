import { describe, expect, it } from 'vitest';
import { parseDecimal, type Budget } from './attempt/budget.ts';
import {
  addToLedger,
  computeLedgerKey,
  computeReservation,
  computeSettlement,
  parseDailyCap,
  planReservation,
  readSpent,
} from './daily-cap.ts';
import type { GenerateCall } from './attempt/call.ts';
import type { TaskTarget } from './attempt/target.ts';
import { OPENROUTER_IDENTITY } from '../../../../test/support/operator/task.ts';
import type { AttemptOutcome } from './attempt/types.ts';

const budget: Budget = {
  maxInputTokens: 4096,
  prices: { inputPerMillion: '0.40', outputPerMillion: '1.60', cachedInputPerMillion: '0.10' },
  maxCost: '0.01',
  currency: 'USD',
};
const openrouter: TaskTarget = { provider: 'openrouter', identity: OPENROUTER_IDENTITY };
const call = (target: TaskTarget = openrouter): GenerateCall =>
  ({ attempt: 1, target, maxNewTokens: 16, budget, spent: 0n }) as unknown as GenerateCall;
const cap = (text: string) => {
  const c = parseDailyCap(text);
  if (!c.ok) throw new Error(c.error);
  return c.value;
};

describe('daily cap on paid calls', () => {
  it('parses "amount CUR" and says what a bad one should look like', () => {
    expect(parseDailyCap('10 USD')).toEqual({
      ok: true,
      value: { amount: parseDecimal('10'), currency: 'USD' },
    });
    expect(parseDailyCap(' 0.5 EUR ')).toMatchObject({ ok: true, value: { currency: 'EUR' } });
    expect(parseDailyCap('10')).toEqual({
      ok: false,
      error: '"10" is not an amount and a currency, e.g. "10 USD"',
    });
    expect(parseDailyCap('$10').ok).toBe(false);
  });

  it('reserves the worst case of a paid attempt (reserved input at the dearest input price, all output); none for SGLang', () => {
    // 2048 x 0.40 + 16 x 1.60, per million.
    expect(computeReservation(call())).toBe(parseDecimal('0.0008448'));
    expect(computeReservation(call({ provider: 'sglang' } as TaskTarget))).toBeUndefined();
  });

  it('lets an attempt run only inside the cap, in its currency', () => {
    const base = { cap: cap('1 USD'), namespace: 'team-a', budget, reservation: parseDecimal('0.3') };
    expect(planReservation({ ...base, spentToday: parseDecimal('0.7') })).toEqual({
      ok: true,
      value: undefined,
    });
    const over = planReservation({ ...base, spentToday: parseDecimal('0.71') });
    expect(over).toEqual({
      ok: false,
      error: {
        reason: 'DailyCapReached',
        code: 'DailyCapReached',
        message:
          'namespace team-a spent 0.71 of its daily cap of 1 USD on paid calls today (UTC), and this attempt ' +
          'could cost up to 0.3: no call was made. The cap resets at 00:00 UTC (operator flag ' +
          '--paid-calls-daily-cap, chart operator.paidCalls.dailyCapPerNamespace)',
      },
    });
    expect(
      planReservation({ ...base, spentToday: 0n, budget: { ...budget, currency: 'EUR' } }),
    ).toMatchObject({
      ok: false,
      error: { code: 'DailyCapCurrency', message: expect.stringContaining('price it in USD') },
    });
  });

  it('keeps a ledger per UTC day and currency, a week of it, never below zero', () => {
    const now = new Date('2026-12-08T23:59:59Z');
    const key = computeLedgerKey(now, 'USD');
    expect(key).toBe('2026-12-08.USD');
    const old = { '2026-12-01.USD': '5', '2026-12-02.USD': '4', '2026-12-08.EUR': '1' };
    const next = addToLedger(old, key, parseDecimal('0.25'), now);
    expect(next).toEqual({ '2026-12-02.USD': '4', '2026-12-08.EUR': '1', '2026-12-08.USD': '0.25' });
    expect(addToLedger(next, key, -parseDecimal('1'), now)[key]).toBe('0');
    expect(readSpent(next, key)).toBe(parseDecimal('0.25'));
    expect(readSpent({ [key]: 'lots' }, key)).toBe(0n);
    expect(readSpent(undefined, key)).toBe(0n);
  });

  it('settles to what the call cost: nothing for a failed call, the reservation where usage is unknown', () => {
    const reservation = parseDecimal('0.0008448');
    const success: AttemptOutcome = {
      ok: true,
      value: {
        text: 'bug',
        inputTokens: 2048,
        usage: { promptTokens: 1000, completionTokens: 10, cachedTokens: 500 },
      },
    };
    // 500 x 0.40 + 500 x 0.10 + 10 x 1.60, per million.
    expect(computeSettlement(call(), success, reservation)).toBe(parseDecimal('0.000266'));
    const failed = (reason: 'ProviderError' | 'UsageUnknown'): AttemptOutcome => ({
      ok: false,
      error: { reason, code: 'X', message: 'x' },
    });
    expect(computeSettlement(call(), failed('ProviderError'), reservation)).toBe(0n);
    expect(computeSettlement(call(), failed('UsageUnknown'), reservation)).toBe(reservation);
  });
});
