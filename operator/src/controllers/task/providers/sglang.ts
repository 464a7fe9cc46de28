// SGLang provider: bounded, non-streaming native generation on a verified endpoint.
//
//   1. POST /tokenize the exact prepared prompt (the runtime's own tokenizer),
//      or the chat messages, which the runtime renders with its own chat
//      template as for a chat completion (SGLang 0.5.23's /tokenize takes
//      `messages`), so the ids are exactly what its chat path would prefill;
//   2. check the input cap and the cost cap with that count — before any
//      /generate, so an over-cap input never reaches the engine;
//   3. POST /generate {input_ids, sampling_params{max_new_tokens,…}, cache_salt,
//      stream: false} — to a standalone endpoint, or to a prefill and a decode
//      endpoint at once with bootstrap_host/port/room (the decode answers);
//   4. read meta_info under the usage contract (usage.ts).
// No retries: a failed call fails the attempt.
import { z } from 'zod';
import { planBudgetBefore } from '../attempt/budget.ts';
import type { GenerateCall } from '../attempt/call.ts';
import type { PdPrefill } from '../attempt/target.ts';
import { err, ok, type AttemptOutcome, type Result } from '../attempt/types.ts';
import { computeSglangUsage, toAttemptError } from '../attempt/usage.ts';
import { buildBootstrapFields, computeBootstrapRoom, toRandom32 } from '#sglang/bootstrap.ts';
import { buildRuntimeAuthHeaders } from '#api/runtime-key.ts';
import { parseWith, postJson, providerError, type PostOptions } from './http.ts';

export interface SglangProviderOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Uniform in [0, 1): picks endpoints and the bootstrap room (injected for tests). */
  random?: () => number;
  /** The runtimes' API key (the target's fingerprint's, from its Deployment's key Secret). */
  apiKey?: string | undefined;
}

const TokenizeResponse = z.looseObject({
  tokens: z.array(z.number().int().nonnegative()),
  count: z.number().int(),
});
const GenerateResponse = z.looseObject({
  text: z.string(),
  meta_info: z.unknown().optional(),
});
const FinishReason = z.looseObject({ type: z.string() }).nullish();

function pick<T>(list: readonly T[], random: () => number): T | undefined {
  return list[Math.min(list.length - 1, Math.floor(random() * list.length))];
}

function buildSamplingParams(call: GenerateCall): Record<string, unknown> {
  const s = call.sampling;
  const p: Record<string, unknown> = { max_new_tokens: call.maxNewTokens, temperature: s.temperature };
  if (s.topP !== undefined) p['top_p'] = s.topP;
  if (s.topK !== undefined) p['top_k'] = s.topK;
  if (s.stop !== undefined) p['stop'] = s.stop;
  if (s.seed !== undefined) p['sampling_seed'] = s.seed;
  return p;
}

/**
 * What /tokenize renders: a plain prompt with the tokenizer's special tokens, or
 * messages through the runtime's chat template, as for a chat completion (SGLang then
 * encodes without adding special tokens: the template has them).
 */
export function buildTokenizeBody(call: GenerateCall): Record<string, unknown> {
  if (call.prepared.kind === 'text') return { prompt: call.prepared.text, add_special_tokens: true };
  return { messages: call.prepared.messages };
}

interface Route {
  tokenizeUrl: string;
  generate: { url: string; extra: Record<string, unknown> }[];
}

function planRoute(
  call: GenerateCall,
  random: () => number,
): Result<Route, ReturnType<typeof providerError>['error']> {
  if (call.target.provider !== 'sglang') return providerError('WrongProvider', 'not an SGLang target');
  const route = call.target.route;
  if (route.kind === 'standalone') {
    const url = pick(route.urls, random);
    if (!url) return providerError('NoEndpoint', 'no endpoint');
    return ok({ tokenizeUrl: url, generate: [{ url, extra: {} }] });
  }
  const prefill: PdPrefill | undefined = pick(route.prefill, random);
  const decode = pick(route.decode, random);
  if (!prefill || !decode) return providerError('NoEndpoint', 'no prefill/decode pair');
  const room = computeBootstrapRoom(toRandom32(random));
  const extra = buildBootstrapFields(prefill.bootstrapHost, prefill.bootstrapPort, room);
  return ok({
    tokenizeUrl: prefill.url,
    generate: [
      { url: prefill.url, extra },
      { url: decode, extra },
    ],
  });
}

/** Bounded calls carrying the runtime's API key, which no error text may repeat. */
function buildPostOptions(timeoutMs: number, opts: SglangProviderOptions): PostOptions {
  return {
    timeoutMs,
    signal: opts.signal,
    headers: buildRuntimeAuthHeaders(opts.apiKey),
    secrets: opts.apiKey ? [opts.apiKey] : [],
  };
}

export async function generateWithSglang(
  call: GenerateCall,
  opts: SglangProviderOptions = {},
): Promise<AttemptOutcome> {
  const timeoutMs = opts.timeoutMs ?? 300_000;
  const post = buildPostOptions(timeoutMs, opts);
  if (call.target.provider !== 'sglang')
    return providerError('WrongProvider', 'the SGLang provider takes an SGLang target');
  const route = planRoute(call, opts.random ?? Math.random);
  if (!route.ok) return route;
  const tokenized = await postJson(`${route.value.tokenizeUrl}/tokenize`, buildTokenizeBody(call), post);
  if (!tokenized.ok) return tokenized;
  const tokens = parseWith(TokenizeResponse, tokenized.value, 'POST /tokenize');
  if (!tokens.ok) return tokens;
  const inputIds = tokens.value.tokens;
  if (tokens.value.count !== inputIds.length)
    return providerError(
      'BadResponse',
      `POST /tokenize: count ${tokens.value.count} but ${inputIds.length} tokens`,
    );
  const before = planBudgetBefore({
    budget: call.budget,
    provider: 'sglang',
    inputTokens: inputIds.length,
    maxNewTokens: call.maxNewTokens,
    spent: call.spent,
  });
  if (!before.ok) return err(before.error);
  const body = {
    input_ids: inputIds,
    sampling_params: buildSamplingParams(call),
    cache_salt: call.target.identity.cacheSalt,
    stream: false,
  };
  const answers = await Promise.all(
    route.value.generate.map((g) => postJson(`${g.url}/generate`, { ...body, ...g.extra }, post)),
  );
  // The last answer is the standalone's or the decode's.
  const failed = answers.find((a) => !a.ok);
  if (failed && !failed.ok) return failed;
  const last = answers.at(-1);
  if (!last?.ok) return providerError('NoAnswer', 'POST /generate: no answer');
  const generated = parseWith(GenerateResponse, last.value, 'POST /generate');
  if (!generated.ok) return generated;
  const usage = computeSglangUsage(generated.value.meta_info, {
    sentInputTokens: inputIds.length,
    maxNewTokens: call.maxNewTokens,
  });
  if (!usage.ok) return err(toAttemptError(usage.error));
  const meta = generated.value.meta_info as Record<string, unknown>;
  const finish = FinishReason.safeParse(meta['finish_reason']);
  const finishType = finish.success ? finish.data?.type : undefined;
  if (finishType === 'abort')
    return providerError('Aborted', 'POST /generate: the runtime aborted the request');
  const value = { text: generated.value.text, usage: usage.value, inputTokens: inputIds.length };
  return ok(finishType === undefined ? value : { ...value, finishReason: finishType });
}
