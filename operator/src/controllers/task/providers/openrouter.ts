// OpenRouter provider: one text-only Chat Completions request, pinned to one
// upstream provider, no fallbacks, no retries, no tools, no model list.
//
// Request: POST {baseUrl}/chat/completions with one `model`, the messages,
// max_tokens (the output cap), the sampling, stream: false and
//   provider: { only: [p], order: [p], allow_fallbacks: false,
//               require_parameters: true, max_price: { request: 0 } }
//   usage: { include: true }  (OpenRouter now always reports usage; kept explicit)
// These are requested upstream controls, not a guarantee about OpenRouter's internals.
// Response: one choice with string content (text only); `provider` must be the
// pinned one — a display name matches a base slug when both normalize to the
// same lower-case alphanumerics ("Google Vertex" ~ "google-vertex"); a missing
// or different provider fails closed (ProviderMismatch). Usage is read under
// the task's cache-write contract (usage.ts).
// The base URL is the operator's flag (constructor option), never a Task field.
// The API key goes only into the Authorization header and never into an error.
import { z } from 'zod';
import type { GenerateCall } from '../attempt/call.ts';
import { TaskReason } from '../attempt/reasons.ts';
import { err, ok, type AttemptOutcome } from '../attempt/types.ts';
import { computeOpenRouterUsage, toAttemptError } from '../attempt/usage.ts';
import { parseWith, postJson, providerError } from './http.ts';

export interface OpenRouterProviderOptions {
  /** The operator's --openrouter-base-url, e.g. https://openrouter.ai/api/v1. */
  baseUrl: string;
  timeoutMs?: number;
  signal?: AbortSignal;
}

const ChatResponse = z.looseObject({
  provider: z.string().nullish(),
  model: z.string().nullish(),
  error: z.unknown().optional(),
  choices: z
    .array(
      z.looseObject({
        message: z.looseObject({
          content: z.string().nullish(),
          tool_calls: z.array(z.unknown()).nullish(),
        }),
        finish_reason: z.string().nullish(),
        error: z.unknown().optional(),
      }),
    )
    .length(1),
  usage: z.unknown().optional(),
});

export function normalizeProviderName(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]/g, '');
}

export function buildOpenRouterBody(call: GenerateCall): Record<string, unknown> {
  if (call.target.provider !== 'openrouter' || call.prepared.kind !== 'messages')
    throw new TypeError('buildOpenRouterBody takes an OpenRouter call with messages');
  const id = call.target.identity;
  const s = call.sampling;
  const body: Record<string, unknown> = {
    model: id.model,
    messages: call.prepared.messages.map((m) => ({ role: m.role, content: m.content })),
    max_tokens: call.maxNewTokens,
    temperature: s.temperature,
    stream: false,
    provider: {
      only: [id.upstreamProvider],
      order: [id.upstreamProvider],
      allow_fallbacks: false,
      require_parameters: true,
      max_price: { request: 0 },
    },
    usage: { include: true },
  };
  if (s.topP !== undefined) body['top_p'] = s.topP;
  if (s.topK !== undefined) body['top_k'] = s.topK;
  if (s.seed !== undefined) body['seed'] = s.seed;
  if (s.stop !== undefined) body['stop'] = s.stop;
  return body;
}

export async function generateWithOpenRouter(
  call: GenerateCall,
  apiKey: string,
  opts: OpenRouterProviderOptions,
): Promise<AttemptOutcome> {
  if (call.target.provider !== 'openrouter' || call.prepared.kind !== 'messages')
    return providerError('WrongProvider', 'the OpenRouter provider takes an OpenRouter target and messages');
  const id = call.target.identity;
  // The fingerprint names the base URL; refuse to send elsewhere.
  if (id.baseUrl !== opts.baseUrl)
    return providerError('BaseUrlChanged', 'the OpenRouter base URL changed since the task started');
  if (apiKey === '') return providerError('NoApiKey', 'the API key Secret value is empty');
  const secrets = [apiKey];
  const answer = await postJson(
    `${opts.baseUrl.replace(/\/+$/, '')}/chat/completions`,
    buildOpenRouterBody(call),
    {
      timeoutMs: opts.timeoutMs ?? 300_000,
      signal: opts.signal,
      headers: { authorization: `Bearer ${apiKey}` },
      secrets,
    },
  );
  if (!answer.ok) return answer;
  const parsed = parseWith(ChatResponse, answer.value, 'POST /chat/completions');
  if (!parsed.ok) return providerError(parsed.error.code, parsed.error.message, secrets);
  const r = parsed.value;
  const choice = r.choices[0];
  if (r.error !== undefined || choice?.error !== undefined)
    return providerError('UpstreamError', 'POST /chat/completions: the response carries an error');
  if (!choice || typeof choice.message.content !== 'string' || (choice.message.tool_calls?.length ?? 0) > 0)
    return providerError('NotText', 'POST /chat/completions: the answer is not one text message');
  const servedBy = r.provider ?? '';
  if (normalizeProviderName(servedBy) !== normalizeProviderName(id.upstreamProvider))
    return err({
      reason: TaskReason.ProviderMismatch,
      code: 'ProviderMismatch',
      message: `the response names provider ${JSON.stringify(servedBy)}, the task pins ${id.upstreamProvider}`,
    });
  const usage = computeOpenRouterUsage(r.usage, { cacheWriteUsage: id.cacheWriteUsage });
  if (!usage.ok) return err(toAttemptError(usage.error));
  const value = {
    text: choice.message.content,
    usage: usage.value,
    inputTokens: id.inputTokenUpperBound,
    servedBy,
  };
  return ok(choice.finish_reason ? { ...value, finishReason: choice.finish_reason } : value);
}
