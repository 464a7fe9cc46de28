import { z } from 'zod';
import type { ClientOptions, FetchResult } from './client.ts';
import { buildRuntimeAuthHeaders } from '#api/runtime-key.ts';

/** SGLang's `meta_info` on a finished `/generate` (managers/io_struct.py, schedule_batch.py). */
export const MetaInfo = z.looseObject({
  id: z.string().optional(),
  prompt_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  cached_tokens: z.number().int().optional(),
  cached_tokens_details: z
    .looseObject({ device: z.number().int().optional(), host: z.number().int().optional() })
    .nullish(),
  finish_reason: z
    .looseObject({ type: z.string(), message: z.string().optional(), length: z.number().optional() })
    .nullish(),
  e2e_latency: z.number().optional(),
});
export type MetaInfo = z.infer<typeof MetaInfo>;

export const GenerateResponse = z.looseObject({
  text: z.string(),
  output_ids: z.array(z.number().int()).optional(),
  meta_info: MetaInfo,
});
export type GenerateResponse = z.infer<typeof GenerateResponse>;

/**
 * SGLang 0.5.23's sampling parameters (api/v1 SamplingParams, which refuses
 * any other key with a 400: the seed is `sampling_seed`, never `seed`).
 */
export interface SamplingParams {
  max_new_tokens?: number;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  stop?: string[];
  sampling_seed?: number;
}

export interface GenerateRequest {
  text?: string;
  input_ids?: number[];
  sampling_params?: SamplingParams;
  cache_salt?: string;
  extra_key?: string;
  rid?: string;
  bootstrap_host?: string;
  bootstrap_port?: number;
  bootstrap_room?: number;
  stream?: false;
}

export const TokenizeResponse = z.looseObject({
  tokens: z.array(z.number().int()),
  count: z.number().int(),
  max_model_len: z.number().int().nullish(),
});
export type TokenizeResponse = z.infer<typeof TokenizeResponse>;

async function postJson<S extends z.ZodType>(
  url: string,
  body: unknown,
  schema: S,
  opts: ClientOptions,
): Promise<FetchResult<z.infer<S>>> {
  const signals = [AbortSignal.timeout(opts.timeoutMs ?? 60_000)];
  if (opts.signal) signals.push(opts.signal);
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...buildRuntimeAuthHeaders(opts.apiKey) },
      body: JSON.stringify(body),
      signal: AbortSignal.any(signals),
    });
  } catch (err) {
    return { ok: false, error: `POST ${url}: ${(err as Error).message}` };
  }
  const text = await res.text();
  if (!res.ok) return { ok: false, error: `POST ${url}: HTTP ${res.status}`, status: res.status };
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, error: `POST ${url}: response is not JSON` };
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      ok: false,
      error: `POST ${url}: unexpected shape at ${issue?.path.join('.') ?? ''}: ${issue?.message ?? ''}`,
    };
  }
  return { ok: true, value: parsed.data };
}

/** Native, non-streaming generation. */
export function postGenerate(
  baseUrl: string,
  req: GenerateRequest,
  opts: ClientOptions = {},
): Promise<FetchResult<GenerateResponse>> {
  return postJson(`${baseUrl}/generate`, { ...req, stream: false }, GenerateResponse, opts);
}

/** Tokenizes with the runtime's own tokenizer, so counts are the runtime's counts. */
export function postTokenize(
  baseUrl: string,
  prompt: string,
  opts: ClientOptions & { addSpecialTokens?: boolean } = {},
): Promise<FetchResult<TokenizeResponse>> {
  return postJson(
    `${baseUrl}/tokenize`,
    { prompt, add_special_tokens: opts.addSpecialTokens ?? true },
    TokenizeResponse,
    opts,
  );
}

/**
 * Chat messages rendered and tokenized as SGLang renders them for a chat completion (its /tokenize
 * with `messages`, entrypoints/openai/protocol.py TokenizeRequest), with the template's variables
 * `chatTemplateKwargs` (e.g. `date_string`, which Llama 3.x templates write as "Today Date").
 */
export function postTokenizeMessages(
  baseUrl: string,
  messages: readonly { role: string; content: string }[],
  opts: ClientOptions & { chatTemplateKwargs?: Readonly<Record<string, unknown>> } = {},
): Promise<FetchResult<TokenizeResponse>> {
  const kwargs = opts.chatTemplateKwargs ? { chat_template_kwargs: opts.chatTemplateKwargs } : {};
  return postJson(`${baseUrl}/tokenize`, { messages, ...kwargs }, TokenizeResponse, opts);
}

/** SGLang's chat `usage` (entrypoints/openai/usage_processor.py); cached tokens with --enable-cache-report. */
export const ChatUsage = z.looseObject({
  prompt_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  prompt_tokens_details: z.looseObject({ cached_tokens: z.number().int().optional() }).nullish(),
});

export const ChatCompletionResponse = z.looseObject({
  choices: z.array(z.looseObject({ finish_reason: z.string().nullish() })),
  usage: ChatUsage.nullish(),
});
export type ChatCompletionResponse = z.infer<typeof ChatCompletionResponse>;

/**
 * Non-streaming chat completion: the runtime renders `messages` with its own
 * chat template, as it does for the gateway's chat requests.
 */
export function postChatCompletion(
  baseUrl: string,
  req: Readonly<Record<string, unknown>>,
  opts: ClientOptions = {},
): Promise<FetchResult<ChatCompletionResponse>> {
  return postJson(`${baseUrl}/v1/chat/completions`, { ...req, stream: false }, ChatCompletionResponse, opts);
}
