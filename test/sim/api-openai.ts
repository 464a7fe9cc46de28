// POST /v1/chat/completions and /v1/completions, after SGLang's OpenAI layer
// (entrypoints/openai/serving_chat.py, serving_completions.py, usage_processor.py).

import type http from 'node:http';
import { toBootstrap, toStopRules, watchClient, type AbortState } from './api-generate.ts';
import { applyChatTemplate, buildNamespace, partialText, type FinishReason } from './generation.ts';
import { HttpError, openAiError, readJson, sendJson, startSse, writeSse } from './http-util.ts';
import { verifySampling } from './sampling.ts';
import { ChatCompletionRequest, CompletionRequest, formatZodError } from './schemas.ts';
import type { GenerationInput, GenerationOutcome, SimServer } from './server.ts';
import { encode } from './tokenizer.ts';

type Kind = 'chat' | 'completion';
type OpenAiBody = ChatCompletionRequest | CompletionRequest;

function finishReasonOf(f: FinishReason): { reason: string; matched: string | number | null } {
  if (f.type === 'stop') return { reason: 'stop', matched: f.matched };
  if (f.type === 'length') return { reason: 'length', matched: null };
  return { reason: 'abort', matched: null };
}

/** usage_processor.calculate_token_usage: prompt_tokens_details is {cached_tokens: N} with --enable-cache-report, 0 included. */
export function buildUsage(server: SimServer, o: GenerationOutcome): Record<string, unknown> {
  const prompt = o.result.promptTokens;
  return {
    prompt_tokens: prompt,
    total_tokens: prompt + o.completionTokens,
    completion_tokens: o.completionTokens,
    prompt_tokens_details: server.config.sglang.enable_cache_report
      ? { cached_tokens: o.result.cachedTokens }
      : null,
    reasoning_tokens: 0,
    // Set only when there are reasoning tokens; the simulator has none.
    completion_tokens_details: null,
  };
}

/** The completions stream's usage chunk is dumped with exclude_none (serving_completions.py). */
function withoutNulls(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null));
}

/** ChatCompletionResponse/CompletionResponse.metadata (serving_chat.py, serving_completions.py). */
function buildMetadata(completionTokens: number): Record<string, unknown> {
  return {
    weight_version: 'default',
    weight_versions: [{ version: 'default', start: 0, end: completionTokens }],
  };
}

/** ChatCompletionRequest.to_sampling_params: max_completion_tokens or max_tokens, else None. */
function samplingMaxNewTokensOf(
  kind: Kind,
  asked: number | null | undefined,
  maxTokens: number,
): number | null {
  return kind === 'chat' ? (asked ?? null) : maxTokens;
}

function buildInput(server: SimServer, kind: Kind, body: OpenAiBody, delayMs: number): GenerationInput {
  let promptIds: number[];
  if (kind === 'chat') promptIds = applyChatTemplate((body as ChatCompletionRequest).messages);
  else {
    const p = (body as CompletionRequest).prompt;
    if (typeof p === 'string') promptIds = encode(p);
    else if (p.length === 1 && typeof p[0] === 'string') promptIds = encode(p[0]);
    else if (typeof p[0] === 'number') promptIds = p as number[];
    else throw new HttpError(400, 'The simulator serves one prompt a request.');
  }
  if ((body.n ?? 1) !== 1) throw new HttpError(400, 'n > 1 is not supported by the simulator.');
  const refusal = verifySampling({ temperature: body.temperature, top_p: body.top_p }, true);
  if (refusal !== null) throw new HttpError(400, refusal);
  const bootstrap = toBootstrap(body.bootstrap_host, body.bootstrap_port, body.bootstrap_room);
  const anyBootstrap =
    body.bootstrap_host != null || body.bootstrap_port != null || body.bootstrap_room != null;
  const asked =
    kind === 'chat'
      ? ((body as ChatCompletionRequest).max_completion_tokens ?? body.max_tokens)
      : body.max_tokens;
  server.validateGeneration(promptIds.length, bootstrap, anyBootstrap, asked ?? 0);
  const maxTokens = asked ?? (kind === 'chat' ? 128 : 16);
  return {
    rid: body.rid ?? server.newRid(),
    promptIds,
    maxNewTokens: maxTokens,
    samplingMaxNewTokens: samplingMaxNewTokensOf(kind, asked, maxTokens),
    seed: body.seed ?? server.config.sglang.random_seed ?? 0,
    rules: toStopRules(body.stop, body.stop_token_ids),
    namespace: buildNamespace(body.cache_salt, body.extra_key),
    priority: body.priority,
    bootstrap,
    delayMs,
    stream: body.stream === true,
  };
}

