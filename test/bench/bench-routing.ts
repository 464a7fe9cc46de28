// The routing benchmark (`make bench [N=2000]`): one fleet of simulators,
// one Mooncake trace slice, replayed through each router in turn from a cold
// fleet; then the routers' own cost on tiny requests. Human table on stderr,
// one JSON line last on stdout.
//
//   node test/bench/bench-routing.ts [--trace FILE] [--n 2000] [--scale 8] [--load 0.8]
//        [--workers 4] [--max-total-tokens 413000] [--routers a,b,...] [--no-overhead]
//        [--overhead-rate 500] [--overhead-rounds 4] [--log-dir DIR]
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
//   router runs with its defaults (no concurrency limit).

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { measureOverhead, type OverheadStats, type OverheadTarget } from './bench-overhead.ts';
import {
  fetchOk,
  findFreePort,
  installCleanup,
  sleep,
  startProcess,
  stopAll,
  stopProcess,
  waitUntil,
  type Proc,
} from './bench-procs.ts';
import { judgeGoals, renderTable, type RouterEntry, type RouterResult } from './bench-report.ts';
import { choosePool, computeStretch, computeWorkload } from './bench-workload.ts';
import { postStream } from './replay-client.ts';
import { buildStreamRecord, computeSummary, type RequestRecord } from './replay-stats.ts';
import { buildPromptText, parseTrace, type TraceRecord } from './replay-trace.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const MODEL = 'sim/llama-8b';
const GATEWAY_POLICIES = ['cache-aware', 'prefix-hash', 'least-load', 'round-robin'] as const;
const PY_ROUTERS = ['sglang-router', 'smg'] as const;
const ALL_ROUTERS: readonly string[] = [...GATEWAY_POLICIES, ...PY_ROUTERS];
const SALT = 'bench-salt';
const PREFILL_TPS = 8000;

const { values } = parseArgs({
  options: {
    trace: { type: 'string', default: path.join(REPO, '../shared/data/mooncake_conversation_trace.jsonl') },
    n: { type: 'string', default: '2000' },
    skip: { type: 'string', default: '0' },
    scale: { type: 'string', default: '8' },
    load: { type: 'string', default: '0.8' },
    stretch: { type: 'string' },
    workers: { type: 'string', default: '4' },
    'max-total-tokens': { type: 'string', default: 'auto' },
    routers: { type: 'string', default: ALL_ROUTERS.join(',') },
    'no-overhead': { type: 'boolean', default: false },
    'overhead-only': { type: 'boolean', default: false },
    'overhead-rate': { type: 'string', default: '500' },
    'overhead-rounds': { type: 'string', default: '4' },
    'overhead-round-ms': { type: 'string', default: '1500' },
    'log-dir': { type: 'string' },
    'run-timeout-s': { type: 'string' },
  },
});

function usage(msg: string): never {
  console.error(`bench: ${msg}`);
  process.exit(2);
}

const N = Number(values.n);
const SKIP = Number(values.skip);
const SCALE = Number(values.scale);
const LOAD = Number(values.load);
const WORKERS = Number(values.workers);
const OVERHEAD_RATE = Number(values['overhead-rate']);
if (!(N > 0) || !(SCALE > 0) || !(WORKERS >= 1) || !(SKIP >= 0))
  usage('--n, --scale, --workers must be positive');
const POOL_ARG = values['max-total-tokens'] ?? 'auto';
if (POOL_ARG !== 'auto' && !(Number(POOL_ARG) >= 1024)) usage('--max-total-tokens is auto or a token count');
const routersWanted = (values.routers ?? '').split(',').filter((r) => r !== '');
for (const r of routersWanted) if (!ALL_ROUTERS.includes(r)) usage(`unknown router ${r}`);
const logDir = values['log-dir'] ?? mkdtempSync(path.join(os.tmpdir(), 'cacheroute-bench-'));
mkdirSync(logDir, { recursive: true });

const log = (msg: string): void => console.error(`bench: ${msg}`);

// ---------------------------------------------------------------- simulators

interface Sim {
  readonly id: string;
  readonly url: string;
  readonly proc: Proc;
}

async function startSim(id: string, extra: readonly string[]): Promise<Sim> {
  const port = await findFreePort();
  const args = [
    path.join(REPO, 'test/sim/main.ts'),
    '--model-path',
    MODEL,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--enable-cache-report',
    '--enable-metrics',
    '--sim-worker-id',
    id,
    ...extra,
  ];
  const proc = startProcess(id, process.execPath, args, path.join(logDir, `${id}.log`));
  const url = `http://127.0.0.1:${port}`;
  await waitUntil(
    `simulator ${id}`,
    async () => (await fetchOk(`${url}/health`)).status === 200,
    30_000,
    proc,
  );
  return { id, url, proc };
}

