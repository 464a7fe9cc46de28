// The routing benchmark (`make bench [N=2000]`): one fleet of simulators,
// one Mooncake trace slice, replayed through each router in turn from a cold
// fleet; then the routers' own cost on tiny requests. Human table on stderr,
// one JSON line last on stdout.
//
//   node test/bench/bench-routing.ts [--trace FILE] [--n 2000] [--scale 8] [--load 0.8]
//        [--workers 4] [--max-total-tokens 413000] [--page-size 16] [--routers a,b,...]
//        [--gateway-replicas 1,3] [--replicated-routers cache-aware,sglang-router,smg]
//        [--profile dense|hicache|hicache-l3] [--smg-args '...'] [--sglang-router-args '...']
//        [--no-overhead] [--overhead-rate 500] [--overhead-rounds 4] [--log-dir DIR]
//        [--load-exchange on|off]
//        [--overhead-only] [--overhead-targets envoy-static,envoy-picker,smg]
//        [--overhead-baseline ../main]
//
// Choices (see the report's `setup` object):
// - Simulators: SGLang's defaults for an 8B model on one H100 (test/sim/config.ts:
//   prefill 8,000 tok/s, decode 6 + 0.35 ms/step, 413,000-token KV pool),
//   stated explicitly. The slice's median prefix-reuse distance is ~3M tokens
//   (printed as `workload`), so one pool holds a small share of the reuses and
//   the whole fleet's pooled KV less than half: where requests go decides
//   what is reused.
// - Arrivals keep the trace's gaps, stretched so that the slice's prompt
//   tokens with no cache hit at all load the fleet's prefill to --load (0.8):
//   at the trace's own rate the fleet is overloaded for a router with few hits
//   and TTFT measures queue growth, not routing. --stretch 1 replays the raw rate.
// - --scale compresses time: simulators run --sim-time-scale=scale, arrivals
//   are divided by scale. Latencies are reported in wall-clock ms as measured
//   (multiply by `time_scale` for model time).
// - Hit rate, per-worker counts and imbalance come from the simulators' own
//   counters (sglang:cached_tokens_total / prompt_tokens_total /
//   num_requests_total, before vs after the run), the same for every router.
// - The gateway runs with admission limits out of the way (no queueing, no
//   adaptive concurrency) and reuse off: this measures routing; SGLang's
//   router runs with its defaults (no concurrency limit), and so does smg but
//   for its load poll, scaled to the simulators' clock like every simulated
//   time (bench-fleet.ts smgDefaultArgs; --smg-args overrides it).
// - The simulators publish KV events (--kv-events-config, pages of
//   --page-size tokens, 16: per-token pages would make every replica hash and
//   index every token) and each gateway replica subscribes to all of them and
//   holds the simulator's tokenizer (sim-tokenizer.ts), so cache-aware routes
//   from the runtimes' own index as in production. The page size applies to
//   every router's run alike.
// - --gateway-replicas 1,3: each router of --replicated-routers runs again as
//   3 processes on the same fleet, each request sent to the next in turn (as a
//   Service spreads connections); rows "<router>@3" (bench-replicas.ts).
//   The gateway's replicas share their load over the load exchange, as in
//   production (bench-fleet.ts); each @R row carries the staleness it measured
//   (exchange_lag) and whom each replica still heard at the end.
//   --load-exchange off runs them without it, each on its own share of the
//   load: the control for what the exchange changes, not a production set-up.
// - Latency: TTFT, inter-token (gaps between streamed output chunks, the
//   simulators stream a token a chunk) and end-to-end, p50 and p99. Noise:
//   each row's `spread` is half the difference between the requests of even
//   and of odd index (tier-report.ts), so a difference between rows inside
//   it is not a result. `make bench VIRTUAL=1` runs the gateway tier in
//   virtual time instead (bench-tier-virtual.ts).
// - The `picker` row (bench-picker.ts): the cache-aware gateway as GIE's endpoint picker
//   (ext_proc) behind a real Envoy 1.40 with the bootstrap hack/envoy/bootstrap.ts builds, on
//   the same simulators; `picker_vs_standalone` holds its ratios to the `cache-aware` row, each
//   with the two rows' spreads carried into it (picker-report.ts).
// - Overhead phase: direct, the gateway (with and without KV events), a bare Node proxy (the
//   floor of any Node gateway), Envoy alone on a static route (the floor of the picker path),
//   Envoy + picker, SGLang's router and smg, in interleaved rounds; the load average is in
//   `overhead_notes`. `--overhead-only` runs this phase alone (no trace replay),
//   `envoy-floor` is Envoy asking ext-proc-floor.ts (the picker's gRPC stack, no decision: the
//   floor of the picker's own process), `envoy-floor-go` the same server on grpc-go
//   (test/bench/ext-proc-floor-go, built with Go: the seat's floor without Node); `--overhead-targets` only the targets it names (`direct` always; smg and sglang-router also
//   need --routers to name them), and `--overhead-baseline DIR` adds `envoy-picker@baseline`:
//   the picker as another checkout (DIR) builds it, behind its own Envoy, in the same rounds
//   (a change's before and after on one machine at one time); `envoy-picker-x2`, only when
//   named, is two picker replicas sharing load over the exchange behind one Envoy (a picker
//   process per core: does a second event loop lower the p99?). The picker's CPU is also given
//   split into Envoy's and the picker's (`cpu_ms_per_req_parts`); CACHEROUTE_BENCH_PICKER_NODE_ARGS
//   passes Node flags to the picker's process (`--cpu-prof --cpu-prof-dir=DIR`, `--trace-gc`).
// - Bounds: the infinite-cache bound, and the pooled-cache bound: one LRU of
//   the fleet's total KV pool replayed over the slice (pooled-bound.ts; with
//   --profile hicache the host tier's tokens too). hit_rate_vs_bound is
//   against the pooled bound.

