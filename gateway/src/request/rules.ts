// What one request may ask of the runtime, by the CachePolicy of the
// Deployment it goes to (spec.requests), checked before the tenant's limits
// count it and before anything reaches a runtime:
//
// - Fields SGLang 0.5.23 takes from any client but that are the operator's
//   (PRIVILEGED_REQUEST_FIELDS: code it runs, its queue order, its request ids,
//   rank pinning, KV hints, servers it posts to) are refused unless the policy
//   lists them in allowPrivilegedFields. Refused, not stripped: a request
//   quietly served without its `priority` or `rid` would surprise its client;
//   a 400 that names the field and the opt-in says what to change.
// - Media by reference (media.ts) is refused unless allowMediaUrls.
// - Batches and `n` are capped (maxBatchSize, maxN): SGLang serves each prompt
//   of a batch, `n` times, as a request of its own, so that product is what the
//   request costs against the tenant's requestsPerMinute, and its prompt tokens
//   are the batch's sum (SGLang's usage counts each prompt once, whatever n).

import { PRIVILEGED_REQUEST_FIELDS, RequestRules, type PrivilegedRequestField } from '#api';
import { GatewayError } from '../errors/index.ts';
import { computeTextTokens } from '../radix/index.ts';
import { findMediaReference } from './media.ts';
import type { ParsedBody } from './shape.ts';

const DEFAULT_RULES: RequestRules = RequestRules.parse({});

/** Why each privileged field is the operator's, for the client's error message. */
const WHY_PRIVILEGED: Readonly<Record<PrivilegedRequestField, string>> = {
  custom_logit_processor: 'it is code the runtime would run',
  priority: "it orders the runtime's queue across every tenant",
  rid: "it is the runtime's request id, which another request's can collide with",
  routed_dp_rank: "it pins the request to one data-parallel rank, around the gateway's balancing",
  data_parallel_rank: "it pins the request to one data-parallel rank, around the gateway's balancing",
  disagg_prefill_dp_rank: 'it tells a decode server which prefill rank to read KV from',
  kv_hints: 'SGLang takes KV storage hints from a trusted orchestrator only',
  encoder_urls: 'it names servers the runtime would post to',
  return_hidden_states: "it costs the runtime memory per token and returns the model's internals",
  return_routed_experts: "it returns the model's internals (each token's experts), captured per token",
  return_indexer_topk: "it returns the model's internals (the indexer's top-k), captured per token",
  session_params: "it continues a runtime session, which every tenant's requests share",
  session_id: "it continues a runtime session, which every tenant's requests share",
  lora_id: "it is the runtime's internal adapter id (name an adapter with lora_path)",
  custom_labels: "it adds labels to the runtime's metrics, a series for each value",
  log_metrics: "false keeps the request out of the runtime's metrics",
  no_logs: "true keeps the request out of the runtime's logs",
};

/**
 * SGLang's own defaults of the privileged fields that have one besides null: a client that sends
 * the default asks for nothing (many SDKs send `false` for every boolean they know).
 */
const ENGINE_DEFAULTS: Partial<Readonly<Record<PrivilegedRequestField, unknown>>> = {
  return_hidden_states: false,
  return_routed_experts: false,
  return_indexer_topk: false,
  log_metrics: true,
  no_logs: false,
};

const MEDIA_REFERENCE =
  'the runtime would fetch or read the media itself; send it inline as a data: URL ' +
  '(data:<type>;base64,...)';

/** The request's size as the runtime serves it. */
export interface RequestSize {
  /** Prompts: one, or a batch's. */
  readonly prompts: number;
  /** Sequences sampled per prompt. */
  readonly n: number;
}

export type RuleViolation =
  | {
      readonly code: 'GW_FIELD_NOT_ALLOWED';
      readonly field: string;
      readonly why: string;
      readonly optIn: string;
    }
  | {
      readonly code: 'GW_REQUEST_TOO_LARGE';
      readonly field: string;
      readonly value: number;
      readonly cap: number;
      readonly setting: 'maxBatchSize' | 'maxN';
    };