interface Counters {
  requests: number;
  prompt: number;
  cached: number;
}

async function readCounters(url: string): Promise<Counters> {
  const text = await (await fetchOk(`${url}/metrics`, {}, 10_000)).text();
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
async function flushFleet(sims: readonly Sim[]): Promise<void> {
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

class SkipError extends Error {}

const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

interface Router {
  readonly url: string;
  readonly proc: Proc;
}

function writeRoutes(name: string, policy: string, endpoints: readonly Sim[]): string {
  const file = path.join(logDir, `routes-${name}.json`);
  const routes = [
    {
      model: MODEL,
      deployment: 'bench/sim',
      fingerprint: 'bench',
      salt: SALT,
      routing: { policy },
      // Out of the way: this measures routing, not admission.
      admission: { maxConcurrency: 100_000, maxQueue: 1_000_000, queueTimeoutSeconds: 3600, adaptive: false },
      reuse: { enabled: false },
      endpoints: endpoints.map((s) => ({
        id: s.id,
        url: s.url,
        fingerprint: 'bench',
        verified: true,
        ready: true,
      })),
    },
  ];
  writeFileSync(file, JSON.stringify(routes, null, 2));
  return file;
}

let venvDir: string | undefined;
let venvError: string | undefined;

/** hack/bench-venv.sh once; failures become skip reasons, never fatal. */
function ensureVenv(): void {
  if (venvDir !== undefined || venvError !== undefined) return;
  log('preparing the router virtualenv (hack/bench-venv.sh)');
  const r = spawnSync('bash', [path.join(REPO, 'hack/bench-venv.sh')], {
    encoding: 'utf8',
    timeout: 30 * 60_000,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = (r.stdout ?? '').trim().split('\n').pop() ?? '';
  if (r.status === 0 && out !== '' && existsSync(path.join(out, 'bin/python'))) venvDir = out;
  else
    venvError = `virtualenv not available: ${(r.error?.message ?? r.stderr ?? '').trim().slice(-300) || `exit ${r.status}`}`;
}

function pythonRouterCommand(name: string, venv: string): { cmd: string; pre: string[]; pkg: string } {
  return name === 'smg'
    ? { cmd: path.join(venv, 'bin/smg'), pre: ['launch'], pkg: 'smg' }
    : {
        cmd: path.join(venv, 'bin/python'),
        pre: ['-m', 'sglang_router.launch_router'],
        pkg: 'sglang-router',
      };
}

async function startRouter(name: string, endpoints: readonly Sim[], tag: string): Promise<Router> {
  const port = await findFreePort();
  const url = `http://127.0.0.1:${port}`;
  let proc: Proc;
  if ((GATEWAY_POLICIES as readonly string[]).includes(name)) {
    const routes = writeRoutes(`${name}-${tag}`, name, endpoints);
    proc = startProcess(
      `gateway-${name}`,
      process.execPath,
      [
        path.join(REPO, 'gateway/src/server.ts'),
        '--routes',
        routes,
        '--host',
        '127.0.0.1',
        '--port',
        String(port),
        '--log-level',
        'warn',
      ],
      path.join(logDir, `gateway-${name}-${tag}.log`),
    );
  } else {
    ensureVenv();
    if (venvDir === undefined) throw new SkipError(venvError ?? 'virtualenv not available');
    const { cmd, pre, pkg } = pythonRouterCommand(name, venvDir);
    const failed = path.join(venvDir, `failed-${pkg}.txt`);
    if (existsSync(failed)) {
      const lines = readFileSync(failed, 'utf8').trim().split('\n');
      throw new SkipError(`pip install ${pkg} failed: ${lines.slice(-2).join(' | ').slice(0, 300)}`);
    }
    if (!existsSync(cmd)) throw new SkipError(`${cmd} missing after install`);
    const prom = await findFreePort();
    proc = startProcess(
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
      ],
      path.join(logDir, `${name}-${tag}.log`),
      // Loopback only: no tokenizer download attempts (the routers route on text here).
      { ...process.env, HF_HUB_OFFLINE: '1', HF_HUB_DISABLE_TELEMETRY: '1', TRANSFORMERS_OFFLINE: '1' },
    );
  }
  const router = { url, proc };
  try {
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
    // A real chat request through it, so a router that lists models but cannot route fails here.
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
  } catch (e) {
    await stopProcess(proc);
    const msg = (e as Error).message.replace(ANSI, '');
    if ((PY_ROUTERS as readonly string[]).includes(name))
      throw new SkipError(`could not start: ${msg.slice(0, 400)}`);
    throw e;
  }
  return router;
}

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

async function replay(
  url: string,
  records: readonly TraceRecord[],
  texts: readonly string[],
  stretch: number,
  timeoutMs: number,
  abort: () => Promise<void>,
): Promise<ReplayOut> {
  const t0 = records[0]?.timestamp ?? 0;
  const target = new URL('/v1/chat/completions', url);
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
            void postStream(target, body).then((o) => {
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

async function runRouter(
  name: string,
  sims: readonly Sim[],
  records: readonly TraceRecord[],
  texts: readonly string[],
  stretch: number,
  bound: number,
  timeoutMs: number,
): Promise<RouterEntry> {
  let router: Router;
  try {
    router = await startRouter(name, sims, 'replay');
  } catch (e) {
    if (e instanceof SkipError) return { skipped: e.message };
    return { failed: (e as Error).message.slice(0, 500) };
  }
  try {
    await flushFleet(sims);
    const before = await Promise.all(sims.map((s) => readCounters(s.url)));
    const sampler = startLoadSampler();
    log(`${name}: replaying ${records.length} requests`);
    const out = await replay(router.url, records, texts, stretch, timeoutMs, () => stopProcess(router.proc));
    const load = sampler.stop();
    // Let the simulators settle their counters for aborted streams.
    const after = await Promise.all(sims.map((s) => readCounters(s.url)));
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
    const summary = computeSummary(out.records, bound, out.durationMs, SCALE);
    const counts = Object.values(perWorker);
    const mean = counts.reduce((x, y) => x + y, 0) / Math.max(1, counts.length);
    const hit = prompt > 0 ? cached / prompt : 0;
    const firstError = out.records.find((r) => !r.ok);
    const result: RouterResult = {
      hit_rate: Number(hit.toFixed(4)),
      hit_rate_vs_bound: bound > 0 ? Number((hit / bound).toFixed(4)) : 0,
      ttft_p50_ms: summary.ttft_p50_ms,
      ttft_p99_ms: summary.ttft_p99_ms,
      e2e_p50_ms: summary.e2e_p50_ms,
      e2e_p99_ms: summary.e2e_p99_ms,
      throughput_rps: summary.throughput_rps,
      imbalance: mean > 0 ? Number((Math.max(...counts) / mean).toFixed(3)) : 0,
      requests: summary.requests,
      errors: summary.errors,
      hit_rate_client: summary.hit_rate,
      per_worker: perWorker,
      duration_s: summary.duration_s,
      loadavg_mean: load.mean,
      loadavg_max: load.max,
      ...(firstError ? { first_error: `${firstError.status} ${firstError.error ?? ''}`.slice(0, 300) } : {}),
    };
    log(`${name}: ${JSON.stringify(result)}`);
    if (out.timedOut)
      return { failed: `run deadline ${timeoutMs} ms passed; partial: ${JSON.stringify(result)}` };
    return result;
  } catch (e) {
    return { failed: (e as Error).message.slice(0, 500) };
  } finally {
    await stopProcess(router.proc);
  }
}

// ---------------------------------------------------------------- overhead

async function runOverhead(
  wanted: readonly string[],
  skipped: ReadonlySet<string>,
): Promise<{ stats: Record<string, OverheadStats>; notes: Record<string, string> }> {
  const zero = await startSim('zero', [
    '--sim-prefill-tps',
    '1e12',
    '--sim-decode-base-ms',
    '0',
    '--sim-decode-per-req-ms',
    '0',
    '--sim-host-load-tps',
    '1e12',
  ]);
  const routers: Router[] = [];
  const notes: Record<string, string> = {};
  try {
    const targets: OverheadTarget[] = [{ name: 'direct', url: zero.url }];
    const gw = await startRouter('cache-aware', [zero], 'overhead');
    routers.push(gw);
    targets.push({ name: 'gateway', url: gw.url });
    for (const name of PY_ROUTERS) {
      if (!wanted.includes(name) || skipped.has(name)) {
        notes[name] = 'skipped (not run in the replay)';
        continue;
      }
      try {
        const r = await startRouter(name, [zero], 'overhead');
        routers.push(r);
        targets.push({ name, url: r.url });
      } catch (e) {
        notes[name] = (e as Error).message.slice(0, 300);
      }
    }
    log(`overhead: ${targets.map((t) => t.name).join(', ')} at ${OVERHEAD_RATE} req/s`);
    const sampler = startLoadSampler();
    const stats = await measureOverhead(targets, {
      model: MODEL,
      rate: OVERHEAD_RATE,
      roundMs: Number(values['overhead-round-ms']),
      rounds: Number(values['overhead-rounds']),
      warmup: 1000,
      timeoutMs: 10_000,
    });
    const load = sampler.stop();
    notes['loadavg'] = `mean ${load.mean}, max ${load.max}`;
    return { stats, notes };
  } finally {
    for (const r of routers) await stopProcess(r.proc);
    await stopProcess(zero.proc);
  }
}

// ---------------------------------------------------------------- main

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
    return await runOverhead(routersWanted, skipped);
  } catch (e) {
    return { stats: {}, notes: { error: (e as Error).message.slice(0, 500) } };
  }
}

async function main(): Promise<void> {
  installCleanup();
  const parsed = parseTrace(readFileSync(values.trace ?? '', 'utf8'), N, SKIP);
  if (!parsed.ok) usage(parsed.error);
  const records = parsed.value;
  if (records.length < N) log(`the trace has only ${records.length} requests after --skip`);
  const choice = POOL_ARG === 'auto' ? choosePool(records, WORKERS) : undefined;
  const POOL = choice?.pool ?? Number(POOL_ARG);
  const workload = computeWorkload(records, POOL, WORKERS);
  const stretch = chooseStretch(workload.prompt_tps);
  const expectedS = (workload.span_s * stretch) / SCALE;
  const timeoutMs = computeRunTimeoutMs(expectedS);
  const setup = {
    trace: path.relative(REPO, path.resolve(values.trace ?? '')),
    n: records.length,
    skip: SKIP,
    workers: WORKERS,
    max_total_tokens: POOL,
    max_total_tokens_chosen: choice ? 'auto: max of share(fleet pool) - share(one pool)' : 'given',
    prefill_tps: PREFILL_TPS,
    time_scale: SCALE,
    arrival_stretch: Number(stretch.toFixed(3)),
    offered_prefill_load_no_cache: Number(
      (workload.prompt_tps / stretch / (WORKERS * PREFILL_TPS)).toFixed(3),
    ),
    expected_replay_s: Number(expectedS.toFixed(1)),
    latency_unit: 'wall-clock ms (x time_scale = model ms)',
    gateway_admission: 'maxConcurrency 100000, maxQueue 1000000, adaptive off; reuse off',
    cpus: os.cpus().length,
    loadavg_start: os.loadavg().map((x) => Number(x.toFixed(2))),
    log_dir: logDir,
  };
  log(`setup ${JSON.stringify(setup)}`);
  log(`workload ${JSON.stringify(workload)}`);
  const texts = values['overhead-only'] ? [] : records.map(buildPromptText);

  const simFlags = ['--max-total-tokens', String(POOL), '--sim-time-scale', String(SCALE)];
  const sims: Sim[] = [];
  const replayed = values['overhead-only'] ? [] : routersWanted;
  if (replayed.length > 0) {
    for (let i = 0; i < WORKERS; i++) sims.push(await startSim(`w${i}`, simFlags));
    log(`fleet: ${sims.map((s) => `${s.id}=${s.url}`).join(' ')}`);
  }

  const routers: Record<string, RouterEntry> = {};
  for (const name of replayed)
    routers[name] = await runRouter(name, sims, records, texts, stretch, workload.bound, timeoutMs);
  for (const s of sims) await stopProcess(s.proc);

  const overhead = values['no-overhead'] ? undefined : await runOverheadSafely(routers);
  const o = overhead?.stats;
  const goals = judgeGoals(routers, o, OVERHEAD_RATE);
  const report = {
    routers,
    ...summarizeOverhead(overhead),
    goals,
    bound: workload.bound,
    time_scale: SCALE,
    workload,
    pool_curve: choice?.curve ?? null,
    setup: { ...setup, loadavg_end: os.loadavg().map((x) => Number(x.toFixed(2))) },
  };
  const header = [
    `routing benchmark: ${records.length} requests of ${setup.trace}, ${WORKERS} simulators x ${POOL} KV tokens`,
    `time scale ${SCALE} (latencies in wall ms; x${SCALE} = model ms), arrivals x${setup.arrival_stretch} (no-cache prefill load ${setup.offered_prefill_load_no_cache})`,
    `bound (infinite cache) ${workload.bound}; median reuse distance ${workload.reuse_distance_p50_tokens} tokens; reuses within one pool ${workload.reuse_within_one_pool}, within fleet pool ${workload.reuse_within_fleet_pool}`,
    `load average start ${setup.loadavg_start.join(' ')}, end ${report.setup.loadavg_end.join(' ')} on ${setup.cpus} CPUs`,
  ];
  console.error(renderTable(routers, o, goals, header));
  console.log(JSON.stringify(report));
}

try {
  await main();
} finally {
  await stopAll();
}
// Leftover keep-alive sockets must not hold the process open.
process.exit(process.exitCode ?? 0);
