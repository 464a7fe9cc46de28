// Request bodies: zod schemas of the fields the gateway reads (everything else
// passes through to SGLang untouched), the routing tokens, the salt.

import { z } from 'zod';
import { computeTextTokens } from '../radix/index.ts';
import type { TokenizerInput } from '../tokenize/request.ts';
import { CACHE_SALT_MAX, readChatBody, TEMPERATURE_MAX } from './chat-body.ts';

/** Sequences sampled per prompt (request/rules.ts caps it and counts it against a tenant's limits). */
const N = z.number().int().min(1, 'n must be at least 1');

const Sampling = {
  n: N.optional(),
  stream: z.boolean().optional(),
  temperature: z.number().min(0).max(TEMPERATURE_MAX).optional(),
  seed: z.number().int().optional(),
  cache_salt: z.string().max(CACHE_SALT_MAX).optional(),
};

/**
 * Prompts in one batch request (/generate `text` or `input_ids`, /v1/completions `prompt`):
 * the runtime schedules each as a request of its own, while admission counts the batch once.
 */
export const MAX_BATCH = 1024;
const BATCH_TOO_LARGE = `a batch holds at most ${MAX_BATCH} prompts`;
/** A batch is an array of prompts (strings, or arrays of token ids), not one prompt of token ids. */
const withinBatch = (p: string | readonly unknown[]): boolean =>
  typeof p === 'string' || typeof p[0] === 'number' || p.length <= MAX_BATCH;

const ContentPart = z.looseObject({ type: z.string(), text: z.string().optional() });
const Message = z.looseObject({
  role: z.string().min(1, 'role must not be empty'),
  content: z.union([z.string(), z.array(ContentPart), z.null()]).optional(),
});

export const ChatBody = z.looseObject({
  model: z.string().min(1, 'model is required'),
  messages: z.array(Message).min(1, 'at least one message is required'),
  ...Sampling,
});
export type ChatBody = z.infer<typeof ChatBody>;

export const CompletionBody = z.looseObject({
  model: z.string().min(1, 'model is required'),
  prompt: z
    .union([z.string(), z.array(z.string()), z.array(z.number().int().min(0))])
    .refine((p) => typeof p === 'string' || p.length > 0, 'prompt must not be empty')
    .refine(withinBatch, BATCH_TOO_LARGE),
  ...Sampling,
});
export type CompletionBody = z.infer<typeof CompletionBody>;

export const GenerateBody = z
  .looseObject({
    /** Gateway extension: which model; removed before forwarding. */
    model: z.string().min(1).optional(),
    text: z
      .union([z.string(), z.array(z.string()).min(1)])
      .refine(withinBatch, BATCH_TOO_LARGE)
      .optional(),
    input_ids: z
      .union([z.array(z.number().int().min(0)), z.array(z.array(z.number().int().min(0))).min(1)])
      .refine(withinBatch, BATCH_TOO_LARGE)
      .optional(),
    input_embeds: z.unknown().optional(),
    sampling_params: z
      .looseObject({
        temperature: z.number().min(0).optional(),
        sampling_seed: z.number().int().optional(),
        n: N.optional(),
      })
      .optional(),
    stream: z.boolean().optional(),
    cache_salt: z.string().max(CACHE_SALT_MAX).optional(),
  })
  .refine((b) => [b.text, b.input_ids, b.input_embeds].filter((x) => x !== undefined).length === 1, {
    message: 'give exactly one of text, input_ids, input_embeds',
  });
export type GenerateBody = z.infer<typeof GenerateBody>;

export const RouteKind = { chat: 'chat', completion: 'completion', generate: 'generate' } as const;
export type RouteKind = (typeof RouteKind)[keyof typeof RouteKind];

export type ParsedBody =
  | { readonly kind: 'chat'; readonly body: ChatBody }
  | { readonly kind: 'completion'; readonly body: CompletionBody }
  | { readonly kind: 'generate'; readonly body: GenerateBody };

export type ParseResult = { ok: true; value: ParsedBody } | { ok: false; error: string };

export function formatIssues(error: z.ZodError): string {
  return error.issues
    .map((i) => `${i.path.length ? i.path.join('.') : 'body'}: ${i.message}`)
    .slice(0, 5)
    .join('; ');
}

