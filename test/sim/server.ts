// The simulator's HTTP shell: SGLang's endpoints over the pure engine.
// Every generation goes through runGeneration (faults, PD handshake, engine);
// the endpoint modules only shape requests and responses.

import { SIMULATOR_HEADER } from '#sglang/simulator.ts';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SGLANG_KEEP_ALIVE_TIMEOUT_MS } from '#sglang/http-server.ts';
import { authLevelOf, decideRequestAuth } from './auth.ts';
import { handleChatCompletions, handleCompletions } from './api-openai.ts';
import { handleGenerate, type AbortState } from './api-generate.ts';
import { routeInfo } from './api-info.ts';
import type { Clock } from './clock.ts';
import { buildEngineConfig, resolveServing, type ResolvedServing, type SimConfig } from './config.ts';
import { Engine, splitOf, type CachedSplit, type RequestResult } from './engine.ts';
import { KvEventsService } from './kv-events-service.ts';
import { abortReason, planOutput, type FinishReason, type OutputPlan, type StopRules } from './generation.ts';
import { HttpError, errorBody, sendJson } from './http-util.ts';
import { SimMetrics, tokenizerPriorityLabel } from './metrics.ts';
import { FAKE_BOOTSTRAP_HOST, RoomRegistry, createBootstrapServer, waitForPrefill } from './pd.ts';
import { SigtermWatchdog } from './sigterm.ts';

export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export const silentLogger: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };

export interface SimServerDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  /** Called by --sim-crash-after; main.ts exits the process. */
  readonly crash: () => void;
  /** Wall milliseconds for a simulated duration (the PD long-poll runs on wall time). */
  readonly toWallMs: (simMs: number) => number;
  /**
   * The server's environment (a process's, or a pod's with its mounts mapped): where the HiCache
   * `file` backend finds its shared directory, SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR.
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

export interface Bootstrap {
  readonly host: string;
  readonly port: number;
  readonly room: number;
}

export interface GenerationInput {
  readonly rid: string;
  readonly promptIds: readonly number[];
  readonly maxNewTokens: number;
  /**
   * SGLang's sampling_params.max_new_tokens as the request left it, before the scheduler clips
   * it (null: none, a chat request without max_tokens); lof orders the queue by the clipped value.
   */
  readonly samplingMaxNewTokens?: number | null;
  readonly seed: number;
  readonly rules: StopRules;
  readonly namespace: string;
  readonly bootstrap: Bootstrap | null;
  /** The request's `priority` (the queue order with --enable-priority-scheduling). */
  readonly priority?: number | null | undefined;
  /** The request's routing key (the queue order with --schedule-policy routing-key). */
  readonly routingKey?: string | null | undefined;
  /** Injected latency before the request reaches the scheduler (model ms). */
  readonly delayMs?: number;
  /** A streamed request (the is_streaming label of the request metrics). */
  readonly stream?: boolean;
}

export interface GenerationOutcome {
  readonly plan: OutputPlan;
  readonly result: RequestResult;
  /** The plan's finish reason, or an abort. */
  readonly finish: FinishReason;
  readonly completionTokens: number;
}

export type ProgressFn = (generated: number, plan: OutputPlan, isLast: boolean, cached: CachedSplit) => void;

export class SimServer {
  readonly config: SimConfig;
  readonly serving: ResolvedServing;
  readonly engine: Engine;
  readonly metrics = new SimMetrics();
  readonly server: http.Server;
  /** KV and load event publishing (--kv-events-config); null when off. */
  readonly kvEvents: KvEventsService | null;
  /** What SIGTERM starts (sigterm.ts): readiness off, generation still served, exit once idle. */
  readonly sigterm: SigtermWatchdog;
  readonly #deps: SimServerDeps;
  readonly #rooms = new RoomRegistry();
  #bootstrapServer: http.Server | null = null;
  #generationCount = 0;
  #received = 0;
  #nextRid = 0;
  #workerId = '';
  readonly #epochAtZero: number;

