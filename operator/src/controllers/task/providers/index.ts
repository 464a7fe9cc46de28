// Dispatch of a `generate` action to its provider (the reconciler's one call site).
import type { GenerateCall } from '../attempt/call.ts';
import type { AttemptOutcome } from '../attempt/types.ts';
import { PAID_CALLS_OFF } from '../attempt/target.ts';
import { generateWithOpenRouter, type OpenRouterProviderOptions } from './openrouter.ts';
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
