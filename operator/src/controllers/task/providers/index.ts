// Dispatch of a `generate` action to its provider (the reconciler's one call site).
import type { GenerateCall } from '../phase.ts';
import type { AttemptOutcome } from '../types.ts';
import { generateWithOpenRouter, PAID_CALLS_OFF, type OpenRouterProviderOptions } from './openrouter.ts';
import { providerError } from './http.ts';
import { generateWithSglang, type SglangProviderOptions } from './sglang.ts';

export interface ProviderDeps {
  sglang?: SglangProviderOptions;
  /** Absent when the operator runs without --allow-paid-calls=true. */
  openrouter?: OpenRouterProviderOptions;
  /** The value of call.apiKeySecretRef, read by the shell from the Secret. */
  apiKey?: string;
}

export function runGeneration(call: GenerateCall, deps: ProviderDeps): Promise<AttemptOutcome> {
  if (call.target.provider === 'sglang') return generateWithSglang(call, deps.sglang);
  if (!deps.openrouter) return Promise.resolve(providerError('PaidCallsNotAllowed', PAID_CALLS_OFF));
  return generateWithOpenRouter(call, deps.apiKey ?? '', deps.openrouter);
}

export { generateWithOpenRouter, generateWithSglang };
