// Shared shapes of the Task core: results as data, attempt outcomes, usage.
import type { FailureReason } from './reasons.ts';

export type Result<T, E> = { ok: true; value: T } | { ok: false; error: E };

export function ok<T>(value: T): { ok: true; value: T } {
  return { ok: true, value };
}

export function err<E>(error: E): { ok: false; error: E } {
  return { ok: false, error };
}

/** Usage of one generation, after the usage contract accepted it. */
export interface Usage {
  promptTokens: number;
  completionTokens: number;
  /** SGLang: runtime KV hits (a metric, not a discount); OpenRouter: cache-read tokens. */
  cachedTokens: number;
  cachedTokensDevice?: number;
  cachedTokensHost?: number;
  /** OpenRouter only: tokens written to the provider's prompt cache. */
  cacheWriteTokens?: number;
  /** OpenRouter: already included in completionTokens. */
  reasoningTokens?: number;
}

/** Why an attempt failed; `code` is a stable detail code, `reason` the Task failure reason. */
export interface AttemptError {
  reason: FailureReason;
  code: string;
  message: string;
}

export interface Generation {
  text: string;
  usage: Usage;
  /** Input tokens the provider counted before sending (SGLang) or reserved (OpenRouter). */
  inputTokens: number;
  finishReason?: string;
  /** OpenRouter: the upstream provider the response names. */
  servedBy?: string;
}

/** What a provider call returns: the shell hands it to planTaskStep as `outcome`. */
export type AttemptOutcome = Result<Generation, AttemptError>;