  constructor(config: SimConfig, deps: SimServerDeps) {
    this.config = config;
    this.#deps = deps;
    this.#epochAtZero = Date.now() / 1000 - deps.clock.now() / 1000;
    this.serving = resolveServing(config);
    this.engine = new Engine(buildEngineConfig(config, deps.env), deps.clock);
    // The PD queue a stats report counts beside the engine's (the other ones are always empty here).
    const mode = config.sglang.disaggregation_mode;
    if (mode === 'prefill') this.engine.countInStatsReports(this.metrics.pd.prefillInflight);
    if (mode === 'decode') this.engine.countInStatsReports(this.metrics.pd.decodeTransfer);
    this.sigterm = new SigtermWatchdog(deps.clock, deps.logger);
    // A non-zero node rank publishes nothing: the schedulers of rank 0 do (its group's leader).
    this.kvEvents = config.sglang.node_rank >= 1 ? null : KvEventsService.build(config, this.engine);
    this.server = http.createServer((req, res) => this.#onRequest(req, res));
    // Idle connections close when SGLang's do; long generations under overload outlive Node's
    // default request/headers timeouts, and SGLang has none.
    this.server.keepAliveTimeout = SGLANG_KEEP_ALIVE_TIMEOUT_MS;
    this.server.requestTimeout = 0;
    this.server.headersTimeout = 0;
  }

  get clock(): Clock {
    return this.#deps.clock;
  }

  get workerId(): string {
    return this.#workerId;
  }

  get headers(): http.OutgoingHttpHeaders {
    return { [SIMULATOR_HEADER]: this.#workerId };
  }

  /** A request id in SGLang's format (uuid4().hex: 32 hex digits); deterministic here. */
  newRid(): string {
    return (this.#nextRid++).toString(16).padStart(32, '0');
  }

  /** Seconds since the epoch at model time `ms` (SGLang's meta_info timestamps). */
  toEpochSeconds(ms: number): number {
    return this.#epochAtZero + ms / 1000;
  }

  /** meta_info.dp_rank: SGLang reports null without DP ranks; the simulator is rank 0 of any. */
  get dpRank(): number | null {
    return this.config.sglang.dp_size > 1 ? 0 : null;
  }

  async listen(port = this.config.sglang.port, host = this.config.sglang.host): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => resolve());
    });
    const actual = (this.server.address() as AddressInfo).port;
    this.#workerId = this.config.sim.workerId ?? `${host}:${actual}`;
    if (this.config.sglang.disaggregation_mode === 'prefill') {
      const bs = createBootstrapServer(this.#rooms);
      await new Promise<void>((resolve, reject) => {
        bs.once('error', reject);
        bs.listen(this.config.sglang.disaggregation_bootstrap_port, host, () => resolve());
      });
      this.#bootstrapServer = bs;
    }
    await this.kvEvents?.open();
    return actual;
  }

  /** The prefill bootstrap server's bound port (the kernel's pick for --disaggregation-bootstrap-port 0); null when none. */
  get bootstrapPort(): number | null {
    const addr = this.#bootstrapServer?.address();
    return addr && typeof addr === 'object' ? addr.port : null;
  }

  /** SIGTERM (main.ts): resolves once SGLang's watchdog would exit the process. */
  terminate(): Promise<void> {
    return this.sigterm.terminate();
  }

  async close(): Promise<void> {
    this.sigterm.stop();
    this.server.closeAllConnections();
    const closing = [new Promise<void>((r) => this.server.close(() => r()))];
    if (this.#bootstrapServer) {
      const bs = this.#bootstrapServer;
      bs.closeAllConnections();
      closing.push(new Promise<void>((r) => bs.close(() => r())));
    }
    await Promise.all(closing);
    await this.kvEvents?.close();
  }

  /** Every HTTP request this server was handed, any path, refused or not (tests count what got through). */
  get requestsReceived(): number {
    return this.#received;
  }

  isHealthy(): boolean {
    return this.clock.now() >= this.config.sim.unhealthyForMs;
  }

  /** SGLang's is_ready(): up (not starting) and not shutting down. */
  isReady(): boolean {
    return this.isHealthy() && !this.sigterm.gracefullyExit;
  }

