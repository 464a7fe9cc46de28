// Pure pieces of a generation: the output a prompt gets, stop handling, the
// chat template, and SGLang's meta_info / finish_reason shapes.

import type { RequestResult } from './engine.ts';
import { ROLE_TOKEN_IDS, decode, encodeInto, generateTokens } from './tokenizer.ts';

export type FinishReason =
  | { readonly type: 'length'; readonly length: number }
  | { readonly type: 'stop'; readonly matched: string | number }
  | {
      readonly type: 'abort';
      readonly message: string;
      readonly status_code: number;
      readonly err_type: string | null;
    };

export interface OutputPlan {
  readonly outputIds: number[];
  /** Text shown to the client: cut before a matched stop string, as SGLang does. */
  readonly text: string;
  readonly finish: FinishReason;
}

export interface StopRules {
  readonly stop: readonly string[];
  readonly stopTokenIds: readonly number[];
}

/** The tokens and text a request produces: deterministic in (prompt, seed, maxNewTokens, stop rules). */
export function planOutput(
  promptIds: readonly number[],
  seed: number,
  maxNewTokens: number,
  rules: StopRules,
): OutputPlan {
  const ids = generateTokens(promptIds, seed, maxNewTokens);
  let text = '';
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] ?? 0;
    if (rules.stopTokenIds.includes(id)) {
      return { outputIds: ids.slice(0, i + 1), text, finish: { type: 'stop', matched: id } };
    }
    text += decode([id]);
    for (const s of rules.stop) {
      const at = s.length > 0 ? text.indexOf(s) : -1;
      if (at >= 0)
        return {
          outputIds: ids.slice(0, i + 1),
          text: text.slice(0, at),
          finish: { type: 'stop', matched: s },
        };
    }
  }
  return { outputIds: ids, text, finish: { type: 'length', length: ids.length } };
}

/** Text of the first `n` output tokens, cut at a stop string if the plan ends on one within them. */
export function partialText(plan: OutputPlan, n: number): string {
  if (n >= plan.outputIds.length) return plan.text;
  return decode(plan.outputIds.slice(0, n));
}

export interface ChatMessageInput {
  readonly role: string;
  readonly content?:
    string | readonly { readonly type: string; readonly text?: string | undefined }[] | null | undefined;
}

/**
 * The simulator's chat template: per message a role token followed by the
 * content's tokens, then <|assistant|>. Content comes right after a fixed
 * token, so equal leading messages give equal token prefixes.
 */
export function applyChatTemplate(messages: readonly ChatMessageInput[]): number[] {
  const out: number[] = [];
  for (const m of messages) {
    const role =
      m.role === 'system' || m.role === 'developer'
        ? 'system'
        : m.role === 'assistant'
          ? 'assistant'
          : 'user';
    out.push(ROLE_TOKEN_IDS[role]);
    const content =
      typeof m.content === 'string' ? m.content : (m.content ?? []).map((p) => p.text ?? '').join('');
    encodeInto(out, content);
  }
  out.push(ROLE_TOKEN_IDS.assistant);
  return out;
}

/** The radix-key namespace: SGLang concatenates cache_salt + extra_key into the key's extra key. */
export function buildNamespace(
  cacheSalt: string | null | undefined,
  extraKey: string | null | undefined,
): string {
  return `${cacheSalt ?? ''}\u0000${extraKey ?? ''}`;
}

/** The cache_salt and extra_key of a namespace built by buildNamespace (a name without NUL is all salt). */
export function parseNamespace(namespace: string): { cacheSalt: string | null; extraKey: string | null } {
  const nul = namespace.indexOf('\u0000');
  const salt = nul < 0 ? namespace : namespace.slice(0, nul);
  const extra = nul < 0 ? '' : namespace.slice(nul + 1);
  return { cacheSalt: salt === '' ? null : salt, extraKey: extra === '' ? null : extra };
}

export function buildMetaInfo(
  rid: string,
  r: Pick<RequestResult, 'cachedTokens' | 'cachedDevice' | 'cachedHost' | 'e2eMs'> | null,
  finish: FinishReason | null,
  completionTokens: number,
  promptTokens: number,
): Record<string, unknown> {
  const meta: Record<string, unknown> = {
    id: rid,
    finish_reason: finish,
    prompt_tokens: promptTokens,
    weight_version: 'default',
    completion_tokens: completionTokens,
    cached_tokens: r?.cachedTokens ?? 0,
    cached_tokens_details: { device: r?.cachedDevice ?? 0, host: r?.cachedHost ?? 0 },
    num_retractions: 0,
    reasoning_tokens: 0,
    dp_rank: 0,
  };
  if (r && finish) meta['e2e_latency'] = r.e2eMs / 1000;
  return meta;
}

export function abortReason(message: string, statusCode: number): FinishReason {
  return { type: 'abort', message, status_code: statusCode, err_type: null };
}
