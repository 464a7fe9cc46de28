// Token caps, the price table and the cost cap: before a call and after it.
//
// Money is exact: decimal strings parse to bigint "atto" units (1e-18 of the
// currency); prices are per million tokens, so a cost is
// ceil(sum(tokens x price) / 1e6). Rounding is upward, so a cap never passes
// by rounding. No floats anywhere.
//
// Before: the input (SGLang: the runtime's own token count; OpenRouter: the
// operator's inputTokenUpperBound reservation) must fit maxInputTokens; the
// worst-case cost (that input at the dearest input price + the whole output
// cap) plus what earlier attempts spent must fit maxCost.
// After: the reported usage must fit the caps (an overrun found now cannot
// undo its charge, but the task fails and the answer is not used), and the
// total spent must fit maxCost.
// SGLang KV hits are runtime metrics, not billable cache tokens: every SGLang
// prompt token is priced as input.
import type { TaskSpec } from '#api/task.ts';
import type { ProviderKind } from './prepare.ts';
import { TaskReason } from './reasons.ts';
import { err, ok, type AttemptError, type Result, type Usage } from './types.ts';

export type Budget = TaskSpec['budget'];
export type Prices = NonNullable<Budget['prices']>;

const SCALE_DIGITS = 18;
const SCALE = 10n ** BigInt(SCALE_DIGITS);
const PER_MILLION = 1_000_000n;

/** A non-negative decimal string as atto units, rounding extra fraction digits up. */
export function parseDecimal(s: string): bigint {
  const m = /^([0-9]+)(?:\.([0-9]+))?$/.exec(s);
  if (!m) throw new RangeError(`not a decimal: ${s}`);
  const frac = m[2] ?? '';
  const kept = frac.slice(0, SCALE_DIGITS).padEnd(SCALE_DIGITS, '0');
  const roundUp = /[1-9]/.test(frac.slice(SCALE_DIGITS)) ? 1n : 0n;
  return BigInt(m[1] ?? '0') * SCALE + BigInt(kept) + roundUp;
}

export function formatDecimal(atto: bigint): string {
  const whole = atto / SCALE;
  const frac = (atto % SCALE).toString().padStart(SCALE_DIGITS, '0').replace(/0+$/, '');
  return frac === '' ? whole.toString() : `${whole.toString()}.${frac}`;
}

function ceilPerMillion(x: bigint): bigint {
  return (x + PER_MILLION - 1n) / PER_MILLION;
}

/** The output cap sent to the runtime: spec.maxOutputTokens, lowered to the budget's output cap. */
export function computeMaxNewTokens(spec: Pick<TaskSpec, 'maxOutputTokens' | 'budget'>): number {
  const cap = spec.budget.maxOutputTokens;
  return cap === undefined ? spec.maxOutputTokens : Math.min(spec.maxOutputTokens, cap);
}

export function computeCost(usage: Usage, prices: Prices, provider: ProviderKind): bigint {
  const input = parseDecimal(prices.inputPerMillion);
  const output = parseDecimal(prices.outputPerMillion);
  const completion = BigInt(usage.completionTokens) * output;
  if (provider === 'sglang') return ceilPerMillion(BigInt(usage.promptTokens) * input + completion);
  const read = BigInt(usage.cachedTokens);
  const write = BigInt(usage.cacheWriteTokens ?? 0);
  const plain = BigInt(usage.promptTokens) - read - write;
  const readPrice = prices.cachedInputPerMillion ? parseDecimal(prices.cachedInputPerMillion) : input;
  const writePrice = prices.cacheWritePerMillion ? parseDecimal(prices.cacheWritePerMillion) : input;
  return ceilPerMillion(plain * input + read * readPrice + write * writePrice + completion);
}

export function computeCostEstimate(
  inputTokens: number,
  maxNewTokens: number,
  prices: Prices,
  provider: ProviderKind,
): bigint {
  let inputPrice = parseDecimal(prices.inputPerMillion);
  if (provider === 'openrouter') {
    for (const p of [prices.cachedInputPerMillion, prices.cacheWritePerMillion]) {
      if (p !== undefined && parseDecimal(p) > inputPrice) inputPrice = parseDecimal(p);
    }
  }
  return ceilPerMillion(
    BigInt(inputTokens) * inputPrice + BigInt(maxNewTokens) * parseDecimal(prices.outputPerMillion),
  );
}

function fail(
  reason: AttemptError['reason'],
  code: string,
  message: string,
): { ok: false; error: AttemptError } {
  return err({ reason, code, message });
}