import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { z } from 'zod';
import {
  countKvIndexUsable,
  flushFleet,
  GATEWAY_POLICIES,
  MODEL,
  PY_ROUTERS,
  readCounters,
  readExchangePeers,
  SkipError,
  smgDefaultArgs,
  startNodeFloorProxy,
  startExtProcFloor,
  startExtProcFloorGo,
  startPickerTier,
  startRouter,
  startSim,
  stopRouter,
  waitKvIndexSettled,
  waitKvIndexUsable,
  type Counters,
  type FleetContext,
  type Router,
  type Sim,
} from './bench-fleet.ts';
import {
  computeBusyShare,
  measureOverhead,
  readCpuTimes,
  waitForQuietCpus,
  type OverheadStats,
  type OverheadTarget,
  ZERO_LATENCY_SIM_ARGS,
} from './bench-overhead.ts';
import { fetchOk, installCleanup, sleep, stopAll, stopProcess, type Proc } from './bench-procs.ts';
import { computeExchangeLag } from './exchange-lag.ts';
import { computeScaling, judgeReplicaGoals, parseReplicaList, rowKey } from './bench-replicas.ts';
import {
  judgeGoals,
  judgeTierGoal,
  renderTable,
  type RouterEntry,
  type RouterResult,
} from './bench-report.ts';
import { choosePool, computeStretch, computeWorkload } from './bench-workload.ts';
import { computePooledBound } from './pooled-bound.ts';
import { postStream } from './replay-client.ts';
import { buildStreamRecord, computeSummary, type RequestRecord } from './replay-stats.ts';
import { computeSpread, computeTierMetrics } from './tier-report.ts';
import { BLOCK_TOKENS, buildPromptText, parseTrace, type TraceRecord } from './replay-trace.ts';
import { startEnvoy, type RunningEnvoy } from '../support/envoy.ts';
import { PICKER_ROW, startPickerRouter } from './bench-picker.ts';
import {
  comparePickerRow,
  judgePickerGoals,
  judgePickerOverhead,
  renderPickerLines,
} from './picker-report.ts';
import { traceArgOrExit } from './default-trace.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
// The picker row right after the standalone gateway's: the two it is compared with run closest in time.
const ALL_ROUTERS: readonly string[] = [
  ...GATEWAY_POLICIES.flatMap((p) => (p === 'cache-aware' ? [p, PICKER_ROW] : [p])),
  ...PY_ROUTERS,
];
const PREFILL_TPS = 8000;

const { values } = parseArgs({
  options: {
    trace: { type: 'string' },
    n: { type: 'string', default: '2000' },
    skip: { type: 'string', default: '0' },
    scale: { type: 'string', default: '8' },
    load: { type: 'string', default: '0.8' },
    stretch: { type: 'string' },
    workers: { type: 'string', default: '4' },
    'max-total-tokens': { type: 'string', default: 'auto' },
    'page-size': { type: 'string', default: '16' },
    profile: { type: 'string', default: 'dense' },
    routers: { type: 'string' },
    'gateway-replicas': { type: 'string', default: '1' },
    'replicated-routers': { type: 'string', default: 'cache-aware,sglang-router,smg' },
    'smg-args': { type: 'string', default: '' },
    'sglang-router-args': { type: 'string', default: '' },
    'no-overhead': { type: 'boolean', default: false },
    'overhead-only': { type: 'boolean', default: false },
    'overhead-rate': { type: 'string', default: '500' },
    'overhead-rounds': { type: 'string', default: '4' },
    'overhead-round-ms': { type: 'string', default: '1500' },
    'overhead-targets': { type: 'string' },
    'overhead-baseline': { type: 'string' },
    'log-dir': { type: 'string' },
    'run-timeout-s': { type: 'string' },
    'load-exchange': { type: 'string', default: 'on' },
  },
});

function usage(msg: string): never {
  console.error(`bench: ${msg}`);
  process.exit(2);
}

if (values['load-exchange'] !== 'on' && values['load-exchange'] !== 'off')
  usage(`--load-exchange is on or off, not ${values['load-exchange']}`);
const TRACE = traceArgOrExit(values.trace, REPO, 'bench');
const N = Number(values.n);
const SKIP = Number(values.skip);
const SCALE = Number(values.scale);
const LOAD = Number(values.load);
const WORKERS = Number(values.workers);
const OVERHEAD_RATE = Number(values['overhead-rate']);
const OVERHEAD_TARGETS = [
  'gateway',
  'gateway-approx',
  'node-floor',
  'envoy-static',
  'envoy-floor',
  'envoy-floor-go',
  'envoy-picker',
  'envoy-picker-x2',
  ...PY_ROUTERS,
] as const;
/** Measured only when --overhead-targets names them (not part of `make bench`'s phase). */
const NAMED_ONLY: ReadonlySet<string> = new Set(['envoy-picker-x2']);
const overheadTargets = values['overhead-targets']?.split(',').filter((t) => t !== '' && t !== 'direct');
for (const t of overheadTargets ?? [])
  if (!(OVERHEAD_TARGETS as readonly string[]).includes(t))
    usage(`--overhead-targets: unknown target ${t} (one of direct, ${OVERHEAD_TARGETS.join(', ')})`);
/** Whether the overhead phase measures `name` (all by default). */
const measures = (name: (typeof OVERHEAD_TARGETS)[number]): boolean =>
  overheadTargets === undefined ? !NAMED_ONLY.has(name) : overheadTargets.includes(name);