export function parseBody(kind: RouteKind, raw: unknown): ParseResult {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    return { ok: false, error: 'body: a JSON object is required' };
  switch (kind) {
    case 'chat': {
      // Read by hand where the schema would take the body as it is (chat-body.ts).
      const read = readChatBody(raw);
      if (read) return { ok: true, value: { kind, body: read } };
      const r = ChatBody.safeParse(raw);
      return r.success
        ? { ok: true, value: { kind, body: r.data } }
        : { ok: false, error: formatIssues(r.error) };
    }
    case 'completion': {
      const r = CompletionBody.safeParse(raw);
      return r.success
        ? { ok: true, value: { kind, body: r.data } }
        : { ok: false, error: formatIssues(r.error) };
    }
    case 'generate': {
      const r = GenerateBody.safeParse(raw);
      return r.success
        ? { ok: true, value: { kind, body: r.data } }
        : { ok: false, error: formatIssues(r.error) };
    }
  }
}

function messageText(content: ChatBody['messages'][number]['content']): string {
  if (typeof content === 'string') return content;
  if (!content) return '';
  return content.map((p) => p.text ?? '').join('');
}

/**
 * Tokens the policy matches on: token ids when the client sent them, else
 * pseudo-tokens of the text (the gateway has no tokenizer). Chat messages are
 * joined with their roles, as SGLang's router joins them.
 */
export function computeRouteTokens(parsed: ParsedBody): ArrayLike<number> {
  switch (parsed.kind) {
    case 'chat':
      return computeTextTokens(
        parsed.body.messages.map((m) => `${m.role}\n${messageText(m.content)}\n`).join(''),
      );
    case 'completion': {
      const p = parsed.body.prompt;
      if (typeof p === 'string') return computeTextTokens(p);
      if (typeof p[0] === 'number') return p as number[];
      return computeTextTokens(p[0] ?? '');
    }
    case 'generate': {
      const { input_ids: ids, text } = parsed.body;
      if (ids) return Array.isArray(ids[0]) ? ids[0] : (ids as number[]);
      if (typeof text === 'string') return computeTextTokens(text);
      return computeTextTokens(text?.[0] ?? '');
    }
  }
}

/**
 * The prompt's token ids as the runtime will see them, when the request carries them
 * (`input_ids`, or a completion prompt of ids); undefined for text (a tokenizer's job).
 */
export function computeExactTokens(parsed: ParsedBody): readonly number[] | undefined {
  switch (parsed.kind) {
    case 'chat':
      return undefined;
    case 'completion': {
      const p = parsed.body.prompt;
      return typeof p !== 'string' && typeof p[0] === 'number' ? (p as number[]) : undefined;
    }
    case 'generate': {
      const ids = parsed.body.input_ids;
      if (!ids) return undefined;
      return Array.isArray(ids[0]) ? ids[0] : (ids as number[]);
    }
  }
}

/** What the model's tokenizer needs to compute the prompt's ids; undefined for a batch of prompts. */
export function computeTokenizerInput(parsed: ParsedBody): TokenizerInput | undefined {
  switch (parsed.kind) {
    case 'chat': {
      const b = parsed.body as ChatBody & { chat_template_kwargs?: unknown; reasoning_effort?: unknown };
      const kwargs = b.chat_template_kwargs;
      // SGLang passes both to the template: the request's kwargs, and reasoning_effort when set.
      const templateKwargs = {
        ...(kwargs !== null && typeof kwargs === 'object' ? (kwargs as Record<string, unknown>) : {}),
        ...(typeof b.reasoning_effort === 'string' ? { reasoning_effort: b.reasoning_effort } : {}),
      };
      return { kind: 'chat', messages: b.messages, templateKwargs };
    }
    case 'completion':
      return typeof parsed.body.prompt === 'string' ? { kind: 'text', text: parsed.body.prompt } : undefined;
    case 'generate':
      return typeof parsed.body.text === 'string' ? { kind: 'text', text: parsed.body.text } : undefined;
  }
}

/** The cache_salt to stamp: one rule for the gateway and Tasks, in the SGLang contract. */
export { combineCacheSalt as computeEffectiveSalt } from '#sglang/salt.ts';

/**
 * The output bound the request set, for the policy's decode prediction: chat's
 * max_completion_tokens or max_tokens, completion's max_tokens, /generate's
 * sampling_params.max_new_tokens. Undefined when unset or not a positive integer (the runtime
 * judges those; this is only a prediction).
 */
export function computeMaxTokens(parsed: ParsedBody): number | undefined {
  const b = parsed.body as Record<string, unknown>;
  const sp = b['sampling_params'];
  const candidates =
    parsed.kind === 'generate'
      ? [
          sp !== null && typeof sp === 'object'
            ? (sp as Record<string, unknown>)['max_new_tokens']
            : undefined,
        ]
      : [b['max_completion_tokens'], b['max_tokens']];
  for (const v of candidates) if (typeof v === 'number' && Number.isInteger(v) && v > 0) return v;
  return undefined;
}
