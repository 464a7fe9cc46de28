// POST /v1/chat/completions and /v1/completions, after SGLang's OpenAI layer
// (entrypoints/openai/serving_chat.py, serving_completions.py, usage_processor.py).

import type http from 'node:http';
import { toBootstrap, toStopRules, watchClient, type AbortState } from './api-generate.ts';
import { applyChatTemplate, buildNamespace, partialText, type FinishReason } from './generation.ts';
import { HttpError, openAiError, readJson, sendJson, startSse, writeSse } from './http-util.ts';
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

export function buildUsage(server: SimServer, o: GenerationOutcome): Record<string, unknown> {
  const cached = o.result.cachedTokens;
  const prompt = o.result.promptTokens;
  return {
    prompt_tokens: prompt,
    completion_tokens: o.completionTokens,
    total_tokens: prompt + o.completionTokens,
    // Only with --enable-cache-report and a positive count, else null (usage_processor.py).
    prompt_tokens_details:
      server.config.sglang.enable_cache_report && cached > 0 ? { cached_tokens: cached } : null,
    reasoning_tokens: 0,
    completion_tokens_details: null,
  };
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
  const bootstrap = toBootstrap(body.bootstrap_host, body.bootstrap_port, body.bootstrap_room);
  const anyBootstrap =
    body.bootstrap_host != null || body.bootstrap_port != null || body.bootstrap_room != null;
  server.validateGeneration(promptIds.length, bootstrap, anyBootstrap);
  const maxTokens =
    kind === 'chat'
      ? ((body as ChatCompletionRequest).max_completion_tokens ?? body.max_tokens ?? 128)
      : (body.max_tokens ?? 16);
  return {
    rid: body.rid ?? server.newRid(),
    promptIds,
    maxNewTokens: maxTokens,
    seed: body.seed ?? server.config.sglang.random_seed ?? 0,
    rules: toStopRules(body.stop, body.stop_token_ids),
    namespace: buildNamespace(body.cache_salt, body.extra_key),
    bootstrap,
    delayMs,
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
  if (!parsed.success) throw new HttpError(400, formatZodError(parsed.error));
  const body = parsed.data;
  const input = buildInput(server, kind, body, delayMs);
  const state = watchClient(res);
  const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${input.rid}`;
  const created = Math.floor(Date.now() / 1000);
  const model = server.serving.servedModelName;
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
          message: { role: 'assistant', content: text, reasoning_content: null, tool_calls: null },
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
      metadata: { weight_version: 'default' },
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
  let sentText = '';
  let first = true;
  const chunk = (delta: string, finish: string | null, matched: string | number | null): void => {
    const choice =
      kind === 'chat'
        ? {
            index: 0,
            delta: { ...(first ? { role: 'assistant' } : {}), content: delta },
            logprobs: null,
            finish_reason: finish,
            matched_stop: matched,
          }
        : { index: 0, text: delta, logprobs: null, finish_reason: finish, matched_stop: matched };
    first = false;
    writeSse(res, {
      id: ids.id,
      object,
      created: ids.created,
      model: ids.model,
      choices: [choice],
      usage: null,
    });
  };
  const o = await server.runGeneration(
    input,
    (n, plan, isLast) => {
      if (state.aborted || isLast) return;
      const text = partialText(plan, n);
      chunk(text.slice(sentText.length), null, null);
      sentText = text;
    },
    state,
  );
  if (state.aborted) return;
  if (o.finish.type === 'abort') {
    writeSse(res, { error: openAiError(o.finish.message, o.finish.status_code) });
  } else {
    const { reason, matched } = finishReasonOf(o.finish);
    const text = partialText(o.plan, o.completionTokens);
    chunk(text.slice(sentText.length), reason, matched);
    if (ids.includeUsage) {
      writeSse(res, {
        id: ids.id,
        object,
        created: ids.created,
        model: ids.model,
        choices: [],
        usage: buildUsage(server, o),
      });
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