/** The first rule the request breaks, in the order above; its size when it breaks none. Pure. */
export function planRequestRules(
  parsed: ParsedBody,
  rules: RequestRules,
): { ok: true; value: RequestSize } | { ok: false; error: RuleViolation } {
  const body = parsed.body as Readonly<Record<string, unknown>>;
  const allowed = new Set<string>(rules.allowPrivilegedFields);
  for (const field of PRIVILEGED_REQUEST_FIELDS) {
    // null is the field's default: SGLang reads it as absent.
    const value = body[field];
    if (value === undefined || value === null || value === ENGINE_DEFAULTS[field] || allowed.has(field))
      continue;
    const why = WHY_PRIVILEGED[field];
    return { ok: false, error: { code: 'GW_FIELD_NOT_ALLOWED', field, why, optIn: 'allowPrivilegedFields' } };
  }
  if (!rules.allowMediaUrls) {
    const field = findMediaReference(parsed);
    if (field !== undefined)
      return {
        ok: false,
        error: { code: 'GW_FIELD_NOT_ALLOWED', field, why: MEDIA_REFERENCE, optIn: 'allowMediaUrls' },
      };
  }
  const batch = computeBatch(parsed);
  if (batch && batch.prompts > rules.maxBatchSize)
    return {
      ok: false,
      error: {
        code: 'GW_REQUEST_TOO_LARGE',
        field: batch.field,
        value: batch.prompts,
        cap: rules.maxBatchSize,
        setting: 'maxBatchSize',
      },
    };
  const n = computeN(parsed);
  if (n.value > rules.maxN)
    return {
      ok: false,
      error: {
        code: 'GW_REQUEST_TOO_LARGE',
        field: n.field,
        value: n.value,
        cap: rules.maxN,
        setting: 'maxN',
      },
    };
  return { ok: true, value: { prompts: batch?.prompts ?? 1, n: n.value } };
}

/** The request's size under its route's rules; a GatewayError (400) naming the field when it breaks one. */
export function enforceRequestRules(
  parsed: ParsedBody,
  route: { readonly model: string; readonly requests?: RequestRules | undefined },
): RequestSize {
  const planned = planRequestRules(parsed, route.requests ?? DEFAULT_RULES);
  if (planned.ok) return planned.value;
  const v = planned.error;
  if (v.code === 'GW_FIELD_NOT_ALLOWED')
    throw new GatewayError(v.code, { field: v.field, model: route.model, why: v.why, optIn: v.optIn });
  const isBatch = v.setting === 'maxBatchSize';
  throw new GatewayError(v.code, {
    subject: isBatch ? `The batch in '${v.field}'` : `'${v.field}'`,
    value: isBatch ? `${v.value} prompts` : v.value,
    limit: `the CachePolicy's spec.requests.${v.setting} for model '${route.model}'`,
    cap: v.cap,
    advice: isBatch ? 'send it as smaller batches' : 'ask for fewer sequences per prompt',
  });
}

/**
 * Prompt tokens over the whole batch: `first` (the first prompt's count, exact when the gateway
 * tokenized it) for a single prompt; for a batch, each prompt's ids or its text's estimate.
 */
export function computePromptTokens(parsed: ParsedBody, first: number): number {
  const prompts = listBatchPrompts(parsed);
  if (!prompts) return first;
  let sum = 0;
  for (const p of prompts) sum += typeof p === 'string' ? computeTextTokens(p).length : p.length;
  return sum;
}

/** A batch's field and its prompt count; undefined for a single prompt. */
function computeBatch(parsed: ParsedBody): { field: string; prompts: number } | undefined {
  const prompts = listBatchPrompts(parsed);
  if (prompts)
    return { field: parsed.kind === 'completion' ? 'prompt' : batchField(parsed), prompts: prompts.length };
  // input_embeds: one prompt is a list of vectors, a batch a list of those (SGLang's test).
  const embeds = parsed.kind === 'generate' ? parsed.body.input_embeds : undefined;
  if (Array.isArray(embeds) && Array.isArray(embeds[0]) && Array.isArray((embeds[0] as unknown[])[0]))
    return { field: 'input_embeds', prompts: embeds.length };
  return undefined;
}

function batchField(parsed: ParsedBody): string {
  return parsed.kind === 'generate' && parsed.body.input_ids !== undefined ? 'input_ids' : 'text';
}

/** The prompts of a batch (text, or token ids each); undefined for a single prompt. */
function listBatchPrompts(parsed: ParsedBody): readonly (string | readonly number[])[] | undefined {
  switch (parsed.kind) {
    case 'chat':
      return undefined;
    case 'completion': {
      const p = parsed.body.prompt;
      return Array.isArray(p) && typeof p[0] === 'string' ? (p as string[]) : undefined;
    }
    case 'generate': {
      const { text, input_ids: ids } = parsed.body;
      if (Array.isArray(text)) return text;
      if (ids && Array.isArray(ids[0])) return ids as number[][];
      return undefined;
    }
  }
}

/** `n` and where it was given: SGLang's `n`, or on /generate `sampling_params.n`. */
function computeN(parsed: ParsedBody): { field: string; value: number } {
  if (parsed.kind === 'generate')
    return { field: 'sampling_params.n', value: parsed.body.sampling_params?.n ?? 1 };
  return { field: 'n', value: parsed.body.n ?? 1 };
}
