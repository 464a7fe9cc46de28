// Failover in the routing benchmark (issue 31, item 3): a tier of gateway
// replicas replays a Mooncake slice twice from a cold fleet, once as is and
// once with one replica SIGKILLed halfway through and started again. Human
// summary on stderr, one JSON line last on stdout.
//
//   node test/bench/bench-failover.ts [--trace FILE] [--n 2000] [--scale 8] [--load 0.8]
//        [--workers 4] [--max-total-tokens auto] [--page-size 16] [--replicas 3]
//        [--window-s 30] [--admit ready|serving] [--log-dir DIR] [--rounds 2]
//
// - The fleet, the slice, the arrival stretch and the time scale are those of
//   `make bench` (bench-routing.ts): the same simulators with KV events, the
//   gateway's cache-aware routing from the runtimes' index, request i to
//   replica i mod R (a Service spreading connections).
// - The kill: when request N/2 is due, replica 1 gets SIGKILL (its process
//   group). Its streams in flight are cut (counted as errors); requests due
//   to it go to the next live replica, as a Service's endpoints drop a dead
//   pod. A new replica starts at once on the same table; it rejoins the
//   rotation when its /readyz says 200 (--admit ready, what a Service does;
//   /readyz waits for the KV index's first catch-up, kv-index/readiness.ts),
//   or as soon as it serves (--admit serving: the behaviour before that gate).
// - Reported: the hit rate over the replay (the simulators' own counters, as
//   make bench) of both runs; the hit rate (the runtimes' usage reports) of
//   the requests sent in --window-s of wall time before the kill and after
//   the restarted replica rejoined, the same windows in the run without the
//   kill, and of the requests the restarted replica itself routed. Windows
//   are wall time: at --scale 8, 30 s is 4 minutes of the trace.
// - Each scenario runs --rounds times (2), interleaved: the detail is the
//   first round's, and every round's hit rates give the spread (half the
//   range), so a gap inside it is not read as a result.
// - The run without the kill goes first; both start from a flushed fleet
//   with every replica's index exact (bench-routing.ts flushForRouter).
// - BENCH_KV_BUFFER_STEPS=200 (bench-fleet.ts) keeps fewer batches for replay,
//   so the restarted replica joins after the buffer rolled over: its index is
//   partial and converges as the caches turn over (kv-index/feed.ts).
// - The replicas share their load over the load exchange, as in production
//   (bench-fleet.ts startRouter); the restarted replica takes the killed one's
//   place in the tier and hears the others before it serves.

import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  countKvIndexUsable,
  flushFleet,
  MODEL,
  readCounters,
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
import { fetchOk, installCleanup, sleep, stopAll, stopProcess, type Proc } from './bench-procs.ts';
import { choosePool, computeStretch, computeWorkload } from './bench-workload.ts';
import {
  computeRoundSpread,
  computeWindowHit,
  judgeFailover,
  type FailoverRound,
  type WindowHit,
} from './failover-windows.ts';
import { postStream } from './replay-client.ts';
import { buildStreamRecord, computeSummary, type RequestRecord } from './replay-stats.ts';
import { BLOCK_TOKENS, buildPromptText, parseTrace, type TraceRecord } from './replay-trace.ts';
import { traceArgOrExit } from './default-trace.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const PREFILL_TPS = 8000;
const KILLED = 1;

const { values } = parseArgs({
  options: {
    trace: { type: 'string' },
    n: { type: 'string', default: '2000' },
    skip: { type: 'string', default: '0' },
    scale: { type: 'string', default: '8' },
    load: { type: 'string', default: '0.8' },
    workers: { type: 'string', default: '4' },
    'max-total-tokens': { type: 'string', default: 'auto' },
    'page-size': { type: 'string', default: '16' },
    replicas: { type: 'string', default: '3' },
    'window-s': { type: 'string', default: '30' },
    admit: { type: 'string', default: 'ready' },
    'log-dir': { type: 'string' },
    /** Each scenario runs this many times, interleaved (no kill, kill, no kill, ...): the spread. */
    rounds: { type: 'string', default: '2' },
  },
});

function usage(msg: string): never {
  console.error(`bench-failover: ${msg}`);
  process.exit(2);
}

const TRACE = traceArgOrExit(values.trace, REPO, 'bench-failover');
const N = Number(values.n);
const SCALE = Number(values.scale);
const WORKERS = Number(values.workers);
const REPLICAS = Number(values.replicas);
const WINDOW_MS = Number(values['window-s']) * 1000;
const PAGE_SIZE = Number(values['page-size']);
const ADMIT = values.admit;
const ROUNDS = Number(values.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) usage('--rounds must be a whole number, 1 or more');
if (!(N > 0) || !(SCALE > 0) || !(WORKERS >= 1) || !(WINDOW_MS > 0))
  usage('--n, --scale, --workers and --window-s must be positive');
