// The routing benchmark's processes: the simulator fleet (publishing KV
// events as SGLang does with --kv-events-config) and the routers under test,
// each router as R processes (replicas) on the same fleet. Gateway replicas
// get every simulator's event addresses and the simulator's tokenizer, so
// cache-aware routing matches prompts against the runtimes' own KV index.
// R > 1 gateway replicas share their load as a tier does in production (the
// load exchange, fleet/load-exchange.ts): each dials the others listed in the
// tier's file (tier-file.ts), and a tier is handed over only once every
// replica hears every other (waitTierExchange).

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gatewayNodeFlags } from '../../hack/images/gateway-node-flags.ts';
import { listensOn, withFreshPorts } from '../support/fresh-ports.ts';
import { kvEventsConfigArgs, PLACEHOLDER_EVENT_PORTS } from '../support/kv-events-config.ts';
import {
  fetchOk,
  loopbackEndpoint,
  portIn,
  startProcess,
  startupLine,
  stopProcess,
  waitUntil,
  type Proc,
} from './bench-procs.ts';
import { postStream } from './replay-client.ts';
import { writeTierFile, type TierMember } from './tier-file.ts';

export const MODEL = 'sim/llama-8b';
/**
 * The gateway's routers: a CachePolicy routing section each. `cache-aware-tier-blind` is cache-aware
 * counting a prefix in host memory or a shared L3 as if it were on the GPU (hostWeight and storageWeight 1): the HiCache profiles'
 * tier-blind baseline.
 */
export const GATEWAY_ROUTING: Readonly<Record<string, object>> = {
  'cache-aware': { policy: 'cache-aware' },
  'cache-aware-tier-blind': { policy: 'cache-aware', cacheAware: { hostWeight: 1, storageWeight: 1 } },
  'prefix-hash': { policy: 'prefix-hash' },
  'least-load': { policy: 'least-load' },
  'round-robin': { policy: 'round-robin' },
};
export const GATEWAY_POLICIES: readonly string[] = Object.keys(GATEWAY_ROUTING);
export const PY_ROUTERS = ['sglang-router', 'smg'] as const;
const SALT = 'bench-salt';
const EVENTS_TOPIC = 'kv';

export interface FleetContext {
  readonly repo: string;
  readonly logDir: string;
  readonly log: (msg: string) => void;
  /** Extra command-line arguments per Python router (e.g. smg's cache-index settings). */
  readonly routerArgs?: Readonly<Record<string, readonly string[]>>;
  /** The simulators' --sim-time-scale: model time runs this many times faster than wall time. */
  readonly timeScale?: number;
  /** More fields of the gateway's route (e.g. `l3Roles`: the fleet shares a HiCache L3 tier). */
  readonly routeExtra?: Readonly<Record<string, unknown>>;
  /**
   * False: gateway replicas run without the load exchange, each on its own share of the load (the
   * control for what the exchange changes; never what production runs). Default true.
   */
  readonly loadExchange?: boolean;
}

// ---------------------------------------------------------------- simulators

export interface SimEvents {
  readonly kv: string;
  readonly replay: string;
  readonly blockSize: number;
}

export interface Sim {
  readonly id: string;
  readonly url: string;
  readonly proc: Proc;
  /** Where it publishes KV events (subscribe addresses), when it does. */
  readonly events?: SimEvents;
}

/** A simulator; with `eventsPageSize`, publishing KV events (blocks of that page size, which it must run with). */
export async function startSim(
  ctx: FleetContext,
  id: string,
  extra: readonly string[],
  eventsPageSize?: number,
): Promise<Sim> {
  const eventArgs: string[] = [];
  if (eventsPageSize !== undefined) {
    // Placeholder ports: --sim-ephemeral-event-ports binds on ports the kernel picks, said at start-up.
    const bufferSteps = process.env['BENCH_KV_BUFFER_STEPS'];
    const extra = bufferSteps ? { buffer_steps: Number(bufferSteps) } : {};
    const config = { ...PLACEHOLDER_EVENT_PORTS, topic: EVENTS_TOPIC, extra };
    eventArgs.push(...kvEventsConfigArgs(config), '--sim-ephemeral-event-ports');
  }
  const args = [
    path.join(ctx.repo, 'test/sim/main.ts'),
    '--model-path',
    MODEL,
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--enable-cache-report',
    '--enable-metrics',
    '--sim-worker-id',
    id,
    ...eventArgs,
    ...extra,
  ];
  const proc = startProcess(id, process.execPath, args, path.join(ctx.logDir, `${id}.log`));
  const started = await startupLine(proc, 'The server is fired up and ready to roll!');
  const url = `http://127.0.0.1:${portIn(started, 'port')}`;
  let events: SimEvents | undefined;
  if (eventsPageSize !== undefined) {
    const bound = (started['kvEvents'] ?? {}) as { kv?: unknown; replay?: unknown };
    events = {
      kv: loopbackEndpoint(bound.kv),
      replay: loopbackEndpoint(bound.replay),
      blockSize: eventsPageSize,
    };
  }
  await waitUntil(
    `simulator ${id}`,
    async () => (await fetchOk(`${url}/health`)).status === 200,
    30_000,
    proc,
  );
  return { id, url, proc, ...(events ? { events } : {}) };
}