async function handle(
  server: SimServer,
  kind: Kind,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  delayMs: number,
): Promise<void> {
  const raw = await readJson(req);
  const parsed = kind === 'chat' ? ChatCompletionRequest.safeParse(raw) : CompletionRequest.safeParse(raw);
  if (!parsed.success) throw new HttpError(400, formatZodError(parsed.error), 'validation');
  const body = parsed.data;
  // serving_base.extract_routing_key: the OpenAI routes take the routing-key policy's key from a header.
  const routingKey = req.headers['x-smg-routing-key'];
  const input = {
    ...buildInput(server, kind, body, delayMs),
    routingKey: typeof routingKey === 'string' ? routingKey : null,
  };
  const state = watchClient(res);
  // The answer's id is the request's rid, bare; its model echoes the request's
  // (`model=request.model` in serving_chat.py/serving_completions.py; "default" when absent).
  const id = input.rid;
  const created = Math.floor(Date.now() / 1000);
  const model = body.model ?? 'default';
  if (body.stream) {
    await stream(
      server,
      kind,
      { id, created, model, includeUsage: body.stream_options?.include_usage === true },
      input,
      res,
      state,
    );
    return;
  }
  const o = await server.runGeneration(input, () => undefined, state);
  if (state.aborted) return;
  if (o.finish.type === 'abort') {
    sendJson(res, o.finish.status_code, openAiError(o.finish.message, o.finish.status_code), server.headers);
    return;
  }
  const { reason, matched } = finishReasonOf(o.finish);
  const text = partialText(o.plan, o.completionTokens);
  const choice =
    kind === 'chat'
      ? {
          index: 0,
          // ChatMessage drops tool_calls when None.
          message: { role: 'assistant', content: text, reasoning_content: null },
          logprobs: null,
          finish_reason: reason,
          matched_stop: matched,
        }
      : { index: 0, text, logprobs: null, finish_reason: reason, matched_stop: matched };
  sendJson(
    res,
    200,
    {
      id,
      object: kind === 'chat' ? 'chat.completion' : 'text_completion',
      created,
      model,
      choices: [choice],
      usage: buildUsage(server, o),
      metadata: buildMetadata(o.completionTokens),
    },
    server.headers,
  );
}

interface StreamIds {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly includeUsage: boolean;
}

/**
 * The chunks SGLang streams (serving_chat.py _generate_chat_stream,
 * serving_completions.py):
 * - chat: a role-only first chunk (delta {reasoning_content, role, content: ""}),
 *   then one chunk per non-empty text delta, then a chunk with finish_reason
 *   and an empty delta; chat chunks carry no usage key;
 * - completions: one chunk per token (empty text included), the last with
 *   finish_reason, each with usage null;
 * - with stream_options.include_usage, a usage chunk with no choices (the
 *   completions one dumped without nulls); then [DONE].
 */
async function stream(
  server: SimServer,
  kind: Kind,
  ids: StreamIds,
  input: GenerationInput,
  res: http.ServerResponse,
  state: AbortState,
): Promise<void> {
  startSse(res, server.headers);
  const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  const head = { id: ids.id, object, created: ids.created, model: ids.model };
  const choice = (extra: Record<string, unknown>, finish: string | null, matched: unknown): unknown => ({
    index: 0,
    ...extra,
    logprobs: null,
    finish_reason: finish,
    matched_stop: matched,
  });
  const chatChunk = (delta: Record<string, unknown>, finish: string | null, matched: unknown): void =>
    writeSse(res, {
      ...head,
      choices: [choice({ delta: { reasoning_content: null, ...delta } }, finish, matched)],
    });
  const textChunk = (text: string, finish: string | null, matched: unknown): void =>
    writeSse(res, { ...head, choices: [choice({ text }, finish, matched)], usage: null });
  let sentText = '';
  let first = true;
  const emit = (text: string): void => {
    if (kind === 'chat') {
      if (first) chatChunk({ role: 'assistant', content: '' }, null, null);
      if (text !== '') chatChunk({ content: text }, null, null);
    } else textChunk(text, null, null);
    first = false;
  };
  const o = await server.runGeneration(
    input,
    (n, plan, isLast) => {
      if (state.aborted || (isLast && kind === 'completion')) return;
      const text = partialText(plan, n);
      emit(text.slice(sentText.length));
      sentText = text;
    },
    state,
  );
  if (state.aborted) return;
  if (o.finish.type === 'abort') {
    writeSse(res, { error: openAiError(o.finish.message, o.finish.status_code) });
  } else {
    const { reason, matched } = finishReasonOf(o.finish);
    const rest = partialText(o.plan, o.completionTokens).slice(sentText.length);
    if (kind === 'chat') {
      if (first || rest !== '') emit(rest);
      chatChunk({}, reason, matched);
    } else textChunk(rest, reason, matched);
    if (ids.includeUsage) {
      const usage = buildUsage(server, o);
      writeSse(res, { ...head, choices: [], usage: kind === 'chat' ? usage : withoutNulls(usage) });
    }
  }
  writeSse(res, '[DONE]');
  res.end();
}

export function handleChatCompletions(
  server: SimServer,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  delayMs = 0,
): Promise<void> {
  return handle(server, 'chat', req, res, delayMs);
}

export function handleCompletions(
  server: SimServer,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  delayMs = 0,
): Promise<void> {
  return handle(server, 'completion', req, res, delayMs);
}
