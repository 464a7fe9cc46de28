// POST /generate: SGLang's native API (entrypoints/http_server.py, io_struct.py).

import type http from 'node:http';
import {
  buildMetaInfo,
  buildNamespace,
  partialText,
  type FinishReason,
  type OutputPlan,
} from './generation.ts';
import { HttpError, nativeError, readJson, sendJson, startSse, writeSse } from './http-util.ts';
import { GenerateRequest, formatZodError, type SamplingParams } from './schemas.ts';
import type { Bootstrap, GenerationInput, GenerationOutcome, SimServer } from './server.ts';
import { encode } from './tokenizer.ts';

export interface AbortState {
  aborted: boolean;
  onAbort?: () => void;
}

/** Track the client going away: aborts the engine request, as SGLang does on disconnect. */
export function watchClient(res: http.ServerResponse): AbortState {
  const state: AbortState = { aborted: false };
  res.on('close', () => {
    if (res.writableFinished) return;
    state.aborted = true;
    state.onAbort?.();
  });
  return state;
}

export function toStopRules(
  stop: string | readonly string[] | null | undefined,
  stopTokenIds: readonly number[] | null | undefined,
) {
  return {
    stop: stop === null || stop === undefined ? [] : typeof stop === 'string' ? [stop] : [...stop],
    stopTokenIds: stopTokenIds ?? [],
  };
}

export function toBootstrap(
  host: string | null | undefined,
  port: number | null | undefined,
  room: number | null | undefined,
): Bootstrap | null {
  return host != null && port != null && room != null ? { host, port, room } : null;
}

function seedOf(server: SimServer, sp: SamplingParams | undefined): number {
  return sp?.sampling_seed ?? sp?.seed ?? server.config.sglang.random_seed ?? 0;
}

interface PreparedItem {
  readonly input: GenerationInput;
}

function prepare(server: SimServer, body: GenerateRequest, delayMs: number): PreparedItem[] {
  const given = [body.text, body.input_ids, body.input_embeds].filter((x) => x !== undefined).length;
  if (given === 0) throw new HttpError(400, 'Either text, input_ids or input_embeds should be provided.');
  if (given > 1) throw new HttpError(400, 'Only one of text, input_ids, or input_embeds can be provided.');
  if (body.input_embeds !== undefined)
    throw new HttpError(400, 'input_embeds is not supported by this model.');
  let prompts: number[][];
  if (body.text !== undefined)
    prompts = typeof body.text === 'string' ? [encode(body.text)] : body.text.map(encode);
  else {
    const ids = body.input_ids ?? [];
    prompts = Array.isArray(ids[0]) ? (ids as number[][]) : [ids as number[]];
  }
  const isBatch = Array.isArray(body.text) || Array.isArray(body.input_ids?.[0]);
  if (isBatch && body.stream) throw new HttpError(400, 'The simulator does not stream batch requests.');
  const sps = Array.isArray(body.sampling_params)
    ? body.sampling_params
    : prompts.map(() => body.sampling_params);
  if (sps.length !== prompts.length) throw new HttpError(400, 'sampling_params must match the batch size.');
  const rids = Array.isArray(body.rid) ? body.rid : null;
  const bootstrap = toBootstrap(body.bootstrap_host, body.bootstrap_port, body.bootstrap_room);
  const anyBootstrap =
    body.bootstrap_host != null || body.bootstrap_port != null || body.bootstrap_room != null;
  return prompts.map((promptIds, i) => {
    const sp = Array.isArray(body.sampling_params) ? body.sampling_params[i] : body.sampling_params;
    if ((sp?.n ?? 1) !== 1)
      throw new HttpError(400, 'sampling_params.n > 1 is not supported by the simulator.');
    server.validateGeneration(promptIds.length, bootstrap, anyBootstrap);
    return {
      input: {
        rid: rids?.[i] ?? (typeof body.rid === 'string' && !isBatch ? body.rid : server.newRid()),
        promptIds,
        maxNewTokens: sp?.max_new_tokens ?? 128,
        seed: seedOf(server, sp),
        rules: toStopRules(sp?.stop, sp?.stop_token_ids),
        namespace: buildNamespace(body.cache_salt, body.extra_key),
        bootstrap,
        delayMs,
      },
    };
  });
}

function responseOf(o: GenerationOutcome, rid: string): Record<string, unknown> {
  const ids = o.plan.outputIds.slice(0, o.completionTokens);
  return {
    text: partialText(o.plan, o.completionTokens),
    output_ids: ids,
    meta_info: buildMetaInfo(rid, o.result, o.finish, o.completionTokens, o.result.promptTokens),
  };
}

function abortStatus(f: FinishReason): number | null {
  return f.type === 'abort' ? f.status_code : null;
}

export async function handleGenerate(
  server: SimServer,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  delayMs = 0,
): Promise<void> {
  const parsed = GenerateRequest.safeParse(await readJson(req));
  if (!parsed.success) throw new HttpError(400, formatZodError(parsed.error));
  const body = parsed.data;
  const items = prepare(server, body, delayMs);
  const state = watchClient(res);
  if (body.stream) {
    const item = items[0];
    if (!item) return;
    await streamGenerate(server, item.input, res, state);
    return;
  }
  const outcomes = await Promise.all(
    items.map((it) => server.runGeneration(it.input, () => undefined, state)),
  );
  if (state.aborted) return;
  const first = outcomes[0];
  const status = first ? abortStatus(first.finish) : null;
  if (outcomes.length === 1 && first && status !== null && first.finish.type === 'abort') {
    sendJson(res, status, nativeError(first.finish.message, status), server.headers);
    return;
  }
  const bodies = outcomes.map((o, i) => responseOf(o, items[i]?.input.rid ?? ''));
  const isBatch = Array.isArray(body.text) || Array.isArray(body.input_ids?.[0]);
  sendJson(res, 200, isBatch ? bodies : bodies[0], server.headers);
}

async function streamGenerate(
  server: SimServer,
  input: GenerationInput,
  res: http.ServerResponse,
  state: AbortState,
): Promise<void> {
  startSse(res, server.headers);
  const incremental = server.config.sglang.incremental_streaming_output;
  let sent = 0;
  let sentText = '';
  const chunk = (plan: OutputPlan, n: number, meta: Record<string, unknown>): void => {
    const text = partialText(plan, n);
    writeSse(res, {
      text: incremental ? text.slice(sentText.length) : text,
      output_ids: incremental ? plan.outputIds.slice(sent, n) : plan.outputIds.slice(0, n),
      meta_info: meta,
    });
    sent = n;
    sentText = text;
  };
  const outcome = await server.runGeneration(
    input,
    (n, plan, isLast, cached) => {
      // The last token goes out with the final chunk, which carries finish_reason.
      if (state.aborted || isLast) return;
      const sofar = {
        cachedTokens: cached.device + cached.host,
        cachedDevice: cached.device,
        cachedHost: cached.host,
        e2eMs: 0,
      };
      chunk(plan, n, buildMetaInfo(input.rid, sofar, null, n, input.promptIds.length));
    },
    state,
  );
  if (state.aborted) return;
  if (outcome.finish.type === 'abort') {
    writeSse(res, { error: { message: outcome.finish.message, code: outcome.finish.status_code } });
  } else {
    const n = outcome.completionTokens;
    chunk(
      outcome.plan,
      n,
      buildMetaInfo(input.rid, outcome.result, outcome.finish, n, input.promptIds.length),
    );
  }
  writeSse(res, '[DONE]');
  res.end();
}
