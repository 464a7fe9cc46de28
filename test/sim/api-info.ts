// Info, health, cache, tokenizer, load and metrics endpoints (entrypoints/http_server.py, v1_loads.py).

import type http from 'node:http';
import type { AbortState } from './api-generate.ts';
import { FAKE_BOOTSTRAP_HOST } from './pd.ts';
import { HttpError, readJson, sendJson, sendText } from './http-util.ts';
import { buildLoad, renderLoadsPrometheus, renderMetrics } from './metrics.ts';
import { DetokenizeRequest, LoadsQuery, TokenizeRequest, formatZodError } from './schemas.ts';
import type { SimServer } from './server.ts';
import { VOCAB_SIZE, decode, encode } from './tokenizer.ts';

const HEALTH_TIMEOUT_MS = 20_000;
const HEALTH_POLL_MS = 1_000;

export function buildServerInfo(server: SimServer): Record<string, unknown> {
  const s = server.engine.snapshot();
  return {
    ...server.config.sglang,
    served_model_name: server.serving.servedModelName,
    tokenizer_path: server.serving.tokenizerPath,
    max_running_requests: server.serving.maxRunningRequests,
    max_total_tokens: server.config.sglang.max_total_tokens,
    chunked_prefill_size: server.serving.chunkedPrefillSize,
    page_size: server.serving.pageSize,
    context_length: server.serving.contextLength,
    status: 'ready',
    max_total_num_tokens: server.serving.maxTotalTokens,
    max_req_input_len: server.serving.maxReqInputLen,
    internal_states: [
      {
        ...buildLoad(s, server.serving.maxRunningRequests),
        last_gen_throughput: s.genThroughput,
        memory_usage: { token_capacity: server.serving.maxTotalTokens },
      },
    ],
    version: server.config.sim.version,
    // describe_kv_events_publisher: null unless KV events are published (kv-events-config.ts).
    kv_events: server.kvEvents?.descriptor ?? null,
  };
}

export function buildModelInfo(server: SimServer): Record<string, unknown> {
  return {
    model_path: server.config.sglang.model_path,
    tokenizer_path: server.serving.tokenizerPath,
    is_generation: true,
    preferred_sampling_params: null,
    weight_version: 'default',
    has_image_understanding: false,
    has_audio_understanding: false,
    model_type: 'llama',
    architectures: ['LlamaForCausalLM'],
  };
}

async function checkHealth(server: SimServer, res: http.ServerResponse): Promise<void> {
  if (!server.isHealthy()) {
    sendText(res, 503, '');
    return;
  }
  // SGLang's health_generate: submit one token of input_ids [0] (PD: the fake bootstrap host,
  // room 0), then poll each second; any output from the scheduler since the check began (its own
  // token or another request's) is healthy. Under load that is the first poll, not the end of
  // the queue; 503 only after 20 s without any output.
  const pd = server.config.sglang.disaggregation_mode !== 'null';
  const abort: AbortState = { aborted: false };
  const tokensBefore = server.engine.counters.generationTokens;
  let answered = false;
  void server
    .runGeneration(
      {
        rid: `HEALTH_CHECK_${server.newRid()}`,
        promptIds: [0],
        maxNewTokens: 1,
        seed: 0,
        rules: { stop: [], stopTokenIds: [] },
        namespace: '\u0000health',
        bootstrap: pd
          ? { host: FAKE_BOOTSTRAP_HOST, port: server.config.sglang.disaggregation_bootstrap_port, room: 0 }
          : null,
      },
      () => undefined,
      abort,
    )
    .then((outcome) => (answered = outcome.finish.type !== 'abort'));
  for (let waited = 0; waited < HEALTH_TIMEOUT_MS; waited += HEALTH_POLL_MS) {
    await new Promise<void>((resolve) => server.clock.setTimer(HEALTH_POLL_MS, resolve));
    if (answered || server.engine.counters.generationTokens > tokensBefore) {
      abortHealthCheck(abort);
      sendText(res, 200, '');
      return;
    }
  }
  abortHealthCheck(abort);
  sendText(res, 503, '');
}

/** SGLang cancels its health request once answered; the engine need not run it. */
function abortHealthCheck(abort: AbortState): void {
  abort.aborted = true;
  abort.onAbort?.();
}

async function handleLoads(server: SimServer, res: http.ServerResponse, url: URL): Promise<void> {
  const q = LoadsQuery.safeParse(Object.fromEntries(url.searchParams));
  if (!q.success) throw new HttpError(400, formatZodError(q.error));
  const load = buildLoad(server.engine.snapshot(), server.serving.maxRunningRequests);
  if (q.data.format === 'prometheus') {
    sendText(
      res,
      200,
      renderLoadsPrometheus(load, server.serving.servedModelName),
      'text/plain; version=0.0.4; charset=utf-8',
    );
    return;
  }
  sendJson(
    res,
    200,
    { timestamp: Date.now() / 1000, version: server.config.sim.version, loads: [load] },
    server.headers,
  );
  return Promise.resolve();
}