export interface BudgetBeforeInput {
  budget: Budget;
  provider: ProviderKind;
  /** SGLang: the runtime's count of the prepared prompt; OpenRouter: inputTokenUpperBound. */
  inputTokens: number;
  maxNewTokens: number;
  /** What earlier attempts of this task cost (atto). */
  spent: bigint;
}

export function planBudgetBefore(i: BudgetBeforeInput): Result<{ estimate?: bigint }, AttemptError> {
  if (i.inputTokens > i.budget.maxInputTokens)
    return fail(
      TaskReason.InputOverCap,
      i.provider === 'sglang' ? 'InputOverCap' : 'ReservationOverCap',
      `${i.inputTokens} input tokens${i.provider === 'openrouter' ? ' (reserved)' : ''} exceed budget.maxInputTokens ${i.budget.maxInputTokens}`,
    );
  const { prices, maxCost } = i.budget;
  if (!prices) return ok({});
  const estimate = computeCostEstimate(i.inputTokens, i.maxNewTokens, prices, i.provider);
  if (maxCost !== undefined && i.spent + estimate > parseDecimal(maxCost))
    return fail(
      TaskReason.BudgetExceeded,
      'CostEstimateOverCap',
      `worst-case cost ${formatDecimal(estimate)} (spent ${formatDecimal(i.spent)}) exceeds budget.maxCost ${maxCost} ${i.budget.currency}`,
    );
  return ok({ estimate });
}

export interface BudgetAfterInput {
  budget: Budget;
  provider: ProviderKind;
  usage: Usage;
  spent: bigint;
  /** OpenRouter: the reservation the reported prompt must not exceed. */
  inputTokenUpperBound?: number | undefined;
}

export function planBudgetAfter(i: BudgetAfterInput): Result<{ cost?: bigint }, AttemptError> {
  const { usage, budget } = i;
  if (i.inputTokenUpperBound !== undefined && usage.promptTokens > i.inputTokenUpperBound)
    return fail(
      TaskReason.InputOverCap,
      'ReservationOverrun',
      `reported ${usage.promptTokens} prompt tokens exceed the inputTokenUpperBound reservation ${i.inputTokenUpperBound}`,
    );
  if (usage.promptTokens > budget.maxInputTokens)
    return fail(
      TaskReason.InputOverCap,
      'ReportedInputOverCap',
      `reported ${usage.promptTokens} prompt tokens exceed budget.maxInputTokens ${budget.maxInputTokens}`,
    );
  if (budget.maxOutputTokens !== undefined && usage.completionTokens > budget.maxOutputTokens)
    return fail(
      TaskReason.BudgetExceeded,
      'OutputOverCap',
      `${usage.completionTokens} completion tokens exceed budget.maxOutputTokens ${budget.maxOutputTokens}`,
    );
  if (!budget.prices) return ok({});
  const cost = computeCost(usage, budget.prices, i.provider);
  if (budget.maxCost !== undefined && i.spent + cost > parseDecimal(budget.maxCost))
    return fail(
      TaskReason.BudgetExceeded,
      'CostOverCap',
      `cost ${formatDecimal(cost)} (spent before ${formatDecimal(i.spent)}) exceeds budget.maxCost ${budget.maxCost} ${budget.currency}`,
    );
  return ok({ cost });
}

/** The status ledger: usage summed over every attempt that generated, and its cost. */
export interface Ledger {
  // Reasoning is already inside completionTokens, so the ledger does not count it again.
  usage: Omit<Usage, 'reasoningTokens'> & { newGeneration: boolean };
  spent: bigint;
  cost?: string;
}

export function computeLedger(
  usages: readonly Usage[],
  prices: Prices | undefined,
  provider: ProviderKind,
): Ledger {
  const sum = (f: (u: Usage) => number | undefined) => usages.reduce((n, u) => n + (f(u) ?? 0), 0);
  const has = (f: (u: Usage) => number | undefined) => usages.some((u) => f(u) !== undefined);
  const usage: Ledger['usage'] = {
    promptTokens: sum((u) => u.promptTokens),
    completionTokens: sum((u) => u.completionTokens),
    cachedTokens: sum((u) => u.cachedTokens),
    newGeneration: usages.length > 0,
  };
  if (has((u) => u.cachedTokensDevice)) usage.cachedTokensDevice = sum((u) => u.cachedTokensDevice);
  if (has((u) => u.cachedTokensHost)) usage.cachedTokensHost = sum((u) => u.cachedTokensHost);
  if (has((u) => u.cacheWriteTokens)) usage.cacheWriteTokens = sum((u) => u.cacheWriteTokens);
  if (!prices) return { usage, spent: 0n };
  const spent = usages.reduce((n, u) => n + computeCost(u, prices, provider), 0n);
  return { usage, spent, cost: formatDecimal(spent) };
}