const OVERHEAD_BASELINE = values['overhead-baseline'] && path.resolve(values['overhead-baseline']);
if (OVERHEAD_BASELINE && !existsSync(path.join(OVERHEAD_BASELINE, 'test/bench/bench-gateway.ts')))
  usage(
    `--overhead-baseline: ${OVERHEAD_BASELINE} holds no test/bench/bench-gateway.ts (a cacheroute checkout)`,
  );
if (!(N > 0) || !(SCALE > 0) || !(WORKERS >= 1) || !(SKIP >= 0))
  usage('--n, --scale, --workers must be positive');
const POOL_ARG = values['max-total-tokens'] ?? 'auto';
if (POOL_ARG !== 'auto' && !(Number(POOL_ARG) >= 1024)) usage('--max-total-tokens is auto or a token count');
// The tier-blind baseline means something only where there is a host tier.
const DEFAULT_ROUTERS = ALL_ROUTERS.filter(
  (r) => values.profile === 'hicache' || r !== 'cache-aware-tier-blind',
);
const routersWanted = (values.routers ?? DEFAULT_ROUTERS.join(',')).split(',').filter((r) => r !== '');
for (const r of routersWanted) if (!ALL_ROUTERS.includes(r)) usage(`unknown router ${r}`);
const PAGE_SIZE = Number(values['page-size']);
if (!Number.isInteger(PAGE_SIZE) || PAGE_SIZE < 1 || BLOCK_TOKENS % PAGE_SIZE !== 0)
  usage('--page-size must divide 512 (the trace block)');
const replicaParse = parseReplicaList(values['gateway-replicas'] ?? '1');
const replicaList: readonly number[] = typeof replicaParse === 'string' ? usage(replicaParse) : replicaParse;
const replicated = (values['replicated-routers'] ?? '').split(',').filter((r) => r !== '');
for (const r of replicated) if (!ALL_ROUTERS.includes(r)) usage(`unknown router ${r}`);
if (replicated.includes(PICKER_ROW))
  usage(`--replicated-routers: the ${PICKER_ROW} row runs one Envoy and one picker`);
// The hicache profile gives each simulator a host tier as examples/deployment-hicache.yaml renders it.
const HICACHE_RATIO = 2;
const PROFILE_FLAGS: Readonly<Record<string, readonly string[]>> = {
  dense: [],
  hicache: [
    '--enable-hierarchical-cache',
    '--hicache-ratio',
    HICACHE_RATIO.toFixed(1),
    '--hicache-write-policy',
    'write_through',
  ],
};
const PROFILE = values.profile ?? 'dense';
if (PROFILE === 'hicache-l3') {
  // Its own fleets, workloads and report (bench-hicache-l3.ts); the routers' overhead is the dense run's.
  const { runHicacheL3Bench } = await import('./bench-hicache-l3.ts');
  process.exit(await runHicacheL3Bench(REPO, { ...values, trace: TRACE }));
}
const profileFlags = PROFILE_FLAGS[PROFILE] ?? usage(`--profile is dense or hicache, not ${PROFILE}`);
const logDir = values['log-dir'] ?? mkdtempSync(path.join(os.tmpdir(), 'cacheroute-bench-'));
mkdirSync(logDir, { recursive: true });

const log = (msg: string): void => console.error(`bench: ${msg}`);
const splitArgs = (raw: string | undefined): string[] => (raw ?? '').split(' ').filter((a) => a !== '');
const ctx: FleetContext = {
  repo: REPO,
  logDir,
  log,
  routerArgs: {
    smg: splitArgs(values['smg-args']),
    'sglang-router': splitArgs(values['sglang-router-args']),
  },
  timeScale: SCALE,
  loadExchange: values['load-exchange'] === 'on',
};

// ---------------------------------------------------------------- replay

function startLoadSampler(): { stop(): { mean: number; max: number } } {
  const samples: number[] = [os.loadavg()[0] ?? 0];
  const t = setInterval(() => samples.push(os.loadavg()[0] ?? 0), 5000);
  t.unref();
  return {
    stop() {
      clearInterval(t);
      samples.push(os.loadavg()[0] ?? 0);
      return {
        mean: Number((samples.reduce((a, b) => a + b, 0) / samples.length).toFixed(2)),
        max: Number(Math.max(...samples).toFixed(2)),
      };
    },
  };
}

interface ReplayOut {
  readonly records: RequestRecord[];
  readonly durationMs: number;
  readonly timedOut: boolean;
}

/** Request i goes to urls[i % urls.length]: a Service spreading connections over replicas. */
async function replay(
  urls: readonly string[],
  records: readonly TraceRecord[],
  texts: readonly string[],
  stretch: number,
  timeoutMs: number,
  abort: () => Promise<void>,
): Promise<ReplayOut> {
  const t0 = records[0]?.timestamp ?? 0;
  const targets = urls.map((u) => new URL('/v1/chat/completions', u));
  const results: (RequestRecord | undefined)[] = new Array<RequestRecord | undefined>(records.length);
  const start = performance.now();
  const timers: NodeJS.Timeout[] = [];
  let lastDone = start;
  const all = records.map(
    (rec, i) =>
      new Promise<void>((resolve) => {
        const at = ((rec.timestamp - t0) * stretch) / SCALE;
        timers.push(
          setTimeout(() => {
            const sentAtMs = performance.now() - start;
            const body = {
              model: MODEL,
              messages: [{ role: 'user', content: texts[i] ?? '' }],
              max_tokens: Math.max(1, rec.output_length),
              ignore_eos: true,
              stream: true,
              stream_options: { include_usage: true },
            };
            void postStream(targets[i % targets.length] as URL, body).then((o) => {
              lastDone = performance.now();
              results[i] = buildStreamRecord(i, o, sentAtMs, 'unknown');
              resolve();
            });
          }, at),
        );
      }),
  );
  let timedOut = false;
  let deadline: NodeJS.Timeout | undefined;
  const expired = new Promise<void>((resolve) => {
    deadline = setTimeout(() => {
      timedOut = true;
      resolve();
    }, timeoutMs);
  });
  await Promise.race([Promise.all(all), expired]);
  clearTimeout(deadline);
  if (timedOut) {
    for (const t of timers) clearTimeout(t);
    await abort(); // closing the router ends its streams
    await Promise.race([Promise.all(all), sleep(15_000)]);
  }
  const out: RequestRecord[] = results.map(
    (r, i) =>
      r ?? {
        index: i,
        ok: false,
        status: 0,
        error: 'not answered before the run deadline',
        worker: 'none',
        sentAtMs: 0,
        ttftMs: -1,
        e2eMs: -1,
        promptTokens: 0,
        cachedTokens: 0,
        completionTokens: 0,
      },
  );
  return { records: out, durationMs: lastDone - start, timedOut };
}

