// POST /generate: SGLang's native API (entrypoints/http_server.py, io_struct.py).

import type http from 'node:http';
import { buildNamespace, partialText, type FinishReason, type OutputPlan } from './generation.ts';
import {
  HttpError,
  httpExceptionError,
  nativeError,
  readJson,
  sendJson,
  startSse,
  writeSse,
} from './http-util.ts';
import { buildMetaInfo, type MetaStage, type RequestTimes } from './meta-info.ts';
import { checkSamplingContract, verifySampling } from './sampling.ts';
import { GenerateRequest, SamplingParamsOrList, formatZodError, type SamplingParams } from './schemas.ts';
import type { Bootstrap, GenerationInput, GenerationOutcome, SimServer } from './server.ts';
import { encode } from './tokenizer.ts';
import { splitOf, type CachedSplit } from './engine.ts';

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
  return sp?.sampling_seed ?? server.config.sglang.random_seed ?? 0;
}

/**
 * The proto contract gate, right after FastAPI's parse (http_server.generate_request);
 * returns the sampling parameters it admitted.
 */
function checkContract(sp: unknown): SamplingParams | SamplingParams[] | undefined {
  for (const one of Array.isArray(sp) ? sp : [sp]) {
    const refusal = checkSamplingContract(one);
    if (refusal !== null) throw new HttpError(400, refusal, 'contract');
  }
  const parsed = SamplingParamsOrList.safeParse(sp);
  if (!parsed.success) throw new HttpError(400, formatZodError(parsed.error), 'contract');
  return parsed.data ?? undefined;
}

interface PreparedItem {
  readonly input: GenerationInput;
}

function prepare(
  server: SimServer,
  body: GenerateRequest,
  sampling: SamplingParams | SamplingParams[] | undefined,
  delayMs: number,
): PreparedItem[] {
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
  const sps = Array.isArray(sampling) ? sampling : prompts.map(() => sampling);
  if (sps.length !== prompts.length) throw new HttpError(400, 'sampling_params must match the batch size.');
  const rids = Array.isArray(body.rid) ? body.rid : null;
  const bootstrap = toBootstrap(body.bootstrap_host, body.bootstrap_port, body.bootstrap_room);
  const anyBootstrap =
    body.bootstrap_host != null || body.bootstrap_port != null || body.bootstrap_room != null;
  return prompts.map((promptIds, i) => {
    const sp = Array.isArray(sampling) ? sampling[i] : sampling;
    const refusal = verifySampling(sp ?? {});
    if (refusal !== null) throw new HttpError(400, refusal);
    if ((sp?.n ?? 1) !== 1)
      throw new HttpError(400, 'sampling_params.n > 1 is not supported by the simulator.');
    server.validateGeneration(promptIds.length, bootstrap, anyBootstrap, sp?.max_new_tokens ?? 0);
    return {
      input: {
        rid: rids?.[i] ?? (typeof body.rid === 'string' && !isBatch ? body.rid : server.newRid()),
        promptIds,
        maxNewTokens: sp?.max_new_tokens ?? 128,
        samplingMaxNewTokens: sp?.max_new_tokens === undefined ? 128 : sp.max_new_tokens,
        seed: seedOf(server, sp),
        rules: toStopRules(sp?.stop, sp?.stop_token_ids),
        namespace: buildNamespace(body.cache_salt, body.extra_key),
        priority: body.priority,
        routingKey: body.routing_key,
        bootstrap,
        delayMs,
        stream: body.stream === true,
      },
    };
  });
}

/** A finished request's times on the epoch clock. */
export function timesOf(server: SimServer, o: GenerationOutcome): RequestTimes {
  const r = o.result;
  const at = (ms: number): number => server.toEpochSeconds(ms);
  return {
    receivedAt: at(r.arrivedAt),
    forwardEntryAt: at(r.arrivedAt + r.queueMs),
    prefillFinishedAt: at(r.arrivedAt + r.ttftMs),
    firstTokenAt: at(r.arrivedAt + r.ttftMs),
    finishedAt: at(r.arrivedAt + r.e2eMs),
  };
}

/** Times of a request still running (a stream chunk): what is known so far. */
function runningTimes(server: SimServer, receivedMs: number): RequestTimes {
  const now = server.toEpochSeconds(server.clock.now());
  const receivedAt = server.toEpochSeconds(receivedMs);
  return { receivedAt, forwardEntryAt: now, prefillFinishedAt: now, firstTokenAt: now, finishedAt: now };
}