if (!Number.isInteger(REPLICAS) || REPLICAS < 2) usage('--replicas must be 2 or more (one is killed)');
if (!Number.isInteger(PAGE_SIZE) || PAGE_SIZE < 1 || BLOCK_TOKENS % PAGE_SIZE !== 0)
  usage('--page-size must divide 512 (the trace block)');
if (ADMIT !== 'ready' && ADMIT !== 'serving') usage('--admit is ready or serving');
const logDir = values['log-dir'] ?? mkdtempSync(path.join(os.tmpdir(), 'cacheroute-failover-'));
mkdirSync(logDir, { recursive: true });
const log = (msg: string): void => console.error(`bench-failover: ${msg}`);
const ctx: FleetContext = { repo: REPO, logDir, log, timeScale: SCALE };

/** One replica slot of the tier: its URL while it takes traffic, null while it is dead or joining. */
interface Slot {
  url: string | null;
  proc: Proc;
}

interface Failover {
  /** Wall ms since the replay's start. */
  readonly killAtMs: number;
  servingAtMs?: number;
  readyAtMs?: number;
  admittedAtMs?: number;
  /** The restarted replica's view of the runtimes' indexes when it rejoined. */
  indexAtAdmit?: string;
  /** The same at the end of the replay (a partial index converges as the runtimes' caches turn over). */
  indexAtEnd?: string;
  restarted?: Router;
}

interface RunOut {
  readonly records: RequestRecord[];
  /** The replica slot each request was sent to. */
  readonly slotOf: number[];
  readonly hit: number;
  readonly durationMs: number;
  readonly failover?: Failover;
  readonly restartedUrl?: string;
}

function diffHit(before: readonly Counters[], after: readonly Counters[]): number {
  let prompt = 0;
  let cached = 0;
  after.forEach((a, i) => {
    prompt += a.prompt - (before[i]?.prompt ?? 0);
    cached += a.cached - (before[i]?.cached ?? 0);
  });
  return prompt > 0 ? Number((cached / prompt).toFixed(4)) : 0;
}

/** A cold fleet and exact indexes in every replica before traffic (as bench-routing.ts). */
async function prepare(router: Router, sims: readonly Sim[]): Promise<void> {
  await waitKvIndexSettled(router);
  for (let attempt = 1; ; attempt++) {
    await flushFleet(sims);
    try {
      await waitKvIndexUsable(router, 10_000);
      return;
    } catch (e) {
      if (attempt >= 5) throw e;
    }
  }
}

/** "4/4 exact", or how many are and why the others are not. */
async function describeIndex(r: Router): Promise<string> {
  const kv = await countKvIndexUsable(r);
  return `${kv.usable}/${kv.total} exact${kv.reasons.length > 0 ? ` (${kv.reasons.join('; ')})` : ''}`;
}

/** SIGKILL `slot`'s process group now, start a new replica, and put it back when admitted. */
async function killAndRestart(
  slot: Slot,
  tier: Router['tier'],
  sims: readonly Sim[],
  f: Failover,
  since: number,
): Promise<void> {
  const pid = slot.proc.child.pid;
  slot.url = null;
  if (pid !== undefined) process.kill(-pid, 'SIGKILL');
  log(`killed replica ${KILLED} (pid ${pid}) at ${(f.killAtMs / 1000).toFixed(1)} s; starting another`);
  // The new replica joins the tier's load exchange in the killed one's place (as a new pod replaces
  // a dead one in the Service's EndpointSlices); it is admitted only once it hears the others.
  const r = await startRouter(ctx, 'cache-aware', sims, 'failover-restarted', 1, {
    ...(tier ? { join: tier } : {}),
    leaving: tier?.members[KILLED] ? [tier.members[KILLED].name] : [],
  });
  f.restarted = r;
  const url = r.urls[0] ?? '';
  f.servingAtMs = performance.now() - since;
  if (ADMIT === 'ready') {
    for (;;) {
      const res = await fetchOk(`${url}/readyz`).catch(() => undefined);
      if (res?.status === 200) break;
      await sleep(100);
    }
    f.readyAtMs = performance.now() - since;
  }
  f.indexAtAdmit = await describeIndex(r);
  f.admittedAtMs = performance.now() - since;
  slot.url = url;
  log(`restarted replica admitted at ${(f.admittedAtMs / 1000).toFixed(1)} s; index ${f.indexAtAdmit}`);
}