interface Bounds {
  /** Infinite-cache hit rate of the slice. */
  readonly infinite: number;
  /** One LRU of the fleet's total KV pool (pooled-bound.ts). */
  readonly pooled: number;
}

/** The fleet's counters over a run: hit rate and per-worker request counts, the same for every router. */
function diffCounters(
  sims: readonly Sim[],
  before: readonly Counters[],
  after: readonly Counters[],
): { hit: number; perWorker: Record<string, number>; imbalance: number } {
  const perWorker: Record<string, number> = {};
  let prompt = 0;
  let cached = 0;
  sims.forEach((s, i) => {
    const a = after[i] as Counters;
    const b = before[i] as Counters;
    perWorker[s.id] = a.requests - b.requests;
    prompt += a.prompt - b.prompt;
    cached += a.cached - b.cached;
  });
  const counts = Object.values(perWorker);
  const mean = counts.reduce((x, y) => x + y, 0) / Math.max(1, counts.length);
  return {
    hit: prompt > 0 ? cached / prompt : 0,
    perWorker,
    imbalance: mean > 0 ? Number((Math.max(...counts) / mean).toFixed(3)) : 0,
  };
}

/**
 * A cold fleet, and for gateway replicas an index that answers before traffic: exact (the
 * fleet's AllBlocksCleared applied after each replica's replay, waitKvIndexSettled), not
 * partial, so every router starts from the same empty caches. Flushes again if a replica
 * has not taken the flush within 10 s.
 */
async function flushForRouter(router: Router, sims: readonly Sim[]): Promise<void> {
  if (router.kvIndexed) await waitKvIndexSettled(router);
  for (let attempt = 1; ; attempt++) {
    await flushFleet(sims);
    if (!router.kvIndexed) return;
    try {
      await waitKvIndexUsable(router, 10_000);
      return;
    } catch (e) {
      if (attempt >= 5) throw e;
      log(
        `${router.name}: index not usable after flush ${attempt} (${(e as Error).message.slice(-200)}); flushing again`,
      );
    }
  }
}

/** A gateway tier's load exchange after a replay: the lag it measured, and whom each replica still hears. */
async function readTierExchange(
  urls: readonly string[],
): Promise<Pick<RouterResult, 'exchange_lag' | 'exchange_peers_at_end'>> {
  const texts = await Promise.all(urls.map(async (u) => (await fetchOk(`${u}/metrics`, {}, 10_000)).text()));
  const lag = computeExchangeLag(texts);
  return {
    exchange_peers_at_end: await Promise.all(urls.map(readExchangePeers)),
    ...(lag ? { exchange_lag: lag } : {}),
  };
}

async function runRouter(
  name: string,
  replicas: number,
  sims: readonly Sim[],
  records: readonly TraceRecord[],
  texts: readonly string[],
  stretch: number,
  bounds: Bounds,
  timeoutMs: number,
): Promise<RouterEntry> {
  const key = rowKey(name, replicas);
  let router: Router;
  try {
    const tag = `replay${replicas > 1 ? `-x${replicas}` : ''}`;
    router =
      name === PICKER_ROW
        ? await startPickerRouter(ctx, sims, tag)
        : await startRouter(ctx, name, sims, tag, replicas);
  } catch (e) {
    log(`${key}: did not start: ${(e as Error).message.slice(0, 500)}`);
    if (e instanceof SkipError) return { skipped: e.message };
    return { failed: (e as Error).message.slice(0, 500) };
  }
  try {
    await flushForRouter(router, sims);
    const before = await Promise.all(sims.map((s) => readCounters(s.url)));
    const sampler = startLoadSampler();
    log(`${key}: replaying ${records.length} requests over ${replicas} replica(s)`);
    const out = await replay(router.urls, records, texts, stretch, timeoutMs, () => stopRouter(router));
    const load = sampler.stop();
    const kv = router.kvIndexed && !out.timedOut ? await countKvIndexUsable(router) : undefined;
    const exchange = router.tier && !out.timedOut ? await readTierExchange(router.urls) : undefined;
    // Let the simulators settle their counters for aborted streams.
    const after = await Promise.all(sims.map((s) => readCounters(s.url)));
    const fleet = diffCounters(sims, before, after);
    const summary = computeSummary(out.records, bounds.infinite, out.durationMs, SCALE);
    const gaps = computeTierMetrics(out.records);
    const ratio = (x: number, b: number): number => (b > 0 ? Number((x / b).toFixed(4)) : 0);
    const firstError = out.records.find((r) => !r.ok);
    const result: RouterResult = {
      replicas,
      hit_rate: Number(fleet.hit.toFixed(4)),
      pooled_bound: bounds.pooled,
      hit_rate_vs_bound: ratio(fleet.hit, bounds.pooled),
      hit_rate_vs_infinite: ratio(fleet.hit, bounds.infinite),
      ttft_p50_ms: summary.ttft_p50_ms,
      ttft_p99_ms: summary.ttft_p99_ms,
      e2e_p50_ms: summary.e2e_p50_ms,
      e2e_p99_ms: summary.e2e_p99_ms,
      itl_p50_ms: gaps.itl_p50_ms,
      itl_p99_ms: gaps.itl_p99_ms,
      spread: computeSpread(out.records),
      throughput_rps: summary.throughput_rps,
      imbalance: fleet.imbalance,
      requests: summary.requests,
      errors: summary.errors,
      hit_rate_client: summary.hit_rate,
      per_worker: fleet.perWorker,
      duration_s: summary.duration_s,
      loadavg_mean: load.mean,
      loadavg_max: load.max,
      ...(firstError ? { first_error: `${firstError.status} ${firstError.error ?? ''}`.slice(0, 300) } : {}),
      ...(kv
        ? {
            kv_index_usable: `${kv.usable}/${kv.total}${kv.reasons.length > 0 ? ` (${kv.reasons.join('; ')})` : ''}`,
          }
        : {}),
      ...exchange,
    };
    log(`${key}: ${JSON.stringify(result)}`);
    if (out.timedOut)
      return { failed: `run deadline ${timeoutMs} ms passed; partial: ${JSON.stringify(result)}` };
    return result;
  } catch (e) {
    log(`${key}: failed: ${(e as Error).message.slice(0, 500)}`);
    return { failed: (e as Error).message.slice(0, 500) };
  } finally {
    await stopRouter(router);
  }
}

