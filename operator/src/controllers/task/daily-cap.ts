// The per-namespace daily cap on paid calls (OpenRouter Tasks): what each
// namespace may spend per UTC day, in one currency, kept in a ledger the
// operator writes to a ConfigMap in that namespace (daily-cap-store.ts), so a
// restart or a new leader knows what was spent.
//
// - Before a paid call, the attempt's worst case (the same estimate the
//   task's own cost cap uses: the reserved input at the dearest input price
//   plus the whole output cap) is reserved: the call runs only if today's
//   spending plus that fits the cap.
// - After it, the reservation is replaced by what the call cost. A failed
//   call cost nothing unless its usage is unknown (the provider may have
//   charged): then the reservation stays. Errors count against the cap,
//   never for it.
// - A task priced in another currency than the cap is refused: the operator
//   does not convert money.
//
// Pure: plain data in, plain data out. Money is bigint atto units (budget.ts).

import {
  computeCost,
  computeCostEstimate,
  formatDecimal,
  parseDecimal,
  type Budget,
} from './attempt/budget.ts';
import type { GenerateCall } from './attempt/call.ts';
import { TaskReason } from './attempt/reasons.ts';
import { err, ok, type AttemptError, type AttemptOutcome, type Result } from './attempt/types.ts';

export interface DailyCap {
  /** Atto units of `currency` a namespace may spend on paid calls per UTC day. */
  readonly amount: bigint;
  readonly currency: string;
}

/** The ConfigMap in each namespace that holds its ledger. */
export const LEDGER_CONFIGMAP = 'cacheroute-paid-calls';
/** Days of history the ledger keeps (today included). */
export const LEDGER_KEEP_DAYS = 7;

/** "10 USD" (the flag's form): an amount and an ISO currency code. */
export function parseDailyCap(text: string): Result<DailyCap, string> {
  const m = /^\s*([0-9]+(?:\.[0-9]+)?)\s+([A-Z]{3})\s*$/.exec(text);
  if (!m) return err(`"${text}" is not an amount and a currency, e.g. "10 USD"`);
  return ok({ amount: parseDecimal(m[1] ?? '0'), currency: m[2] ?? '' });
}

/** The ledger's key for `now`'s UTC day: 2026-12-01.USD. */
export function computeLedgerKey(now: Date, currency: string): string {
  return `${now.toISOString().slice(0, 10)}.${currency}`;
}

export function readSpent(data: Readonly<Record<string, string>> | undefined, key: string): bigint {
  const v = data?.[key];
  if (v === undefined) return 0n;
  try {
    return parseDecimal(v);
  } catch {
    // Edited by hand into something that is not an amount: it counts as 0, and the next booking rewrites it.
    return 0n;
  }
}

/** The ledger with `delta` added to `key` (never below 0) and days older than LEDGER_KEEP_DAYS dropped. */
export function addToLedger(
  data: Readonly<Record<string, string>> | undefined,
  key: string,
  delta: bigint,
  now: Date,
): Record<string, string> {
  const oldest = new Date(now.getTime() - (LEDGER_KEEP_DAYS - 1) * 86_400_000).toISOString().slice(0, 10);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(data ?? {})) if (k.slice(0, 10) >= oldest) out[k] = v;
  const next = readSpent(data, key) + delta;
  out[key] = formatDecimal(next > 0n ? next : 0n);
  return out;
}

/** The most one paid attempt can cost (reserved before it runs); undefined for calls that are not paid. */
export function computeReservation(call: GenerateCall): bigint | undefined {
  if (call.target.provider !== 'openrouter') return undefined;
  const { prices } = call.budget;
  // CEL requires prices on an openrouter task; a task applied before that rule reserves nothing it cannot price.
  if (!prices) return 0n;
  return computeCostEstimate(
    call.target.identity.inputTokenUpperBound,
    call.maxNewTokens,
    prices,
    'openrouter',
  );
}

export interface ReservationInput {
  readonly cap: DailyCap;
  readonly namespace: string;
  readonly budget: Budget;
  /** Spent (and reserved) today so far. */
  readonly spentToday: bigint;
  readonly reservation: bigint;
}

/** Whether the attempt may run under the namespace's cap; the error says what to change. */
export function planReservation(i: ReservationInput): Result<void, AttemptError> {
  const { cap } = i;
  if (i.budget.currency !== cap.currency)
    return err({
      reason: TaskReason.DailyCapReached,
      code: 'DailyCapCurrency',
      message: `the daily cap on paid calls is in ${cap.currency} and this task prices in ${i.budget.currency}: price it in ${cap.currency}`,
    });
  if (i.spentToday + i.reservation <= cap.amount) return ok(undefined);
  return err({
    reason: TaskReason.DailyCapReached,
    code: 'DailyCapReached',
    message:
      `namespace ${i.namespace} spent ${formatDecimal(i.spentToday)} of its daily cap of ` +
      `${formatDecimal(cap.amount)} ${cap.currency} on paid calls today (UTC), and this attempt could cost up to ` +
      `${formatDecimal(i.reservation)}: no call was made. The cap resets at 00:00 UTC ` +
      `(operator flag --paid-calls-daily-cap, chart operator.paidCalls.dailyCapPerNamespace)`,
  });
}

/** What the attempt cost, to replace its reservation in the ledger. */
export function computeSettlement(call: GenerateCall, outcome: AttemptOutcome, reservation: bigint): bigint {
  const prices = call.budget.prices;
  if (outcome.ok) return prices ? computeCost(outcome.value.usage, prices, 'openrouter') : 0n;
  // Unknown usage: the provider may have charged for an answer we could not account. Keep the worst case.
  return outcome.error.reason === TaskReason.UsageUnknown ? reservation : 0n;
}