async function run(
  sims: readonly Sim[],
  records: readonly TraceRecord[],
  texts: readonly string[],
  stretch: number,
  kill: boolean,
): Promise<RunOut> {
  const router = await startRouter(ctx, 'cache-aware', sims, kill ? 'failover' : 'baseline', REPLICAS);
  const slots: Slot[] = router.urls.map((url, i) => ({ url, proc: router.procs[i] as Proc }));
  let failover: Failover | undefined;
  try {
    await prepare(router, sims);
    const before = await Promise.all(sims.map((s) => readCounters(s.url)));
    log(`${kill ? 'failover' : 'baseline'}: replaying ${records.length} requests over ${REPLICAS} replicas`);
    const t0 = records[0]?.timestamp ?? 0;
    const results: RequestRecord[] = [];
    const slotOf: number[] = [];
    const start = performance.now();
    let restart: Promise<void> = Promise.resolve();
    const half = Math.floor(records.length / 2);
    const all = records.map(
      (rec, i) =>
        new Promise<void>((resolve) => {
          setTimeout(
            () => {
              const sentAtMs = performance.now() - start;
              if (kill && i === half) {
                failover = { killAtMs: sentAtMs };
                restart = killAndRestart(slots[KILLED] as Slot, router.tier, sims, failover, start);
              }
              // Request i to replica i mod R, else the next live one (a Service drops a dead pod).
              let slot = i % slots.length;
              while (slots[slot]?.url === null) slot = (slot + 1) % slots.length;
              slotOf[i] = slot;
              const url = new URL('/v1/chat/completions', slots[slot]?.url ?? '');
              const body = {
                model: MODEL,
                messages: [{ role: 'user', content: texts[i] ?? '' }],
                max_tokens: Math.max(1, rec.output_length),
                ignore_eos: true,
                stream: true,
                stream_options: { include_usage: true },
              };
              void postStream(url, body).then((o) => {
                results[i] = buildStreamRecord(i, o, sentAtMs, 'unknown');
                resolve();
              });
            },
            ((rec.timestamp - t0) * stretch) / SCALE,
          );
        }),
    );
    await Promise.all(all);
    await restart;
    if (failover?.restarted) failover.indexAtEnd = await describeIndex(failover.restarted);
    const durationMs = performance.now() - start;
    const after = await Promise.all(sims.map((s) => readCounters(s.url)));
    return {
      records: results,
      slotOf,
      hit: diffHit(before, after),
      durationMs,
      ...(failover ? { failover } : {}),
      ...(failover?.restarted?.urls[0] ? { restartedUrl: failover.restarted.urls[0] } : {}),
    };
  } finally {
    await stopRouter(router);
    if (failover?.restarted) await stopRouter(failover.restarted);
  }
}

function summarize(out: RunOut): Record<string, unknown> {
  const s = computeSummary(out.records, 0, out.durationMs, SCALE);
  return {
    hit_rate: out.hit,
    hit_rate_client: s.hit_rate,
    ttft_p50_ms: s.ttft_p50_ms,
    ttft_p99_ms: s.ttft_p99_ms,
    requests: s.requests,
    errors: s.errors,
    duration_s: s.duration_s,
  };
}

