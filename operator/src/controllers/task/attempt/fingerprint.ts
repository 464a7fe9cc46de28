// Fingerprint of a Task's approved snapshot: what was asked, how, of whom.
//
// In: the prepared input (after rendering, before any rework feedback), the
// sampling, the output cap actually sent, the output checks (the acceptance
// criteria: an answer accepted under weaker checks must not satisfy stronger
// ones), and the provider identity (SGLang: deploymentId, identity
// fingerprint, cache salt, the runtime identity the operator verified;
// OpenRouter: base URL, model, pinned upstream provider, contract fields).
// Out: review (reuse eligibility, not identity: see reuse.ts), budget caps and
// prices (spending limits; a reuse spends nothing), reuse settings, check
// retries, the API key reference, names and labels.
//
// Canonical JSON (object keys sorted, undefined dropped) hashed with sha256.
import { createHash } from 'node:crypto';
import type { TaskSpec } from '#api/task.ts';
import type { PreparedInput } from './prepare.ts';

export const FINGERPRINT_VERSION = 1;

/** The runtime identity fields that every endpoint of a target shares, prefill and decode alike. */
export interface VerifiedRuntime {
  modelPath: string;
  servedModelName: string;
  tokenizerPath: string;
  version: string;
  tensorParallel: number;
}

export interface SglangIdentity {
  provider: 'sglang';
  deploymentId: string;
  identityFingerprint: string;
  cacheSalt: string;
  runtime: VerifiedRuntime;
}

export interface OpenRouterIdentity {
  provider: 'openrouter';
  baseUrl: string;
  model: string;
  upstreamProvider: string;
  cacheWriteUsage: 'required' | 'not_applicable';
  inputTokenUpperBound: number;
}

export type ProviderIdentity = SglangIdentity | OpenRouterIdentity;

export interface FingerprintInput {
  prepared: PreparedInput;
  sampling: TaskSpec['sampling'];
  maxNewTokens: number;
  checks: TaskSpec['checks'];
  provider: ProviderIdentity;
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function canonicalize(value: unknown): Json | undefined {
  if (value === undefined) return undefined;
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('canonical JSON has no non-finite numbers');
    return value;
  }
  if (Array.isArray(value)) return value.map((v) => canonicalize(v) ?? null);
  if (typeof value === 'object') {
    const out: { [k: string]: Json } = {};
    for (const k of Object.keys(value).sort()) {
      const v = canonicalize((value as Record<string, unknown>)[k]);
      if (v !== undefined) out[k] = v;
    }
    return out;
  }
  throw new TypeError(`canonical JSON cannot hold a ${typeof value}`);
}

/** JSON with object keys sorted at every level and undefined members dropped. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(canonicalize(value) ?? null);
}

export function computeSha256(text: string): string {
  return `sha256:${createHash('sha256').update(text).digest('hex')}`;
}

export function computeTaskFingerprint(input: FingerprintInput): string {
  const { temperature, topP, topK, seed, stop } = input.sampling;
  return computeSha256(
    canonicalJson({
      v: FINGERPRINT_VERSION,
      input: input.prepared,
      sampling: { temperature, topP, topK, seed, stop },
      maxNewTokens: input.maxNewTokens,
      checks: (input.checks ?? []).map(({ type, pattern, schema, min, max }) => ({
        type,
        pattern,
        schema,
        min,
        max,
      })),
      provider: input.provider,
    }),
  );
}