export interface Counters {
  requests: number;
  prompt: number;
  cached: number;
}

export async function readCounters(url: string): Promise<Counters> {
  // A simulator that has just served a replay can be slow to answer (the machine is shared): retry.
  let text = '';
  await waitUntil(
    `read ${url}/metrics`,
    async () => {
      text = await (await fetchOk(`${url}/metrics`, {}, 10_000)).text();
      return true;
    },
    60_000,
  );
  // Summed over series: SGLang splits these by is_streaming / cache_source, and
  // a series appears only once something counted (0 before the first request).
  const get = (name: string): number =>
    [...text.matchAll(new RegExp(`^sglang:${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))].reduce(
      (sum, m) => sum + Number(m[1]),
      0,
    );
  return {
    requests: get('num_requests_total'),
    prompt: get('prompt_tokens_total'),
    cached: get('cached_tokens_total'),
  };
}

/** POST /flush_cache on every simulator; it refuses while requests run, so retry (bounded). */
export async function flushFleet(sims: readonly Sim[]): Promise<void> {
  await Promise.all(
    sims.map((s) =>
      waitUntil(
        `flush ${s.id}`,
        async () => (await fetchOk(`${s.url}/flush_cache`, { method: 'POST' })).status === 200,
        120_000,
        s.proc,
        500,
      ),
    ),
  );
}

// ---------------------------------------------------------------- routers

export class SkipError extends Error {}

const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

/** One router under test: `replicas` processes, each client request to the next in turn. */
export interface Router {
  readonly name: string;
  readonly urls: readonly string[];
  readonly procs: readonly Proc[];
  /** Gateway replicas routing from the simulators' KV events. */
  readonly kvIndexed: boolean;
  /** Where each replica's /status.json is, when clients reach it through something else (Envoy). */
  readonly statusUrls?: readonly string[];
  /** Stops what the router runs besides `procs` (an Envoy in front of it). */
  readonly close?: () => Promise<void>;
  /** Gateway replicas sharing load: the tier they follow (a restarted replica joins it). */
  readonly tier?: GatewayTier;
}

/** A gateway tier sharing load: the file its replicas follow, and who is in it now. */
export interface GatewayTier {
  readonly file: string;
  members: TierMember[];
}

export async function stopRouter(r: Router): Promise<void> {
  await r.close?.();
  await Promise.all(r.procs.map((p) => stopProcess(p)));
}

function writeRoutes(ctx: FleetContext, name: string, routing: object, endpoints: readonly Sim[]): string {
  const file = path.join(ctx.logDir, `routes-${name}.json`);
  const routes = [
    {
      model: MODEL,
      deployment: 'bench/sim',
      fingerprint: 'bench',
      salt: SALT,
      routing,
      // Out of the way: this measures routing, not admission.
      admission: { maxConcurrency: 100_000, maxQueue: 1_000_000, queueTimeoutSeconds: 3600, adaptive: false },
      reuse: { enabled: false },
      ...ctx.routeExtra,
      endpoints: endpoints.map((s) => ({
        id: s.id,
        url: s.url,
        fingerprint: 'bench',
        verified: true,
        ready: true,
        ...(s.events
          ? {
              events: {
                kv: [s.events.kv],
                replay: [s.events.replay],
                topic: EVENTS_TOPIC,
                blockSize: s.events.blockSize,
              },
            }
          : {}),
      })),
    },
  ];
  writeFileSync(file, JSON.stringify(routes, null, 2));
  return file;
}

let venvDir: string | undefined;
let venvError: string | undefined;

/** hack/bench-venv.sh once; failures become skip reasons, never fatal. */
function ensureVenv(ctx: FleetContext): void {
  if (venvDir !== undefined || venvError !== undefined) return;
  ctx.log('preparing the router virtualenv (hack/bench-venv.sh)');
  const r = spawnSync('bash', [path.join(ctx.repo, 'hack/bench-venv.sh')], {
    encoding: 'utf8',
    timeout: 30 * 60_000,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = (r.stdout ?? '').trim().split('\n').pop() ?? '';
  if (r.status === 0 && out !== '' && existsSync(path.join(out, 'bin/python'))) venvDir = out;
  else
    venvError = `virtualenv not available: ${(r.error?.message ?? r.stderr ?? '').trim().slice(-300) || `exit ${r.status}`}`;
}

/** smg's --load-monitor-interval default, seconds (smg launch --help, 1.13.0). */
const SMG_LOAD_MONITOR_INTERVAL_S = 10;

/**
 * What smg is started with besides the common flags: its defaults, with its load poll at the
 * simulators' clock. smg 1.13's cache_aware sends a request whose prefix match is at or under
 * --cache-threshold (most of this trace) to the worker of least expected wait: the tokens a
 * worker had waiting at the last /v1/loads poll, plus --least-load-mean-prefill-tokens (1,024)
 * per request sent to it since, over its generation throughput. Its debug log names the branch
 * `expected_wait_fallback` (model_gateway/src/policies/cache_aware.rs:2845 in 1.13.0) and the
 * pick `cache_aware selected <url> (score ..., in_flight ...)` (policies/least_load.rs:616, the
 * select_min_expected_wait of least_load.rs in smg's source at f8daa88). The poll runs every
 * --load-monitor-interval seconds of wall time, 10 by default; at --sim-time-scale 8 that is
 * 80 s of model time. Between polls every miss went to whichever worker looked idle at the last
 * one (the "incast" least_load.rs warns of; 1,024 tokens per request against this trace's
 * ~14,000 barely corrects it): one simulator at a time held up to 1.6 million waiting tokens while
 * others idled, and at N=2000 smg's TTFT p50 was 3.5-6.1 s against 0.64 s with a 1 s poll. The
 * interval is scaled with the clock (at least 1 s, smg's minimum), as the simulators' own times
 * are; everything else stays at smg's defaults. docs/benchmarks.md, "smg 1.13".
 */
export function smgDefaultArgs(timeScale: number): string[] {
  const interval = Math.max(1, Math.round(SMG_LOAD_MONITOR_INTERVAL_S / timeScale));
  return ['--load-monitor-interval', String(interval)];
}

function pythonRouterCommand(name: string, venv: string): { cmd: string; pre: string[]; pkg: string } {
  // smg by its module, not bin/smg: sglang-router 0.3.2 installs a `smg` console script too (its
  // own CLI), and whichever package pip installs last owns bin/smg.
  return name === 'smg'
    ? { cmd: path.join(venv, 'bin/python'), pre: ['-m', 'smg', 'launch'], pkg: 'smg' }
    : {
        cmd: path.join(venv, 'bin/python'),
        pre: ['-m', 'sglang_router.launch_router'],
        pkg: 'sglang-router',
      };
}

const isGateway = (name: string): boolean => GATEWAY_POLICIES.includes(name);

async function spawnGateway(
  ctx: FleetContext,
  name: string,
  routes: string,
  logName: string,
  extra: readonly string[] = [],
  nodeArgs: readonly string[] = [],
): Promise<{ url: string; proc: Proc; pickerPort?: number; exchange?: string }> {
  const proc = startProcess(
    `gateway-${name}`,
    process.execPath,
    [
      ...gatewayNodeFlags(ctx.repo), // as the gateway image runs it (gateway/Containerfile)
      ...nodeArgs,
      path.join(ctx.repo, 'test/bench/bench-gateway.ts'),
      '--routes',
      routes,
      '--tokenizer-model',
      MODEL,
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--log-level',
      'warn',
      ...extra,
    ],
    path.join(ctx.logDir, `${logName}.log`),
  );
  const line = await startupLine(proc, 'listening');
  const port = portIn(line, 'port');
  return {
    url: `http://127.0.0.1:${port}`,
    proc,
    ...(extra.includes('--picker-port') ? { pickerPort: portIn(line, 'pickerPort') } : {}),
    ...(typeof line['exchange'] === 'string' ? { exchange: loopbackEndpoint(line['exchange']) } : {}),
  };
}

/** How many other replicas a gateway hears over the load exchange (its /metrics); null: no exchange. */
export async function readExchangePeers(url: string): Promise<number | null> {
  const text = await (await fetchOk(`${url}/metrics`, {}, 10_000)).text();
  const m = /^cacheroute_gateway_load_exchange_peers (\S+)$/m.exec(text);
  return m ? Number(m[1]) : null;
}

/** Every replica at `urls` hears `peers` others over the load exchange; throws saying which does not. */
export async function waitTierExchange(
  urls: readonly string[],
  peers: number,
  timeoutMs = 20_000,
): Promise<void> {
  await waitUntil(
    `load exchange among ${urls.length} replica(s)`,
    async () => {
      const heard = await Promise.all(urls.map(readExchangePeers));
      if (heard.every((n) => n === peers)) return true;
      throw new Error(
        `each should hear ${peers} peer(s); they hear ${heard.map((n) => (n === null ? 'no exchange' : n)).join(', ')}`,
      );
    },
    timeoutMs,
    undefined,
    250,
  );
}

export interface StartRouterOptions {
  /** Join this gateway tier (a replica started again), instead of a tier of the replicas started. */
  readonly join?: GatewayTier;
  /** Replicas that leave the tier as these join (killed: as their pods leave the EndpointSlices). */
  readonly leaving?: readonly string[];
}

/**
 * Node flags for the endpoint picker's process only, from CACHEROUTE_BENCH_PICKER_NODE_ARGS
 * (space-separated): to profile it under the bench's own load, e.g. `--cpu-prof
 * --cpu-prof-dir=/tmp/prof` (written when the bench stops it) or `--trace-gc` (into its log).
 */
export const pickerNodeArgs = (): string[] =>
  (process.env['CACHEROUTE_BENCH_PICKER_NODE_ARGS'] ?? '').split(' ').filter((a) => a !== '');

/** One endpoint picker of the bench: its gateway's URL (status, metrics), process and ext_proc port. */
export interface StartedPicker {
  readonly url: string;
  readonly proc: Proc;
  readonly pickerPort: number;
}

/**
 * The cache-aware gateway on `endpoints` serving its endpoint picker too (bench-gateway.ts
 * --picker-port), for Envoy to ask: the overhead phase's Envoy + picker row.
 */
export async function startPickerGateway(
  ctx: FleetContext,
  endpoints: readonly Sim[],
  tag: string,
  nodeArgs: readonly string[] = pickerNodeArgs(),
): Promise<StartedPicker> {
  const [picker] = await startPickerTier(ctx, endpoints, tag, 1, nodeArgs);
  if (!picker) throw new Error('no picker started');
  return picker;
}

/**
 * `replicas` such pickers sharing load over the load exchange, as a picker Deployment's replicas
 * do behind one Service (a tier file in place of its EndpointSlices); returned once each hears
 * every other and serves. One replica: no exchange, as startPickerGateway has always run.
 */
export async function startPickerTier(
  ctx: FleetContext,
  endpoints: readonly Sim[],
  tag: string,
  replicas: number,
  nodeArgs: readonly string[] = pickerNodeArgs(),
): Promise<StartedPicker[]> {
  const routes = writeRoutes(ctx, `cache-aware-${tag}`, GATEWAY_ROUTING['cache-aware'] ?? {}, endpoints);
  const tier = replicas > 1 ? tierFor(ctx, `picker-${tag}`, replicas, undefined) : undefined;
  const started: { name: string; url: string; proc: Proc; pickerPort?: number; exchange?: string }[] = [];
  try {
    for (let r = 0; r < replicas; r++) {
      const name = `gateway-cache-aware-${tag}${replicas > 1 ? `-r${r}` : ''}`;
      const tierArgs = tier ? ['--tier-file', tier.file, '--replica-name', name] : [];
      started.push({
        name,
        ...(await spawnGateway(
          ctx,
          'cache-aware',
          routes,
          name,
          ['--picker-port', '0', ...tierArgs],
          nodeArgs,
        )),
      });
    }
    if (tier) await joinTier('picker', tier, started, []);
    for (const s of started) await waitServing('cache-aware', s.url, s.proc);
  } catch (e) {
    await Promise.all(started.map((s) => stopProcess(s.proc)));
    throw e;
  }
  return started.map(({ url, proc, pickerPort }) => {
    if (pickerPort === undefined) throw new Error('a picker gateway named no picker port');
    return { url, proc, pickerPort };
  });
}

/** ext-proc-floor.ts naming `upstream` (host:port): the floor under the endpoint picker, for Envoy to ask. */
export async function startExtProcFloor(
  ctx: FleetContext,
  upstream: string,
  nodeArgs: readonly string[] = [],
): Promise<{ proc: Proc; pickerPort: number }> {
  const proc = startProcess(
    'ext-proc-floor',
    process.execPath,
    [
      ...gatewayNodeFlags(ctx.repo), // as the picker runs
      ...nodeArgs,
      path.join(ctx.repo, 'test/bench/ext-proc-floor.ts'),
      '--upstream',
      upstream,
    ],
    path.join(ctx.logDir, 'ext-proc-floor.log'),
  );
  return { proc, pickerPort: portIn(await startupLine(proc, 'listening'), 'pickerPort') };
}

/**
 * ext-proc-floor-go (the same floor on grpc-go, the stack GIE's reference picker runs on), built
 * from its pinned modules into the cache, keyed by its sources, and started naming `upstream`.
 * Throws when Go is missing or the build fails: the caller reports the target as not measured.
 */
export async function startExtProcFloorGo(
  ctx: FleetContext,
  upstream: string,
): Promise<{ proc: Proc; pickerPort: number }> {
  const src = path.join(ctx.repo, 'test/bench/ext-proc-floor-go');
  const hash = createHash('sha256');
  for (const f of ['main.go', 'go.mod', 'go.sum']) hash.update(readFileSync(path.join(src, f)));
  const cache = process.env.CACHEROUTE_CACHE ?? path.join(os.homedir(), '.cache/cacheroute');
  const bin = path.join(cache, `ext-proc-floor-go-${hash.digest('hex').slice(0, 12)}`, 'ext-proc-floor-go');
  if (!existsSync(bin)) {
    const built = spawnSync('go', ['build', '-trimpath', '-o', bin, '.'], {
      cwd: src,
      encoding: 'utf8',
      env: { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=readonly', GOTOOLCHAIN: 'local' },
    });
    if (built.status !== 0)
      throw new Error(
        `go build of test/bench/ext-proc-floor-go failed: ${built.error?.message ?? built.stderr}`,
      );
  }
  const proc = startProcess(
    'ext-proc-floor-go',
    bin,
    ['--upstream', upstream],
    path.join(ctx.logDir, 'ext-proc-floor-go.log'),
  );
  return { proc, pickerPort: portIn(await startupLine(proc, 'listening'), 'pickerPort') };
}

/** node-floor-proxy.ts in front of `upstream`: the floor under any Node gateway, for the overhead phase. */
export async function startNodeFloorProxy(
  ctx: FleetContext,
  upstream: string,
): Promise<{ url: string; proc: Proc }> {
  const proc = startProcess(
    'node-floor',
    process.execPath,
    [
      ...gatewayNodeFlags(ctx.repo), // as the gateway runs
      path.join(ctx.repo, 'test/bench/node-floor-proxy.ts'),
      '--upstream',
      upstream,
      '--port',
      '0',
    ],
    path.join(ctx.logDir, 'node-floor.log'),
  );
  const url = `http://127.0.0.1:${portIn(await startupLine(proc, 'listening'), 'port')}`;
  // Any answer will do: the proxy is up (what the simulator says to a GET it forwards as a POST does not matter).
  await waitUntil(
    'node-floor proxy',
    async () => (await fetchOk(`${url}/v1/models`)).status > 0,
    30_000,
    proc,
  );
  return { url, proc };
}

async function spawnPythonRouter(
  ctx: FleetContext,
  name: string,
  endpoints: readonly Sim[],
  logName: string,
): Promise<{ url: string; proc: Proc }> {
  ensureVenv(ctx);
  if (venvDir === undefined) throw new SkipError(venvError ?? 'virtualenv not available');
  const { cmd, pre, pkg } = pythonRouterCommand(name, venvDir);
  const failed = path.join(venvDir, `failed-${pkg}.txt`);
  if (existsSync(failed)) {
    const lines = readFileSync(failed, 'utf8').trim().split('\n');
    throw new SkipError(`pip install ${pkg} failed: ${lines.slice(-2).join(' | ').slice(0, 300)}`);
  }
  if (!existsSync(cmd)) throw new SkipError(`${cmd} missing after install`);
  // The routers take no port 0 they would say back: ports free now, again if one was lost (fresh-ports.ts).
  return withFreshPorts(
    2,
    async ([port = 0, prom = 0]) => {
      const started = startPythonRouterOn(ctx, name, endpoints, logName, cmd, pre, port, prom);
      try {
        await waitServing(name, started.url, started.proc);
        const pid = started.proc.child.pid ?? 0;
        if (!listensOn(pid, port))
          throw new Error(`${name}: address already in use: another process answers on port ${port}`);
      } catch (err) {
        await stopProcess(started.proc);
        throw err;
      }
      return started;
    },
    { what: name },
  );
}

function startPythonRouterOn(
  ctx: FleetContext,
  name: string,
  endpoints: readonly Sim[],
  logName: string,
  cmd: string,
  pre: readonly string[],
  port: number,
  prom: number,
): { url: string; proc: Proc } {
  const proc = startProcess(
    name,
    cmd,
    [
      ...pre,
      '--worker-urls',
      ...endpoints.map((s) => s.url),
      '--policy',
      'cache_aware',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--prometheus-host',
      '127.0.0.1',
      '--prometheus-port',
      String(prom),
      '--log-level',
      'warn',
      '--shutdown-grace-period-secs',
      '1',
      ...(name === 'smg' ? smgDefaultArgs(ctx.timeScale ?? 1) : []),
      // Last, so a given flag overrides the defaults above (argparse keeps the last value).
      ...(ctx.routerArgs?.[name] ?? []),
    ],
    path.join(ctx.logDir, `${logName}.log`),
    // Loopback only: no tokenizer download attempts (the routers route on text here).
    { ...process.env, HF_HUB_OFFLINE: '1', HF_HUB_DISABLE_TELEMETRY: '1', TRANSFORMERS_OFFLINE: '1' },
  );
  return { url: `http://127.0.0.1:${port}`, proc };
}

/** Lists the model and answers a real chat request (a router that lists models but cannot route fails here). */
async function waitServing(name: string, url: string, proc: Proc): Promise<void> {
  await waitUntil(
    `${name} /v1/models`,
    async () => {
      const res = await fetchOk(`${url}/v1/models`);
      const body = (await res.json()) as { data?: { id?: string }[] };
      return res.status === 200 && (body.data ?? []).some((m) => m.id === MODEL);
    },
    90_000,
    proc,
    300,
  );
  await waitUntil(
    `${name} probe request`,
    async () => {
      const o = await postStream(new URL('/v1/chat/completions', url), {
        model: MODEL,
        messages: [{ role: 'user', content: 'probe' }],
        max_tokens: 1,
        stream: true,
      });
      return o.status === 200 && o.error === undefined;
    },
    60_000,
    proc,
    500,
  );
}

/** `started` gateway replicas join `tier` as `leaving` leave it; resolves once each hears every other. */
async function joinTier(
  name: string,
  tier: GatewayTier,
  started: readonly { name: string; url: string; exchange?: string }[],
  leaving: readonly string[],
): Promise<void> {
  const joined = started.map((s) => ({ name: s.name, exchange: s.exchange ?? '' }));
  if (joined.some((m) => m.exchange === '')) throw new Error(`${name}: a replica said no exchange address`);
  tier.members = [...tier.members.filter((m) => !leaving.includes(m.name)), ...joined];
  writeTierFile(tier.file, tier.members);
  await waitTierExchange(
    started.map((s) => s.url),
    tier.members.length - 1,
  );
}

/** Gateway replicas share load whenever there is more than one, as in production; one joining a tier too. */
function tierFor(
  ctx: FleetContext,
  key: string,
  replicas: number,
  join: GatewayTier | undefined,
): GatewayTier | undefined {
  if (join) return join;
  return replicas > 1 ? { file: path.join(ctx.logDir, `tier-${key}.json`), members: [] } : undefined;
}

/** `router` started as `replicas` processes on `endpoints`; a Python router that cannot start is a SkipError. */
export async function startRouter(
  ctx: FleetContext,
  name: string,
  endpoints: readonly Sim[],
  tag: string,
  replicas = 1,
  opts: StartRouterOptions = {},
): Promise<Router> {
  const started: { url: string; proc: Proc; exchange?: string; name: string }[] = [];
  const gateway = isGateway(name);
  const tier =
    gateway && ctx.loadExchange !== false ? tierFor(ctx, `${name}-${tag}`, replicas, opts.join) : undefined;
  try {
    const routes = gateway ? writeRoutes(ctx, `${name}-${tag}`, GATEWAY_ROUTING[name] ?? {}, endpoints) : '';
    for (let r = 0; r < replicas; r++) {
      const logName = `${gateway ? `gateway-${name}` : name}-${tag}${replicas > 1 ? `-r${r}` : ''}`;
      const tierArgs = tier ? ['--tier-file', tier.file, '--replica-name', logName] : [];
      started.push({
        name: logName,
        ...(gateway
          ? await spawnGateway(ctx, name, routes, logName, tierArgs)
          : await spawnPythonRouter(ctx, name, endpoints, logName)),
      });
    }
    if (tier) await joinTier(name, tier, started, opts.leaving ?? []);
    for (const s of started) await waitServing(name, s.url, s.proc);
  } catch (e) {
    await Promise.all(started.map((s) => stopProcess(s.proc)));
    if (e instanceof SkipError) throw e;
    const msg = (e as Error).message.replace(ANSI, '');
    if (!gateway) throw new SkipError(`could not start: ${msg.slice(0, 400)}`);
    throw e;
  }
  return {
    name,
    urls: started.map((s) => s.url),
    procs: started.map((s) => s.proc),
    kvIndexed: gateway && endpoints.some((e) => e.events),
    ...(tier ? { tier } : {}),
  };
}

interface StatusEndpoints {
  deployments?: { endpoints?: { id: string; kvIndex?: { usable: boolean; reason?: string } | null }[] }[];
}

/** Over every replica: endpoints whose KV index is exact and usable now, of all (replica, endpoint) pairs. */
export async function countKvIndexUsable(
  r: Router,
): Promise<{ usable: number; total: number; reasons: string[] }> {
  let usable = 0;
  let total = 0;
  const reasons = new Set<string>();
  for (const url of r.statusUrls ?? r.urls) {
    const body = (await (await fetchOk(`${url}/status.json`, {}, 10_000)).json()) as StatusEndpoints;
    for (const e of (body.deployments ?? []).flatMap((d) => d.endpoints ?? [])) {
      total++;
      // Exact only: a partial index (usable, with a reason) is not yet the runtime's whole cache.
      if (e.kvIndex?.usable === true && e.kvIndex.reason === '') usable++;
      else reasons.add(e.kvIndex?.reason ?? 'no index');
    }
  }
  return { usable, total, reasons: [...reasons] };
}

/**
 * Every gateway replica done with its replay: each endpoint's index exact or partial. A
 * replica that joins after a publisher's replay buffer rolled over (10,000 batches; a
 * 2,000-request run publishes thousands) holds a partial index until the runtime's next
 * AllBlocksCleared, so the bench flushes the fleet only after this.
 */
export async function waitKvIndexSettled(r: Router, timeoutMs = 120_000): Promise<void> {
  await waitUntil(
    `${r.name} KV index replay`,
    async () => {
      const c = await countKvIndexUsable(r);
      if (c.total > 0 && c.reasons.every((why) => why.startsWith('partial'))) return true;
      throw new Error(`${c.usable}/${c.total} usable: ${c.reasons.join('; ')}`);
    },
    timeoutMs,
    undefined,
    250,
  );
}

/** Every gateway replica caught up with every publisher (the index answers), bounded. */
export async function waitKvIndexUsable(r: Router, timeoutMs = 60_000): Promise<void> {
  await waitUntil(
    `${r.name} KV index`,
    async () => {
      const c = await countKvIndexUsable(r);
      if (c.total > 0 && c.usable === c.total) return true;
      // Thrown, so that a timeout says why.
      throw new Error(`${c.usable}/${c.total} usable: ${c.reasons.join('; ')}`);
    },
    timeoutMs,
    undefined,
    250,
  );
}