function metaOf(
  server: SimServer,
  rid: string,
  o: { finish: FinishReason | null; promptTokens: number; completionTokens: number; cached: CachedSplit },
  times: RequestTimes,
  stage: MetaStage,
): Record<string, unknown> {
  return buildMetaInfo({
    rid,
    finish: o.finish,
    promptTokens: o.promptTokens,
    completionTokens: o.completionTokens,
    cachedDevice: o.cached.device,
    cachedHost: o.cached.host,
    ...(o.cached.storage === undefined ? {} : { cachedStorage: o.cached.storage }),
    storageBackend: server.engine.l3?.config.backendName ?? null,
    times,
    stage,
    enableMetrics: server.config.sglang.enable_metrics,
    dpRank: server.dpRank,
  });
}

function finalMeta(server: SimServer, o: GenerationOutcome, rid: string): Record<string, unknown> {
  const cached = splitOf(o.result);
  const counts = { promptTokens: o.result.promptTokens, completionTokens: o.completionTokens, cached };
  return metaOf(server, rid, { ...counts, finish: o.finish }, timesOf(server, o), 'final');
}

function responseOf(server: SimServer, o: GenerationOutcome, rid: string): Record<string, unknown> {
  const ids = o.plan.outputIds.slice(0, o.completionTokens);
  return {
    text: partialText(o.plan, o.completionTokens),
    output_ids: ids,
    meta_info: finalMeta(server, o, rid),
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
  if (!parsed.success) throw new HttpError(400, formatZodError(parsed.error), 'validation');
  const body = parsed.data;
  const sampling = checkContract(body.sampling_params);
  const items = prepare(server, body, sampling, delayMs);
  const state = watchClient(res);
  if (body.stream) {
    const isBatch = Array.isArray(body.text) || Array.isArray(body.input_ids?.[0]);
    startSse(res, server.headers);
    // A batch streams its items' chunks as they come, each with its `index`
    // (tokenizer_manager._stream_batch_responses), then one [DONE].
    await Promise.all(
      items.map((it, i) => streamGenerate(server, it.input, res, state, isBatch ? i : undefined)),
    );
    if (state.aborted) return;
    writeSse(res, '[DONE]');
    res.end();
    return;
  }
  const outcomes = await Promise.all(
    items.map((it) => server.runGeneration(it.input, () => undefined, state)),
  );
  if (state.aborted) return;
  const first = outcomes[0];
  const status = first ? abortStatus(first.finish) : null;
  if (outcomes.length === 1 && first && status !== null && first.finish.type === 'abort') {
    // tokenizer_manager._handle_abort_finish_reason: a ValueError for 400, else an HTTPException.
    const message = first.finish.message;
    sendJson(
      res,
      status,
      status === 400 ? nativeError(message) : httpExceptionError(message, status),
      server.headers,
    );
    return;
  }
  const bodies = outcomes.map((o, i) => responseOf(server, o, items[i]?.input.rid ?? ''));
  const isBatch = Array.isArray(body.text) || Array.isArray(body.input_ids?.[0]);
  sendJson(res, 200, isBatch ? bodies : bodies[0], server.headers);
}

async function streamGenerate(
  server: SimServer,
  input: GenerationInput,
  res: http.ServerResponse,
  state: AbortState,
  /** The item's place in a batch; undefined for a single prompt (SGLang sends no `index` then). */
  index: number | undefined,
): Promise<void> {
  const incremental = server.config.sglang.incremental_streaming_output;
  const receivedMs = server.clock.now();
  let sent = 0;
  let sentText = '';
  let stage: MetaStage = 'first';
  const chunk = (plan: OutputPlan, n: number, meta: Record<string, unknown>): void => {
    const text = partialText(plan, n);
    writeSse(res, {
      text: incremental ? text.slice(sentText.length) : text,
      output_ids: incremental ? plan.outputIds.slice(sent, n) : plan.outputIds.slice(0, n),
      meta_info: meta,
      ...(index === undefined ? {} : { index }),
    });
    sent = n;
    sentText = text;
  };
  const promptTokens = input.promptIds.length;
  const outcome = await server.runGeneration(
    input,
    (n, plan, isLast, cached) => {
      // The last token goes out with the final chunk, which carries finish_reason.
      if (state.aborted || isLast) return;
      const counts = { finish: null, promptTokens, completionTokens: n, cached };
      chunk(plan, n, metaOf(server, input.rid, counts, runningTimes(server, receivedMs), stage));
      stage = 'middle';
    },
    state,
  );
  if (state.aborted) return;
  // An abort (with its status) is a chunk like any other, finish_reason {type: abort, ...}
  // (tokenizer_manager._handle_abort_finish_reason returns it for streams).
  chunk(outcome.plan, outcome.completionTokens, finalMeta(server, outcome, input.rid));
}