// ---------------------------------------------------------------- overhead

/** The standalone gateway, with its KV index and without (approximate tokens), as wanted. */
async function startGatewayTargets(zero: Sim, routers: Router[]): Promise<OverheadTarget[]> {
  const targets: OverheadTarget[] = [];
  if (measures('gateway')) {
    const gw = await startRouter(ctx, 'cache-aware', [zero], 'overhead');
    routers.push(gw);
    await waitKvIndexUsable(gw);
    targets.push({ name: 'gateway', url: gw.urls[0] ?? '', pgids: groupsOf(gw.procs) });
  }
  if (measures('gateway-approx')) {
    // The same gateway where the runtime publishes no events: approximate tokens, no tokenizer, no index.
    const approx = await startRouter(
      ctx,
      'cache-aware',
      [{ id: zero.id, url: zero.url, proc: zero.proc }],
      'overhead-approx',
    );
    routers.push(approx);
    targets.push({ name: 'gateway-approx', url: approx.urls[0] ?? '', pgids: groupsOf(approx.procs) });
  }
  return targets;
}

/**
 * Envoy asking a server that makes no decision (a gRPC stream a request): the picker's floor,
 * ext-proc-floor.ts on the picker's own stack (`envoy-floor`) or ext-proc-floor-go on grpc-go
 * (`envoy-floor-go`: the seat's floor with a compiled server).
 */
async function startExtProcFloorTarget(
  name: 'envoy-floor' | 'envoy-floor-go',
  zero: Sim,
  envoys: RunningEnvoy[],
  procs: Proc[],
): Promise<OverheadTarget> {
  const upstream = new URL(zero.url).host;
  const floor =
    name === 'envoy-floor'
      ? await startExtProcFloor(ctx, upstream)
      : await startExtProcFloorGo(ctx, upstream);
  procs.push(floor.proc);
  const envoy = await startEnvoy({ kind: 'picker', pickerPort: floor.pickerPort }, { detached: true });
  envoys.push(envoy);
  const groups = groupsOf([floor.proc]);
  return {
    name,
    url: envoy.url,
    pgids: [envoy.proc.pid, ...groups],
    cpuParts: { envoy: [envoy.proc.pid], picker: groups },
  };
}

/** The floors `--overhead-targets` names (all by default); one that cannot start is noted, not measured. */
async function startFloorTargets(
  zero: Sim,
  envoys: RunningEnvoy[],
  procs: Proc[],
  notes: Record<string, string>,
): Promise<OverheadTarget[]> {
  const targets: OverheadTarget[] = [];
  if (measures('envoy-floor'))
    targets.push(await startExtProcFloorTarget('envoy-floor', zero, envoys, procs));
  if (measures('envoy-floor-go')) {
    try {
      targets.push(await startExtProcFloorTarget('envoy-floor-go', zero, envoys, procs));
    } catch (e) {
      notes['envoy-floor-go'] = (e as Error).message.slice(0, 300);
    }
  }
  return targets;
}

/**
 * Envoy asking the endpoint picker of the checkout at `repo` (this one, or --overhead-baseline's)
 * over its own gateway state, as an overhead target; its CPU split into Envoy's and the picker's.
 * With `replicas` > 1 the picker is a tier sharing load over the exchange and Envoy spreads the
 * ext_proc streams over them (`envoy-picker-x2`: does a second event loop take the p99 down?).
 */
async function startPickerTarget(
  name: string,
  repo: string,
  zero: Sim,
  envoys: RunningEnvoy[],
  pickerProcs: Proc[],
  replicas = 1,
): Promise<OverheadTarget> {
  const pickers = await startPickerTier(
    { ...ctx, repo },
    [zero],
    `overhead-${name.replace('@', '-')}`,
    replicas,
  );
  const procs = pickers.map((p) => p.proc);
  pickerProcs.push(...procs);
  await waitKvIndexUsable({ name: 'cache-aware', urls: pickers.map((p) => p.url), procs, kvIndexed: true });
  const [first, ...more] = pickers.map((p) => p.pickerPort);
  const envoyPicker = await startEnvoy(
    { kind: 'picker', pickerPort: first ?? 0, ...(more.length > 0 ? { morePickerPorts: more } : {}) },
    { detached: true },
  );
  envoys.push(envoyPicker);
  const pickerGroups = groupsOf(procs);
  return {
    name,
    url: envoyPicker.url,
    pgids: [envoyPicker.proc.pid, ...pickerGroups],
    cpuParts: { envoy: [envoyPicker.proc.pid], picker: pickerGroups },
  };
}