type Handler = (
  server: SimServer,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  url: URL,
) => Promise<void> | void;

function handleModels(server: SimServer, _req: http.IncomingMessage, res: http.ServerResponse): void {
  const model = server.serving.servedModelName;
  const data = [
    {
      id: model,
      object: 'model',
      created: 0,
      owned_by: 'sglang',
      root: model,
      max_model_len: server.serving.contextLength,
    },
  ];
  sendJson(res, 200, { object: 'list', data }, server.headers);
}

function handleFlush(server: SimServer, _req: http.IncomingMessage, res: http.ServerResponse): void {
  const ok = server.engine.flushCache();
  sendText(
    res,
    ok ? 200 : 400,
    ok ? 'Cache flushed.\n' : 'Cache not flushed: there are running or waiting requests.\n',
  );
}

async function handleTokenize(
  server: SimServer,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const b = TokenizeRequest.safeParse(await readJson(req));
  if (!b.success) throw new HttpError(400, formatZodError(b.error));
  const max = server.serving.contextLength;
  if (typeof b.data.prompt === 'string') {
    const tokens = encode(b.data.prompt);
    sendJson(res, 200, { tokens, count: tokens.length, max_model_len: max }, server.headers);
  } else {
    const tokens = b.data.prompt.map(encode);
    sendJson(res, 200, { tokens, count: tokens.map((t) => t.length), max_model_len: max }, server.headers);
  }
}

async function handleDetokenize(
  server: SimServer,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const b = DetokenizeRequest.safeParse(await readJson(req));
  if (!b.success) throw new HttpError(400, formatZodError(b.error));
  const bad = b.data.tokens.find((t) => t < 0 || t >= VOCAB_SIZE);
  if (bad !== undefined)
    throw new HttpError(400, `Token id ${bad} is out of the vocabulary (size ${VOCAB_SIZE}).`);
  sendJson(res, 200, { text: decode(b.data.tokens, b.data.skip_special_tokens ?? true) }, server.headers);
}

function handleMetrics(server: SimServer, _req: http.IncomingMessage, res: http.ServerResponse): void {
  const text = renderMetrics({
    modelName: server.serving.servedModelName,
    snapshot: server.engine.snapshot(),
    metrics: server.metrics,
    hicache: server.config.sglang.enable_hierarchical_cache,
    pdMode: server.config.sglang.disaggregation_mode,
    pageSize: server.serving.pageSize,
  });
  sendText(res, 200, text, 'text/plain; version=0.0.4; charset=utf-8');
}

const health: Handler = (server, _req, res) => checkHealth(server, res);

/** Routes by "METHOD /path". The new info paths are absent on --sim-legacy-info-only servers, /metrics without --enable-metrics. */
function buildRoutes(server: SimServer): ReadonlyMap<string, Handler> {
  const routes = new Map<string, Handler>();
  const serverInfo: Handler = (s, _req, res) => sendJson(res, 200, buildServerInfo(s), s.headers);
  const modelInfo: Handler = (s, _req, res) => sendJson(res, 200, buildModelInfo(s), s.headers);
  routes.set('GET /get_server_info', serverInfo);
  routes.set('GET /get_model_info', modelInfo);
  if (!server.config.sim.legacyInfoOnly) {
    routes.set('GET /server_info', serverInfo);
    routes.set('GET /model_info', modelInfo);
  }
  routes.set('GET /v1/models', handleModels);
  for (const m of ['GET', 'POST']) {
    routes.set(`${m} /health`, health);
    routes.set(`${m} /health_generate`, health);
    routes.set(`${m} /flush_cache`, handleFlush);
  }
  routes.set('POST /tokenize', handleTokenize);
  routes.set('POST /detokenize', handleDetokenize);
  routes.set('GET /v1/loads', (s, _req, res, url) => handleLoads(s, res, url));
  if (server.config.sglang.enable_metrics) routes.set('GET /metrics', handleMetrics);
  return routes;
}

const routeTables = new WeakMap<SimServer, ReadonlyMap<string, Handler>>();

export async function routeInfo(
  server: SimServer,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  url: URL,
): Promise<void> {
  let routes = routeTables.get(server);
  if (!routes) {
    routes = buildRoutes(server);
    routeTables.set(server, routes);
  }
  const handler = routes.get(`${req.method ?? 'GET'} ${url.pathname}`);
  if (!handler) {
    sendJson(res, 404, { detail: 'Not Found' }, server.headers);
    return;
  }
  await handler(server, req, res, url);
}