async function main(): Promise<void> {
  installCleanup();
  const parsed = parseTrace(readFileSync(TRACE, 'utf8'), N, Number(values.skip));
  if (!parsed.ok) usage(parsed.error);
  const records = parsed.value;
  const poolArg = values['max-total-tokens'] ?? 'auto';
  const pool = poolArg === 'auto' ? choosePool(records, WORKERS).pool : Number(poolArg);
  const workload = computeWorkload(records, pool, WORKERS);
  const stretch = computeStretch(workload.prompt_tps, WORKERS * PREFILL_TPS, Number(values.load));
  const texts = records.map(buildPromptText);
  const simFlags = [
    '--max-total-tokens',
    String(pool),
    '--sim-time-scale',
    String(SCALE),
    '--page-size',
    String(PAGE_SIZE),
  ];
  const sims: Sim[] = [];
  for (let i = 0; i < WORKERS; i++) sims.push(await startSim(ctx, `w${i}`, simFlags, PAGE_SIZE));
  log(`fleet of ${WORKERS} x ${pool} KV tokens; arrivals x${stretch.toFixed(3)}, time scale ${SCALE}`);
  try {
    const baseline = await run(sims, records, texts, stretch, false);
    log(`baseline: ${JSON.stringify(summarize(baseline))}`);
    const killed = await run(sims, records, texts, stretch, true);
    log(`failover: ${JSON.stringify(summarize(killed))}`);
    // The detail below is the first round's; later rounds give the spread of the hit rates.
    const rounds: FailoverRound[] = [{ baseline: baseline.hit, failover: killed.hit }];
    for (let k = 1; k < ROUNDS; k++) {
      const b = await run(sims, records, texts, stretch, false);
      const f = await run(sims, records, texts, stretch, true);
      rounds.push({ baseline: b.hit, failover: f.hit });
      log(`round ${k + 1}: no kill ${b.hit.toFixed(4)}, kill ${f.hit.toFixed(4)}`);
    }
    const spread = computeRoundSpread(rounds);
    const f = killed.failover;
    if (!f?.admittedAtMs) throw new Error('the failover run did not restart its replica');
    const windows = (out: RunOut): { before: WindowHit; after: WindowHit } => ({
      before: computeWindowHit(out.records, f.killAtMs - WINDOW_MS, f.killAtMs),
      after: computeWindowHit(out.records, f.admittedAtMs ?? 0, (f.admittedAtMs ?? 0) + WINDOW_MS),
    });
    const wk = windows(killed);
    const wb = windows(baseline);
    const restartedOwn = computeWindowHit(
      killed.records,
      f.admittedAtMs,
      f.admittedAtMs + WINDOW_MS,
      (r) => killed.slotOf[r.index] === KILLED,
    );
    const cut = killed.records.filter((r) => !r.ok).length;
    const goals = judgeFailover(
      { failover: killed.hit, baseline: baseline.hit },
      { failover: wk.after, baseline: wb.after },
    );
    const report = {
      baseline: summarize(baseline),
      failover: {
        ...summarize(killed),
        kill_at_s: Number((f.killAtMs / 1000).toFixed(1)),
        restarted_serving_after_s: Number((((f.servingAtMs ?? 0) - f.killAtMs) / 1000).toFixed(1)),
        restarted_admitted_after_s: Number(((f.admittedAtMs - f.killAtMs) / 1000).toFixed(1)),
        restarted_index_at_admit: f.indexAtAdmit,
        restarted_index_at_end: f.indexAtEnd,
        failed_requests: cut,
      },
      windows: {
        window_s: WINDOW_MS / 1000,
        failover_before_kill: wk.before,
        failover_after_restart: wk.after,
        failover_after_restart_restarted_replica_only: restartedOwn,
        baseline_before_kill: wb.before,
        baseline_after_restart: wb.after,
      },
      hit_rate_gap: Number((killed.hit - baseline.hit).toFixed(4)),
      rounds: rounds.map((r) => ({ ...r, gap: Number((r.failover - r.baseline).toFixed(4)) })),
      spread,
      goals,
      setup: {
        trace: path.relative(REPO, path.resolve(TRACE)),
        n: records.length,
        workers: WORKERS,
        max_total_tokens: pool,
        page_size: PAGE_SIZE,
        replicas: REPLICAS,
        admit: ADMIT,
        kv_buffer_steps: Number(process.env['BENCH_KV_BUFFER_STEPS'] ?? 10_000),
        time_scale: SCALE,
        arrival_stretch: Number(stretch.toFixed(3)),
        loadavg_end: os.loadavg().map((x) => Number(x.toFixed(2))),
        log_dir: logDir,
      },
    };
    const w = (x: WindowHit): string => `${x.hit?.toFixed(3) ?? 'n/a'} (${x.requests} req)`;
    console.error(
      [
        `failover benchmark: ${records.length} requests, ${REPLICAS} replicas over ${WORKERS} simulators, admit=${ADMIT}`,
        `hit over the replay: no kill ${baseline.hit.toFixed(4)}, kill ${killed.hit.toFixed(4)} (gap ${report.hit_rate_gap})`,
        `over ${rounds.length} rounds: no kill ±${spread.baseline}, kill ±${spread.failover}, gap ±${spread.gap} (half the range); gaps ${rounds.map((r) => (r.failover - r.baseline).toFixed(4)).join(', ')}`,
        `${WINDOW_MS / 1000} s before the kill: kill run ${w(wk.before)}, no-kill run ${w(wb.before)}`,
        `${WINDOW_MS / 1000} s after the restart: kill run ${w(wk.after)}, no-kill run ${w(wb.after)}; restarted replica's own ${w(restartedOwn)}`,
        `restarted replica admitted ${report.failover.restarted_admitted_after_s} s after the kill, index ${f.indexAtAdmit} (at the end: ${f.indexAtEnd}); ${cut} requests failed`,
        ...goals.map((g) => `${g.met === null ? '?' : g.met ? 'met' : 'NOT met'}: ${g.goal}: ${g.detail}`),
      ].join('\n'),
    );
    console.log(JSON.stringify(report));
  } finally {
    for (const s of sims) await stopProcess(s.proc);
  }
}

try {
  await main();
} finally {
  await stopAll();
}
process.exit(process.exitCode ?? 0);