/** The overhead phase starts once the CPUs are this little busy (the note says the same figure). */
const SETTLE_MAX_BUSY = 0.35;

async function runOverhead(
  wanted: readonly string[],
  skipped: ReadonlySet<string>,
): Promise<{ stats: Record<string, OverheadStats>; notes: Record<string, string> }> {
  // With KV events, as in the replay: the gateway's path includes tokenizing and the index match.
  const zero = await startSim(
    ctx,
    'zero',
    [...ZERO_LATENCY_SIM_ARGS, '--page-size', String(PAGE_SIZE)],
    PAGE_SIZE,
  );
  const routers: Router[] = [];
  const notes: Record<string, string> = {};
  let floor: { url: string; proc: Proc } | undefined;
  const envoys: RunningEnvoy[] = [];
  const pickerProcs: Proc[] = [];
  try {
    const targets: OverheadTarget[] = [{ name: 'direct', url: zero.url }];
    targets.push(...(await startGatewayTargets(zero, routers)));
    if (measures('node-floor')) {
      floor = await startNodeFloorProxy(ctx, zero.url);
      targets.push({ name: 'node-floor', url: floor.url, pgids: groupsOf([floor.proc]) });
    }
    // Envoy alone on a static route (the picker path's floor), then Envoy asking the gateway's
    // endpoint picker (ext_proc) over the same gateway state; CPU: Envoy's and the gateway's.
    if (measures('envoy-static')) {
      const envoyStatic = await startEnvoy({ kind: 'static', upstream: zero.url }, { detached: true });
      envoys.push(envoyStatic);
      targets.push({ name: 'envoy-static', url: envoyStatic.url, pgids: [envoyStatic.proc.pid] });
    }
    const pickers: [string, string][] = [
      ...(measures('envoy-picker') ? [['envoy-picker', REPO] as [string, string]] : []),
      ...(OVERHEAD_BASELINE ? [['envoy-picker@baseline', OVERHEAD_BASELINE] as [string, string]] : []),
    ];
    targets.push(...(await startFloorTargets(zero, envoys, pickerProcs, notes)));
    for (const [name, repo] of pickers)
      targets.push(await startPickerTarget(name, repo, zero, envoys, pickerProcs));
    if (measures('envoy-picker-x2'))
      targets.push(await startPickerTarget('envoy-picker-x2', REPO, zero, envoys, pickerProcs, 2));
    for (const name of PY_ROUTERS) {
      if (!wanted.includes(name) || skipped.has(name) || !measures(name)) {
        notes[name] = 'skipped (not run in the replay, or not in --overhead-targets)';
        continue;
      }
      try {
        const r = await startRouter(ctx, name, [zero], 'overhead');
        routers.push(r);
        targets.push({ name, url: r.urls[0] ?? '', pgids: groupsOf(r.procs) });
      } catch (e) {
        notes[name] = (e as Error).message.slice(0, 300);
      }
    }
    const settle = await waitForQuietCpus(SETTLE_MAX_BUSY);
    notes['settle'] =
      `waited ${(settle.waitedMs / 1000).toFixed(0)} s for the CPUs to fall under ${SETTLE_MAX_BUSY * 100}% busy (last second: ${Math.round(settle.busy * 100)}%)`;
    log(`overhead: ${targets.map((t) => t.name).join(', ')} at ${OVERHEAD_RATE} req/s; ${notes['settle']}`);
    const cpuBefore = readCpuTimes();
    const sampler = startLoadSampler();
    const stats = await measureOverhead(targets, {
      model: MODEL,
      rate: OVERHEAD_RATE,
      roundMs: Number(values['overhead-round-ms']),
      rounds: Number(values['overhead-rounds']),
      warmupRounds: 2,
      timeoutMs: 10_000,
    });
    const load = sampler.stop();
    notes['loadavg'] = `mean ${load.mean}, max ${load.max}`;
    const cpuAfter = readCpuTimes();
    if (cpuBefore && cpuAfter)
      notes['cpu_busy'] =
        `${Math.round(computeBusyShare(cpuBefore, cpuAfter) * 100)}% of all CPUs during the phase`;
    return { stats, notes };
  } finally {
    for (const r of routers) await stopRouter(r);
    if (floor) await stopProcess(floor.proc);
    for (const e of envoys) await e.close();
    for (const p of pickerProcs) await stopProcess(p);
    await stopProcess(zero.proc);
  }
}

// ---------------------------------------------------------------- main

/** Each process leads its own group (startProcess spawns detached): a router's helpers count with it. */
const groupsOf = (procs: readonly Proc[]): number[] =>
  procs.flatMap((p) => (p.child.pid ? [p.child.pid] : []));

/** overhead p50/p99 of `name` over the direct baseline, ms. */
function computeDelta(
  o: Readonly<Record<string, OverheadStats>> | undefined,
  name: string,
  p: 'p50_ms' | 'p99_ms',
): number | null {
  const a = o?.[name];
  const d = o?.['direct'];
  return a && d ? Number((a[p] - d[p]).toFixed(3)) : null;
}