  #onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.#received++;
    if (this.config.sim.hang) return; // --sim-hang: accept, never answer
    if (this.config.sglang.node_rank >= 1) return this.#serveNonZeroRank(req, res);
    if (!this.#authorized(req, res)) return;
    this.#route(req, res).catch((e: unknown) => {
      const status = e instanceof HttpError ? e.status : 500;
      const message = e instanceof Error ? e.message : String(e);
      if (status >= 500) this.#deps.logger.error('request failed', { url: req.url, error: message });
      if (res.headersSent) {
        res.end();
        return;
      }
      const path = new URL(req.url ?? '/', 'http://sim').pathname;
      const error = e instanceof HttpError ? e : new HttpError(status, message);
      sendJson(res, status, errorBody(error, path), this.headers);
    });
  }

  /**
   * What a node of rank 1 and up serves in SGLang 0.5.23: no API, only the health server
   * (utils/common.launch_dummy_health_check_server, started by Engine._launch_subprocesses once
   * its schedulers are up): /ping, /health and /health_generate answer 200 with no body, without
   * the API key middleware; any other path is FastAPI's 404.
   */
  #serveNonZeroRank(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = new URL(req.url ?? '/', 'http://sim').pathname;
    if (req.method === 'GET' && ['/ping', '/health', '/health_generate'].includes(path)) {
      res.writeHead(this.isHealthy() ? 200 : 503, this.headers).end();
      return;
    }
    sendJson(res, 404, { detail: 'Not Found' }, this.headers);
  }

  /** --api-key / --admin-api-key, before any route, as SGLang's middleware (auth.ts); false when refused here. */
  #authorized(req: http.IncomingMessage, res: http.ServerResponse): boolean {
    const { api_key: apiKey, admin_api_key: adminApiKey } = this.config.sglang;
    if (!apiKey && !adminApiKey) return true;
    const path = new URL(req.url ?? '/', 'http://sim').pathname;
    const decision = decideRequestAuth({
      method: req.method ?? 'GET',
      path,
      authorization: req.headers.authorization,
      apiKey,
      adminApiKey,
      level: authLevelOf(path),
    });
    if (decision.allowed) return true;
    sendJson(res, decision.status, { error: decision.status === 401 ? 'Unauthorized' : 'Forbidden' });
    return false;
  }

  async #route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://sim');
    const path = url.pathname;
    const method = req.method ?? 'GET';
    if (
      method === 'POST' &&
      (path === '/generate' || path === '/v1/chat/completions' || path === '/v1/completions')
    ) {
      // Served while shutting down too: SGLang refuses nothing after SIGTERM.
      this.sigterm.track(res);
      const delayMs = this.#admitGeneration(res, path);
      if (delayMs === null) return;
      if (path === '/generate') await handleGenerate(this, req, res, delayMs);
      else if (path === '/v1/chat/completions') await handleChatCompletions(this, req, res, delayMs);
      else await handleCompletions(this, req, res, delayMs);
      return;
    }
    await routeInfo(this, req, res, url);
  }

  /** Fault injection ahead of a generation request: the delay to apply, or null when it was answered here. */
  #admitGeneration(res: http.ServerResponse, path: string): number | null {
    const n = ++this.#generationCount;
    const sim = this.config.sim;
    if (sim.crashAfter > 0 && n > sim.crashAfter) {
      this.#deps.logger.warn('crashing (--sim-crash-after)', { requests: n - 1 });
      res.socket?.destroy();
      this.#deps.crash();
      return null;
    }
    if (n <= sim.failFirst) {
      const msg = `Simulated failure ${n} of ${sim.failFirst} (--sim-fail-first)`;
      sendJson(res, 500, errorBody(new HttpError(500, msg), path), this.headers);
      return null;
    }
    // --sim-latency-spike-*: every Nth generation waits before it is served.
    return sim.latencySpikeEvery > 0 && n % sim.latencySpikeEvery === 0 ? sim.latencySpikeMs : 0;
  }

  #delay(ms: number): Promise<void> {
    return new Promise((resolve) => this.clock.setTimer(ms, resolve));
  }

  /** Check a request's input against the server's limits and mode; throws a 400 HttpError. */
  validateGeneration(
    promptTokens: number,
    bootstrap: Bootstrap | null,
    hasAnyBootstrap: boolean,
    maxNewTokens = 0,
  ): void {
    if (promptTokens === 0)
      throw new HttpError(400, 'The input is empty: provide text or input_ids with at least one token.');
    if (promptTokens > this.serving.maxReqInputLen) {
      throw new HttpError(
        400,
        `The input (${promptTokens} tokens) is longer than the model's context length (${this.serving.maxReqInputLen} tokens).`,
      );
    }
    // tokenizer_manager._validate_one_request: the prompt plus what may be generated must fit.
    const context = this.serving.contextLength;
    if (promptTokens + maxNewTokens > context) {
      throw new HttpError(
        400,
        `Requested token count exceeds the model's maximum context length of ${context} tokens. ` +
          `You requested a total of ${promptTokens + maxNewTokens} tokens: ${promptTokens} tokens from the ` +
          `input messages and ${maxNewTokens} tokens for the completion. Please reduce the number of tokens ` +
          'in the input messages or the completion to fit within the limit.',
      );
    }
    if (hasAnyBootstrap && !bootstrap) {
      throw new HttpError(400, 'bootstrap_host, bootstrap_port and bootstrap_room must be given together.');
    }
  }

  /**
   * A disaggregated server aborts a request without a bootstrap room before it
   * schedules it, prefill and decode alike, unless the transfer backend is fake
   * (managers/scheduler.py); the abort answers 400.
   */
  /**
   * Scheduler.init_req_max_new_tokens: none asked is 2^30; then at most max_req_len - input - 1
   * (tp_worker: min(context_len, max_total_num_tokens) - 1) and what an empty pool holds beside
   * the paged prompt (allocator max_new_tokens_for_memory).
   */
  #clipMaxNewTokens(input: GenerationInput): number {
    const inputLen = input.promptIds.length;
    const page = this.serving.pageSize;
    const total = this.engine.config.maxTotalTokens;
    const maxReqLen = Math.min(this.serving.contextLength - 1, total - 1);
    const pagedInput = Math.ceil(inputLen / page) * page;
    const asked = input.samplingMaxNewTokens === undefined ? input.maxNewTokens : input.samplingMaxNewTokens;
    const clipped = Math.min(asked ?? 2 ** 30, maxReqLen - inputLen - 1);
    return Math.max(0, Math.min(Math.max(0, clipped), total - pagedInput - page - 1));
  }

  #refuseRoomless(input: GenerationInput): RequestResult | undefined {
    const a = this.config.sglang;
    if (a.disaggregation_mode === 'null' || input.bootstrap || a.disaggregation_transfer_backend === 'fake') {
      return undefined;
    }
    const now = this.clock.now();
    this.engine.counters.requests++;
    this.engine.counters.aborted++;
    return {
      rid: input.rid,
      finish: 'abort',
      abortMessage: `Invalid request: Disaggregated request received without bootstrap room id. req.rid='${input.rid}'`,
      promptTokens: input.promptIds.length,
      completionTokens: 0,
      cachedTokens: 0,
      cachedDevice: 0,
      cachedHost: 0,
      arrivedAt: now,
      queueMs: 0,
      ttftMs: 0,
      e2eMs: 0,
    };
  }

  /** Run one generation through faults, the PD handshake and the engine. */
  async runGeneration(
    input: GenerationInput,
    onProgress: ProgressFn,
    signal: AbortState,
  ): Promise<GenerationOutcome> {
    const sim = this.config.sim;
    const mode = this.config.sglang.disaggregation_mode;
    const startedAt = this.clock.now();
    const plan = planOutput(input.promptIds, input.seed, input.maxNewTokens, input.rules);
    if ((input.delayMs ?? 0) > 0) await this.#delay(input.delayMs ?? 0);
    let transferFailed = false;
    // SGLang's decode reports the prefill's cached tokens (they arrive with the KV).
    let prefillCached: CachedSplit | undefined;
    const b = input.bootstrap;
    const refused = this.#refuseRoomless(input);
    if (refused)
      return {
        plan,
        result: refused,
        finish: abortReason(refused.abortMessage ?? '', 400),
        completionTokens: 0,
      };
    const priority = this.engine.effectivePriorityOf(input.priority);
    if (mode === 'decode' && b && b.host !== FAKE_BOOTSTRAP_HOST) {
      this.metrics.pd.decodeTransfer.add(priority);
      prefillCached = await waitForPrefill(
        b.host,
        b.port,
        String(b.room),
        this.#deps.toWallMs(sim.pdTimeoutMs),
      );
      transferFailed = prefillCached === undefined;
      this.metrics.pd.decodeTransfer.remove(priority);
      if (transferFailed) this.metrics.pd.bootstrapFailed++;
    }
    if (mode === 'prefill') this.metrics.pd.prefillInflight.add(priority);
    // A prefill instance stops after the first token; max_new_tokens 0 still runs one prefill step.
    const wanted = mode === 'prefill' ? Math.min(1, plan.outputIds.length) : plan.outputIds.length;
    const engineIds = wanted > 0 ? plan.outputIds.slice(0, wanted) : [0];
    const engineResult = await new Promise<RequestResult>((resolve) => {
      this.engine.submit(
        {
          rid: input.rid,
          namespace: input.namespace,
          promptIds: input.promptIds,
          outputIds: engineIds,
          skipPrefill: mode === 'decode',
          skipCacheInsert: b?.host === FAKE_BOOTSTRAP_HOST,
          priority: input.priority,
          routingKey: input.routingKey,
          maxNewTokens: this.#clipMaxNewTokens(input),
        },
        {
          onTokens: (n, _now, cached) =>
            onProgress(Math.min(n, wanted), plan, n >= wanted, prefillCached ?? cached),
          onFinish: resolve,
        },
      );
      if (transferFailed) {
        const secs = sim.pdTimeoutMs / 1000;
        this.engine.abort(
          input.rid,
          `KVTransferError(bootstrap_room=${b?.room}): Request ${input.rid} timed out after ${secs}s in KVPoll.WaitingForInput`,
        );
      }
      signal.onAbort = () => this.engine.abort(input.rid);
      if (signal.aborted) this.engine.abort(input.rid);
    });
    // Latencies count from arrival at the server: spikes and the PD handshake included.
    const before = engineResult.arrivedAt - startedAt;
    const result: RequestResult = {
      ...engineResult,
      ...(prefillCached && resultFieldsOf(prefillCached)),
      arrivedAt: startedAt,
      queueMs: engineResult.queueMs + before,
      ttftMs: engineResult.ttftMs + before,
      e2eMs: engineResult.e2eMs + before,
    };
    if (mode === 'prefill') {
      this.metrics.pd.prefillInflight.remove(priority);
      if (b) {
        const cached = splitOf(result);
        this.#rooms.complete(String(b.room), performance.now(), cached);
      }
    }
    this.metrics.record(
      result,
      input.stream === true,
      tokenizerPriorityLabel(input.priority, this.engine.config.priorityScheduling),
    );
    const completionTokens = Math.min(result.completionTokens, wanted);
    let finish: FinishReason = plan.finish;
    if (result.finish === 'abort')
      finish = abortReason(result.abortMessage ?? 'Abort request', transferFailed ? 500 : 499);
    else if (mode === 'prefill') finish = { type: 'length', length: completionTokens };
    return { plan, result, finish, completionTokens };
  }
}

/** The result fields of a split (a PD decode reports the prefill's). */
function resultFieldsOf(
  c: CachedSplit,
): Pick<RequestResult, 'cachedTokens' | 'cachedDevice' | 'cachedHost' | 'cachedStorage'> {
  return {
    cachedTokens: c.device + c.host + (c.storage ?? 0),
    cachedDevice: c.device,
    cachedHost: c.host,
    ...(c.storage === undefined ? {} : { cachedStorage: c.storage }),
  };
}
