// Info, health, cache, tokenizer, load and metrics endpoints (entrypoints/http_server.py, v1_loads.py).

import type http from 'node:http';
import type { AbortState } from './api-generate.ts';
import { FAKE_BOOTSTRAP_HOST } from './pd.ts';
import { HttpError, readJson, sendBare, sendJson, sendText } from './http-util.ts';
import {
  InvalidSections,
  buildLoadSnapshot,
  parseInclude,
  renderLoadsPrometheus,
  selectSections,
} from './loads.ts';
import { applyChatTemplate } from './generation.ts';
import { renderMetrics } from './metrics.ts';
import { DetokenizeRequest, TokenizeRequest, formatZodError } from './schemas.ts';
import type { SimServer } from './server.ts';
import {
  buildInternalState,
  buildKvCacheGb,
  buildModelCard,
  buildModelInfo,
  buildServerArgs,
  buildServerInfoExtras,
} from './server-info.ts';
import { VOCAB_SIZE, decode, encode } from './tokenizer.ts';

const HEALTH_TIMEOUT_MS = 20_000;
const HEALTH_POLL_MS = 1_000;

export function buildServerInfo(server: SimServer): Record<string, unknown> {
  const s = server.engine.snapshot();
  return {
    ...buildServerArgs(server),
    ...buildServerInfoExtras(server),
    status: 'ready',
    max_total_num_tokens: server.serving.maxTotalTokens,
    max_req_input_len: server.serving.maxReqInputLen,
    internal_states: [buildInternalState(server, s.genThroughput)],
    version: server.config.sim.version,
    // describe_kv_events_publisher: null unless KV events are published (kv-events-config.ts).
    kv_events: server.kvEvents?.descriptor ?? null,
  };
}

export { buildModelInfo };

async function checkHealth(server: SimServer, res: http.ServerResponse): Promise<void> {
  // Shutting down (after SIGTERM) or still starting: 503 without a generation.
  if (!server.isReady()) {
    sendBare(res, 503);
    return;
  }
  // The check's own request is one the watchdog waits for (rid_to_state).
  server.sigterm.track(res);
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
      sendBare(res, 200);
      return;
    }
  }
  abortHealthCheck(abort);
  sendBare(res, 503);
}

/** SGLang cancels its health request once answered; the engine need not run it. */
function abortHealthCheck(abort: AbortState): void {
  abort.aborted = true;
  abort.onAbort?.();
}

function handleLoads(server: SimServer, res: http.ServerResponse, url: URL): void {
  const pd = server.metrics.pd;
  const load = buildLoadSnapshot({
    snapshot: server.engine.snapshot(),
    nowEpochSeconds: server.toEpochSeconds(server.clock.now()),
    maxRunningRequests: server.serving.maxRunningRequests,
    waitingPromptTokens: server.engine.waitingPromptTokens,
    pdMode: server.config.sglang.disaggregation_mode,
    pd: { prefillInflight: pd.prefillInflight.total, decodeTransfer: pd.decodeTransfer.total },
    kvCacheGb: buildKvCacheGb(server),
    decodeMoments: server.engine.decodeMoments,
  });
  let selected: Record<string, unknown>;
  try {
    selected = selectSections(load, parseInclude(url.searchParams.get('include')));
  } catch (e) {
    // to_dict raises outside the handler's try: an unhandled error, Starlette's bare 500.
    if (!(e instanceof InvalidSections)) throw e;
    sendText(res, 500, 'Internal Server Error');
    return;
  }
  if (url.searchParams.get('format') === 'prometheus') {
    sendText(res, 200, renderLoadsPrometheus([selected]), 'text/plain; version=0.0.4; charset=utf-8');
    return;
  }
  const body = {
    timestamp: new Date(server.toEpochSeconds(server.clock.now()) * 1000)
      .toISOString()
      .replace('Z', '+00:00'),
    version: server.config.sim.version,
    accelerator: null,
    num_accelerators: server.config.sglang.tp_size * Number(server.config.sglang.pp_size ?? 1),
    loads: [selected],
  };
  sendJson(res, 200, body, server.headers);
}

type Handler = (
  server: SimServer,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  url: URL,
) => Promise<void> | void;

function handleModels(server: SimServer, _req: http.IncomingMessage, res: http.ServerResponse): void {
  const card = buildModelCard(server, Date.now() / 1000);
  sendJson(res, 200, { object: 'list', data: [card] }, server.headers);
}

/** http_server.flush_cache: plain text, no media type. */
function handleFlush(server: SimServer, _req: http.IncomingMessage, res: http.ServerResponse): void {
  if (server.engine.flushCache()) {
    sendBare(
      res,
      200,
      'Cache flushed.\nPlease check backend logs for more details. ' +
        '(When there are running or waiting requests, the operation will not be performed.)\n',
    );
  } else sendBare(res, 400, 'Flush cache failed.\n');
}

async function handleTokenize(
  server: SimServer,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const b = TokenizeRequest.safeParse(await readJson(req));
  if (!b.success) throw new HttpError(400, formatZodError(b.error), 'validation');
  const max = server.serving.contextLength;
  if (b.data.messages) {
    // serving_tokenize.py: rendered by the chat template as a chat completion renders them.
    const rendered = applyChatTemplate(b.data.messages);
    const tokens = b.data.add_generation_prompt === false ? rendered.slice(0, -1) : rendered;
    sendJson(res, 200, { tokens, count: tokens.length, max_model_len: max }, server.headers);
  } else if (typeof b.data.prompt === 'string') {
    const tokens = encode(b.data.prompt);
    sendJson(res, 200, { tokens, count: tokens.length, max_model_len: max }, server.headers);
  } else {
    const tokens = (b.data.prompt ?? []).map(encode);
    sendJson(res, 200, { tokens, count: tokens.map((t) => t.length), max_model_len: max }, server.headers);
  }
}

async function handleDetokenize(
  server: SimServer,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const b = DetokenizeRequest.safeParse(await readJson(req));
  if (!b.success) throw new HttpError(400, formatZodError(b.error), 'validation');
  const bad = b.data.tokens.find((t) => t < 0 || t >= VOCAB_SIZE);
  if (bad !== undefined)
    throw new HttpError(400, `Token id ${bad} is out of the vocabulary (size ${VOCAB_SIZE}).`);
  sendJson(res, 200, { text: decode(b.data.tokens, b.data.skip_special_tokens ?? true) }, server.headers);
}

function handleMetrics(server: SimServer, _req: http.IncomingMessage, res: http.ServerResponse): void {
  const a = server.config.sglang;
  const tree = server.engine.tree;
  const text = renderMetrics({
    modelName: server.serving.servedModelName,
    snapshot: server.engine.snapshot(),
    metrics: server.metrics,
    pdMode: a.disaggregation_mode,
    pageSize: server.serving.pageSize,
    contextLength: server.serving.contextLength,
    dpSize: a.dp_size,
    evictableTokens: tree.evictableDeviceSize,
    hicache: a.enable_hierarchical_cache
      ? {
          totalTokens: server.serving.hostCapacity,
          backedUpTokens: tree.backedUpTokens,
          droppedTokens: tree.droppedHostTokens,
        }
      : null,
    pid: process.pid,
  });
  sendText(res, 200, text, 'text/plain; version=0.0.4; charset=utf-8');
}

const health: Handler = (server, _req, res) => checkHealth(server, res);
/** http_server.ready: 200 when up, 503 while starting or after SIGTERM; no body. */
const ready: Handler = (server, _req, res) => sendBare(res, server.isReady() ? 200 : 503);

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
  routes.set('GET /ready', ready);
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