function summarizeOverhead(
  overhead: { stats: Record<string, OverheadStats>; notes: Record<string, string> } | undefined,
): Record<string, unknown> {
  const o = overhead?.stats;
  return {
    overhead_p50_ms: computeDelta(o, 'gateway', 'p50_ms'),
    overhead_p99_ms: computeDelta(o, 'gateway', 'p99_ms'),
    overhead_rps: o?.['gateway']?.rps ?? null,
    overhead_offered_rps: OVERHEAD_RATE,
    overhead_by_router: Object.fromEntries(
      Object.keys(o ?? {})
        .filter((k) => k !== 'direct')
        .map((k) => [
          k,
          {
            overhead_p50_ms: computeDelta(o, k, 'p50_ms'),
            overhead_p99_ms: computeDelta(o, k, 'p99_ms'),
            rps: o?.[k]?.rps,
            cpu_ms_per_req: o?.[k]?.cpu_ms_per_req ?? null,
            ...(o?.[k]?.cpu_ms_per_req_parts ? { cpu_ms_per_req_parts: o[k].cpu_ms_per_req_parts } : {}),
          },
        ]),
    ),
    overhead_raw: o ?? null,
    overhead_notes: overhead?.notes ?? null,
  };
}

/** --stretch, else the stretch that loads the fleet's prefill to --load with no cache hit. */
function chooseStretch(promptTps: number): number {
  const stretch =
    values.stretch !== undefined
      ? Number(values.stretch)
      : computeStretch(promptTps, WORKERS * PREFILL_TPS, LOAD);
  if (!(stretch > 0)) usage('--stretch must be > 0');
  return stretch;
}

/** Bound of one router's replay: --run-timeout-s, else 3x the expected replay + 3 minutes. */
function computeRunTimeoutMs(expectedS: number): number {
  const given = values['run-timeout-s'];
  return given !== undefined ? Number(given) * 1000 : (3 * expectedS + 180) * 1000;
}

type OverheadOut = { stats: Record<string, OverheadStats>; notes: Record<string, string> };

/** The overhead phase; a failure becomes a note, never the end of the report. */
async function runOverheadSafely(routers: Readonly<Record<string, RouterEntry>>): Promise<OverheadOut> {
  const skipped = new Set(
    Object.entries(routers)
      .filter(([, e]) => 'skipped' in e)
      .map(([n]) => n),
  );
  try {
    if (values['overhead-only']) return await runOverhead(routersWanted, skipped);
    return await runOverheadInChild(routersWanted.filter((r) => !skipped.has(r)));
  } catch (e) {
    return { stats: {}, notes: { error: (e as Error).message.slice(0, 500) } };
  }
}

const OverheadStatsSchema = z.object({
  sent: z.number(),
  ok: z.number(),
  errors: z.number(),
  p50_ms: z.number(),
  p99_ms: z.number(),
  max_ms: z.number(),
  rps: z.number(),
  cpu_ms_per_req: z.number().optional(),
  cpu_ms_per_req_parts: z.record(z.string(), z.number()).optional(),
  first_error: z.string().optional(),
}) satisfies z.ZodType<OverheadStats>;
const OverheadReport = z.object({
  overhead_raw: z.record(z.string(), OverheadStatsSchema).nullable(),
  overhead_notes: z.record(z.string(), z.string()).nullable(),
});

/**
 * After the replays this process holds the trace, its prompts and every answer (hundreds of MB),
 * and its major collections would stall whichever target is being measured: the phase runs in a
 * fresh process, as lean as `--overhead-only`, with the same flags. Its log: overhead.log.
 */
