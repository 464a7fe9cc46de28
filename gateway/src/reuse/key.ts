// When a request's result may be reused, and under which key.
//
// Reusable only for deterministic sampling the CachePolicy allows:
// `temperatureZero` (temperature below SGLang's greedy cut, 1e-6) or
// `fixedSeed` (OpenAI `seed`, SGLang `sampling_seed`). Streaming requests are
// not reused yet (the store holds whole responses).
//
// key = sha256(fingerprint, salt, route, canonical JSON of the body without
// the fields that cannot change the output). Canonical = keys sorted at every
// depth, so field order and whitespace never split one request into two.

import { createHash } from 'node:crypto';
import type { REUSABLE_SAMPLING } from '#api';

export type ReusableSampling = (typeof REUSABLE_SAMPLING)[number];

/** Fields that never change the generated output. */
const IGNORED_FIELDS = new Set([
  'stream',
  'stream_options',
  'user',
  'rid',
  'priority',
  'cache_salt', // the effective salt is a separate key part
  'extra_key',
  'routing_key',
  'bootstrap_host',
  'bootstrap_port',
  'bootstrap_room',
  'routed_dp_rank',
]);

const GREEDY_TEMPERATURE = 1e-6;
const DEFAULT_TEMPERATURE = 1;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value))
    return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

function samplingOf(body: Record<string, unknown>): Record<string, unknown> {
  const sp = body['sampling_params'];
  return sp !== null && typeof sp === 'object' && !Array.isArray(sp) ? (sp as Record<string, unknown>) : body;
}

/** Which allowed deterministic mode applies, or undefined when the output is random. */
export function computeDeterminism(
  body: Record<string, unknown>,
  allowed: readonly ReusableSampling[],
): ReusableSampling | undefined {
  if (body['stream'] === true) return undefined;
  const sp = samplingOf(body);
  const t = sp['temperature'];
  const temperature = typeof t === 'number' ? t : DEFAULT_TEMPERATURE;
  if (allowed.includes('temperatureZero') && temperature < GREEDY_TEMPERATURE) return 'temperatureZero';
  const seed = sp['seed'] ?? sp['sampling_seed'] ?? body['seed'];
  if (allowed.includes('fixedSeed') && typeof seed === 'number' && Number.isInteger(seed)) return 'fixedSeed';
  return undefined;
}

export interface ReuseKeyInput {
  readonly fingerprint: string;
  readonly salt: string;
  /** The route, e.g. `/v1/chat/completions`: response shapes differ per route. */
  readonly route: string;
  readonly body: Record<string, unknown>;
}

export function computeReuseKey(input: ReuseKeyInput): string {
  const kept: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(input.body)) if (!IGNORED_FIELDS.has(k)) kept[k] = v;
  return createHash('sha256')
    .update(input.fingerprint)
    .update('\0')
    .update(input.salt)
    .update('\0')
    .update(input.route)
    .update('\0')
    .update(canonicalJson(kept))
    .digest('hex');
}

/**
 * A stored response marked as reused: no new prefill or generation happened,
 * so usage counts are zero; the original counts stay under `reused_usage`.
 */
export function markReused(body: Json): Json {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return body;
  const out: { [k: string]: Json } = { ...body };
  const usage = body['usage'];
  if (usage !== null && typeof usage === 'object' && !Array.isArray(usage))
    out['usage'] = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, reused_usage: usage };
  const meta = body['meta_info'];
  if (meta !== null && typeof meta === 'object' && !Array.isArray(meta))
    out['meta_info'] = { ...meta, prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, reused: true };
  return out;
}

export type { Json };