async function runOverheadInChild(wanted: readonly string[]): Promise<OverheadOut> {
  const args = [
    path.join(REPO, 'test/bench/bench-routing.ts'),
    ...process.argv.slice(2),
    '--overhead-only',
    '--routers',
    wanted.join(','),
  ];
  const logPath = path.join(logDir, 'overhead.log');
  let out: { stdout: string; stderr: string };
  try {
    out = await promisify(execFile)(process.execPath, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  } catch (e) {
    writeFileSync(logPath, (e as { stderr?: string }).stderr ?? '');
    throw new Error(`the overhead phase's process failed (its log: ${logPath}): ${(e as Error).message}`, {
      cause: e,
    });
  }
  writeFileSync(logPath, out.stderr);
  const last = out.stdout.trim().split('\n').at(-1) ?? '';
  const report = OverheadReport.parse(JSON.parse(last));
  return { stats: report.overhead_raw ?? {}, notes: report.overhead_notes ?? {} };
}

/** Every wanted router at each replica count; at R > 1 only the routers of --replicated-routers. */
function planRuns(
  wanted: readonly string[],
  replicaCounts: readonly number[],
  multi: readonly string[],
): { name: string; replicas: number }[] {
  return replicaCounts.flatMap((replicas) =>
    wanted.filter((n) => replicas === 1 || multi.includes(n)).map((name) => ({ name, replicas })),
  );
}

/** The run's setup, as the report and its log line record it. */
function describeSetup(run: {
  records: number;
  pool: number;
  choice: ReturnType<typeof choosePool> | undefined;
  stretch: number;
  workload: ReturnType<typeof computeWorkload>;
  expectedS: number;
}) {
  return {
    trace: path.relative(REPO, path.resolve(TRACE)),
    n: run.records,
    skip: SKIP,
    workers: WORKERS,
    max_total_tokens: run.pool,
    max_total_tokens_chosen: run.choice ? 'auto: max of share(fleet pool) - share(one pool)' : 'given',
    page_size: PAGE_SIZE,
    profile: PROFILE,
    gateway_replicas: replicaList,
    replicated_routers: replicated,
    gateway_routing: 'KV events from every simulator + the simulator tokenizer (exact index)',
    router_args: ctx.routerArgs,
    smg_default_args: smgDefaultArgs(SCALE),
    prefill_tps: PREFILL_TPS,
    time_scale: SCALE,
    arrival_stretch: Number(run.stretch.toFixed(3)),
    offered_prefill_load_no_cache: Number(
      (run.workload.prompt_tps / run.stretch / (WORKERS * PREFILL_TPS)).toFixed(3),
    ),
    expected_replay_s: Number(run.expectedS.toFixed(1)),
    latency_unit: 'wall-clock ms (x time_scale = model ms)',
    gateway_admission: 'maxConcurrency 100000, maxQueue 1000000, adaptive off; reuse off',
    gateway_load_exchange: values['load-exchange'],
    cpus: os.cpus().length,
    loadavg_start: os.loadavg().map((x) => Number(x.toFixed(2))),
    log_dir: logDir,
  };
}

/** The overhead phase's rows shared the machine with whatever else ran: its load, beside them. */
function renderPhaseLoad(overhead: OverheadOut | undefined): string[] {
  const notes = overhead?.notes;
  const load = notes?.['loadavg'];
  if (load === undefined) return [];
  return ['', `overhead phase: load average (1 min) ${load}; ${notes?.['cpu_busy'] ?? ''}`];
}

async function main(): Promise<void> {
  installCleanup();
  const parsed = parseTrace(readFileSync(TRACE, 'utf8'), N, SKIP);
  if (!parsed.ok) usage(parsed.error);
  const records = parsed.value;
  if (records.length < N) log(`the trace has only ${records.length} requests after --skip`);
  const choice = POOL_ARG === 'auto' ? choosePool(records, WORKERS) : undefined;
  const POOL = choice?.pool ?? Number(POOL_ARG);
  const workload = computeWorkload(records, POOL, WORKERS);
  // A host tier holds HICACHE_RATIO x the device pool more: the pooled bound counts both tiers.
  const tiers = PROFILE === 'hicache' ? 1 + HICACHE_RATIO : 1;
  const pooled = computePooledBound(records, POOL * WORKERS * tiers, PAGE_SIZE);
  const bounds: Bounds = { infinite: workload.bound, pooled: Number(pooled.hitRate.toFixed(4)) };
  const stretch = chooseStretch(workload.prompt_tps);
  const expectedS = (workload.span_s * stretch) / SCALE;
  const timeoutMs = computeRunTimeoutMs(expectedS);
  const setup = describeSetup({ records: records.length, pool: POOL, choice, stretch, workload, expectedS });
  log(`setup ${JSON.stringify(setup)}`);
  log(`workload ${JSON.stringify(workload)}`);
  const texts = values['overhead-only'] ? [] : records.map(buildPromptText);

  const simFlags = [
    '--max-total-tokens',
    String(POOL),
    '--sim-time-scale',
    String(SCALE),
    '--page-size',
    String(PAGE_SIZE),
    ...profileFlags,
  ];
  const sims: Sim[] = [];
  const runs = values['overhead-only'] ? [] : planRuns(routersWanted, replicaList, replicated);
  if (runs.length > 0) {
    for (let i = 0; i < WORKERS; i++) sims.push(await startSim(ctx, `w${i}`, simFlags, PAGE_SIZE));
    log(`fleet: ${sims.map((s) => `${s.id}=${s.url}`).join(' ')}`);
  }

  const routers: Record<string, RouterEntry> = {};
  for (const { name, replicas } of runs)
    routers[rowKey(name, replicas)] = await runRouter(
      name,
      replicas,
      sims,
      records,
      texts,
      stretch,
      bounds,
      timeoutMs,
    );
  for (const s of sims) await stopProcess(s.proc);

  const overhead = values['no-overhead'] ? undefined : await runOverheadSafely(routers);
  const o = overhead?.stats;
  const scaling = computeScaling(routers);
  const goals = [
    ...judgeGoals(routers, o, OVERHEAD_RATE),
    ...judgeReplicaGoals(routers, scaling, setup.trace),
    ...[judgeTierGoal(routers)].filter((g) => g !== undefined),
    ...judgePickerGoals(routers, routersWanted.includes(PICKER_ROW)),
    ...[judgePickerOverhead(o, OVERHEAD_RATE)].filter((g) => g !== undefined),
  ];
  const pickerRatios = comparePickerRow(routers) ?? null;
  const report = {
    routers,
    ...summarizeOverhead(overhead),
    goals,
    replica_scaling: scaling,
    picker_vs_standalone: pickerRatios,
    bound: workload.bound,
    pooled_bound: bounds.pooled,
    pooled_bound_capacity_tokens: pooled.capacityTokens,
    time_scale: SCALE,
    workload,
    pool_curve: choice?.curve ?? null,
    setup: { ...setup, loadavg_end: os.loadavg().map((x) => Number(x.toFixed(2))) },
  };
  const header = [
    `routing benchmark: ${records.length} requests of ${setup.trace}, ${WORKERS} simulators x ${POOL} KV tokens`,
    `time scale ${SCALE} (latencies in wall ms; x${SCALE} = model ms), arrivals x${setup.arrival_stretch} (no-cache prefill load ${setup.offered_prefill_load_no_cache})`,
    `bound: infinite cache ${workload.bound}, pooled cache (one LRU of ${WORKERS} x ${POOL * tiers} tokens${tiers > 1 ? ', host tier included' : ''}, pages of ${PAGE_SIZE}) ${bounds.pooled}; profile ${PROFILE}`,
    `median reuse distance ${workload.reuse_distance_p50_tokens} tokens; reuses within one pool ${workload.reuse_within_one_pool}, within fleet pool ${workload.reuse_within_fleet_pool}`,
    `load average start ${setup.loadavg_start.join(' ')}, end ${report.setup.loadavg_end.join(' ')} on ${setup.cpus} CPUs`,
  ];
  console.error(
    [
      renderTable(routers, o, goals, header),
      ...renderPickerLines(pickerRatios),
      ...renderPhaseLoad(overhead),
    ].join('\n'),
  );
  console.log(JSON.stringify(report));
}

try {
  await main();
} finally {
  await stopAll();
}
// Leftover keep-alive sockets must not hold the process open.
process.exit(process.exitCode ?? 0);
