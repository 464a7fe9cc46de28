// `make bench ARGS='--profile hicache-l3'` (issue 33, Benchmark): a HiCache fleet whose replicas
// share an L3 tier (the `file` backend, one directory, ADR 0029) and a gateway that models it
// (ADR 0034: l3Roles on the route, storageWeight), against the same fleet without L3 and against
// tier-blind routing (host and L3 counted as device: hostWeight = storageWeight = 1), on two
// workloads:
// - the conversation slice (/work/shared/data, --trace, first --n-conversation requests);
// - a long-shared-document workload, generated here (Mooncake JSONL with hash_ids, written to
//   the log directory): --docs documents of --doc-blocks 512-token blocks, each request one
//   document (uniform, seeded) and a question block of its own.
// Each row runs on a fresh fleet (and a fresh L3 directory), so no row inherits another's
// cache. Reported per row: hit rate by tier (the simulators' cached_tokens_total by
// cache_source over prompt_tokens_total), TTFT p50/p99 (wall ms, x time_scale = model ms), and
// bounds: the pooled bound (one LRU of the fleet's device + host tokens) and the same with L3
// counted (the tier is unbounded: every block computed once is held). Goals (shared-document
// workload): TTFT p50 with L3 <= 0.8 x without; hit rate (all tiers) >= 0.98 x the bound with L3.
// Sizes: --n / 4 conversation requests (BENCH_L3_N_CONVERSATION), BENCH_L3_DOCS documents (64),
// BENCH_L3_DOC_REQUESTS requests (384); BENCH_L3_WORKLOADS=shared-document runs one workload.
// Simulators: the routing bench's (8B on one H100: prefill 8,000 tok/s), L3 loads at their
// default --sim-l3-load-tps (test/sim/config.ts, from docs/l3-timing.md). Last line: JSON.

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  startRouter,
  startSim,
  stopRouter,
  waitKvIndexUsable,
  type FleetContext,
  type Sim,
  MODEL,
} from './bench-fleet.ts';
import { createSeededRandom } from '#kube/seeded-random.ts';
import { fetchOk, installCleanup, stopAll, stopProcess } from './bench-procs.ts';
import { computeStretch } from './bench-workload.ts';
import { computePooledBound } from './pooled-bound.ts';
import { postStream } from './replay-client.ts';
import { buildStreamRecord, percentile, type RequestRecord } from './replay-stats.ts';
import { BLOCK_TOKENS, buildPromptText, parseTrace, type TraceRecord } from './replay-trace.ts';

const PREFILL_TPS = 8000;
const HICACHE_RATIO = 2;

export interface SharedDocOptions {
  readonly docs: number;
  readonly docBlocks: number;
  readonly requests: number;
  /** Mean gap between requests, ms (exponential gaps). */
  readonly meanGapMs: number;
  readonly outputTokens: number;
  readonly seed: number;
}

/**
 * The long-shared-document workload as Mooncake records: document d is blocks
 * [d * docBlocks, (d + 1) * docBlocks); each request appends one question block no other
 * request has (ids from docs * docBlocks on) and asks for `outputTokens`.
 */
export function generateSharedDocTrace(o: SharedDocOptions): TraceRecord[] {
  const rand = createSeededRandom(o.seed); // the workload is the same on every machine
  const out: TraceRecord[] = [];
  let t = 0;
  for (let i = 0; i < o.requests; i++) {
    const doc = Math.floor(rand() * o.docs);
    const blocks = Array.from({ length: o.docBlocks }, (_, b) => doc * o.docBlocks + b);
    blocks.push(o.docs * o.docBlocks + i);
    // The question: part of a block, so the prompt ends mid-page like a real one.
    const input = o.docBlocks * BLOCK_TOKENS + 200 + Math.floor(rand() * 200);
    out.push({
      timestamp: Math.round(t),
      input_length: input,
      output_length: o.outputTokens,
      hash_ids: blocks,
    });
    t += -Math.log(1 - rand()) * o.meanGapMs;
  }
  return out;
}

interface TierCounters {
  prompt: number;
  device: number;
  host: number;
  storage: number;
}

async function readTierCounters(url: string): Promise<TierCounters> {
  const text = await (await fetchOk(`${url}/metrics`, {}, 10_000)).text();
  const sum = (re: RegExp): number => [...text.matchAll(re)].reduce((s, m) => s + Number(m[1]), 0);
  const bySource = (src: string): number =>
    sum(new RegExp(`^sglang:cached_tokens_total\\{[^}]*cache_source="${src}"[^}]*\\} (\\S+)$`, 'gm'));
  return {
    prompt: sum(/^sglang:prompt_tokens_total(?:\{[^}]*\})? (\S+)$/gm),
    device: bySource('device'),
    host: bySource('host'),
    storage: bySource('storage'),
  };
}

interface Row {
  readonly workload: string;
  readonly fleet: 'l3' | 'no-l3';
  readonly router: string;
}

const ROWS = (workload: string): Row[] => [
  { workload, fleet: 'l3', router: 'cache-aware' },
  { workload, fleet: 'no-l3', router: 'cache-aware' },
  { workload, fleet: 'l3', router: 'cache-aware-tier-blind' },
];
const rowName = (r: Row): string => `${r.router}${r.fleet === 'l3' ? '+l3' : ''}`;

interface Workload {
  readonly name: string;
  readonly records: readonly TraceRecord[];
  readonly pool: number;
}

type Values = Readonly<Record<string, string | boolean | undefined>>;

/** Runs the profile; returns the process's exit code. */
export async function runHicacheL3Bench(repo: string, values: Values): Promise<number> {
  installCleanup();
  const num = (k: string, d: number): number => (typeof values[k] === 'string' ? Number(values[k]) : d);
  const scale = num('scale', 8);
  const load = num('load', 0.8);
  const workers = num('workers', 4);
  const pageSize = num('page-size', 16);
  const nConversation = Number(process.env['BENCH_L3_N_CONVERSATION'] ?? num('n', 2000) / 4);
  const logDir =
    typeof values['log-dir'] === 'string'
      ? values['log-dir']
      : mkdtempSync(path.join(os.tmpdir(), 'cacheroute-bench-l3-'));
  mkdirSync(logDir, { recursive: true });
  const log = (msg: string): void => console.error(`bench hicache-l3: ${msg}`);
  const loadavg: number[] = [os.loadavg()[0] ?? 0];

  const trace = typeof values['trace'] === 'string' ? values['trace'] : '';
  const parsed = parseTrace(readFileSync(trace, 'utf8'), nConversation);
  if (!parsed.ok) throw new Error(parsed.error);
  const docs = generateSharedDocTrace({
    docs: Number(process.env['BENCH_L3_DOCS'] ?? 64),
    docBlocks: 16,
    requests: Number(process.env['BENCH_L3_DOC_REQUESTS'] ?? 384),
    meanGapMs: 400,
    outputTokens: 64,
    seed: 33,
  });
  writeFileSync(
    path.join(logDir, 'shared-doc-trace.jsonl'),
    docs.map((r) => JSON.stringify(r)).join('\n') + '\n',
  );
  // Pools: the conversation slice as the hicache profile runs it (a quarter of a document fleet
  // would not hold one conversation); the documents' so that the fleet's device + host tiers hold
  // about half of them: without L3 placement decides, with L3 every replica can load every one.
  const workloads: Workload[] = [
    { name: 'conversation', records: parsed.value, pool: num('max-total-tokens', 0) || 250_000 },
    { name: 'shared-document', records: docs, pool: 32_768 },
  ];

  const only = process.env['BENCH_L3_WORKLOADS']?.split(',');
  const results: Record<string, Record<string, unknown>> = {};
  for (const w of workloads.filter((x) => !only || only.includes(x.name))) {
    const tiers = 1 + HICACHE_RATIO;
    const pooled = computePooledBound(w.records, w.pool * workers * tiers, pageSize).hitRate;
    const withL3 = computePooledBound(w.records, Number.MAX_SAFE_INTEGER, pageSize).hitRate;
    const promptTps = w.records.reduce((s, r) => s + r.input_length, 0) / spanSeconds(w.records);
    const stretch = computeStretch(promptTps, workers * PREFILL_TPS, load);
    const bounds = { pooled_bound: round(pooled), pooled_bound_with_l3: round(withL3) };
    results[w.name] = { ...bounds, requests: w.records.length, pool_tokens: w.pool, stretch: round(stretch) };
    const texts = w.records.map(buildPromptText);
    for (const row of ROWS(w.name)) {
      const key = `${w.name}/${rowName(row)}`;
      log(`${key}: ${w.records.length} requests, fleet of ${workers} x ${w.pool} device tokens`);
      results[w.name]![rowName(row)] = await runRow({ repo, logDir, log, timeScale: scale }, row, w, texts, {
        workers,
        pageSize,
        scale,
        stretch,
        bounds,
      }).catch((e: unknown) => ({ failed: (e as Error).message.slice(0, 500) }));
      loadavg.push(os.loadavg()[0] ?? 0);
      log(`${key}: ${JSON.stringify(results[w.name]![rowName(row)])}`);
    }
  }
  const goals = judgeL3Goals(results['shared-document'] ?? {});
  const report = {
    profile: 'hicache-l3',
    results,
    goals,
    time_scale: scale,
    latency_unit: 'wall-clock ms (x time_scale = model ms)',
    setup: {
      workers,
      page_size: pageSize,
      hicache_ratio: HICACHE_RATIO,
      prefill_tps: PREFILL_TPS,
      l3: 'file backend, one directory per fleet (fresh per row); the gateway route has l3Roles [standalone]',
      storage_weight: 'the CachePolicy default (cacheAware.storageWeight unset)',
      loadavg_min: Math.min(...loadavg),
      loadavg_max: Math.max(...loadavg),
      cpus: os.cpus().length,
      log_dir: logDir,
    },
  };
  await stopAll();
  console.log(JSON.stringify(report));
  return goals.every((g) => g.met !== false) ? 0 : 1;
}

const round = (x: number): number => Number(x.toFixed(4));
const spanSeconds = (r: readonly TraceRecord[]): number =>
  Math.max(1e-3, ((r.at(-1)?.timestamp ?? 0) - (r[0]?.timestamp ?? 0)) / 1000);

async function runRow(
  ctx: FleetContext,
  row: Row,
  w: Workload,
  texts: readonly string[],
  o: { workers: number; pageSize: number; scale: number; stretch: number; bounds: Record<string, number> },
): Promise<Record<string, unknown>> {
  const l3Dir = row.fleet === 'l3' ? mkdtempSync(path.join(os.tmpdir(), 'cacheroute-bench-l3-dir-')) : null;
  const flags = [
    '--max-total-tokens',
    String(w.pool),
    '--sim-time-scale',
    String(o.scale),
    '--page-size',
    String(o.pageSize),
    '--enable-hierarchical-cache',
    '--hicache-ratio',
    HICACHE_RATIO.toFixed(1),
    '--hicache-write-policy',
    'write_through',
    ...(l3Dir
      ? [
          '--hicache-storage-backend',
          'file',
          // The directory the operator mounts (ADR 0029); here the extra config names it.
          '--hicache-storage-backend-extra-config',
          JSON.stringify({ file_storage_path: l3Dir }),
        ]
      : []),
  ];
  const sims: Sim[] = [];
  const tag = `${w.name}-${rowName(row)}`;
  const rowCtx: FleetContext = l3Dir ? { ...ctx, routeExtra: { l3Roles: ['standalone'] } } : ctx;
  try {
    for (let i = 0; i < o.workers; i++) sims.push(await startSim(rowCtx, `${tag}-w${i}`, flags, o.pageSize));
    const router = await startRouter(rowCtx, row.router, sims, tag);
    try {
      await waitKvIndexUsable(router);
      const before = await Promise.all(sims.map((s) => readTierCounters(s.url)));
      const records = await replay(router.urls[0] ?? '', w.records, texts, o.stretch / o.scale);
      const after = await Promise.all(sims.map((s) => readTierCounters(s.url)));
      const d = (k: keyof TierCounters): number =>
        after.reduce((s, a, i) => s + a[k] - (before[i]?.[k] ?? 0), 0);
      const prompt = Math.max(1, d('prompt'));
      const hit = (d('device') + d('host') + d('storage')) / prompt;
      const ok = records.filter((r) => r.ok);
      const bound = l3Dir ? (o.bounds['pooled_bound_with_l3'] ?? 0) : (o.bounds['pooled_bound'] ?? 0);
      return {
        hit_rate: round(hit),
        hit_by_tier: {
          device: round(d('device') / prompt),
          host: round(d('host') / prompt),
          storage: round(d('storage') / prompt),
        },
        hit_rate_vs_bound: round(hit / Math.max(1e-9, bound)),
        bound_used: l3Dir ? 'pooled_bound_with_l3' : 'pooled_bound',
        ttft_p50_ms: percentile(
          ok.map((r) => r.ttftMs),
          50,
        ),
        ttft_p99_ms: percentile(
          ok.map((r) => r.ttftMs),
          99,
        ),
        requests: records.length,
        errors: records.length - ok.length,
      };
    } finally {
      await stopRouter(router);
    }
  } finally {
    for (const s of sims) await stopProcess(s.proc);
    if (l3Dir) rmSync(l3Dir, { recursive: true, force: true });
  }
}

/** Requests at the trace's gaps x `gapFactor` (wall ms), streamed, one record each. */
async function replay(
  url: string,
  records: readonly TraceRecord[],
  texts: readonly string[],
  gapFactor: number,
): Promise<RequestRecord[]> {
  const target = new URL('/v1/chat/completions', url);
  const t0 = records[0]?.timestamp ?? 0;
  const start = performance.now();
  return Promise.all(
    records.map(
      (rec, i) =>
        new Promise<RequestRecord>((resolve) => {
          setTimeout(
            () => {
              const sentAtMs = performance.now() - start;
              const body = {
                model: MODEL,
                messages: [{ role: 'user', content: texts[i] ?? '' }],
                max_tokens: Math.max(1, rec.output_length),
                ignore_eos: true,
                stream: true,
                stream_options: { include_usage: true },
              };
              void postStream(target, body).then((out) =>
                resolve(buildStreamRecord(i, out, sentAtMs, 'unknown')),
              );
            },
            (rec.timestamp - t0) * gapFactor,
          );
        }),
    ),
  );
}

export interface Goal {
  readonly goal: string;
  readonly met: boolean | null;
  readonly detail: string;
}

/** The two goals, on the shared-document workload's rows. */
export function judgeL3Goals(doc: Readonly<Record<string, unknown>>): Goal[] {
  const row = (k: string): { ttft_p50_ms?: number; hit_rate_vs_bound?: number } | undefined =>
    doc[k] as { ttft_p50_ms?: number; hit_rate_vs_bound?: number } | undefined;
  const l3 = row('cache-aware+l3');
  const plain = row('cache-aware');
  const ttft =
    l3?.ttft_p50_ms !== undefined && plain?.ttft_p50_ms !== undefined
      ? {
          met: l3.ttft_p50_ms <= 0.8 * plain.ttft_p50_ms,
          ratio: l3.ttft_p50_ms / Math.max(1e-9, plain.ttft_p50_ms),
        }
      : undefined;
  const vsBound = l3?.hit_rate_vs_bound;
  return [
    {
      goal: 'shared-document: TTFT p50 with L3 <= 0.8 x the fleet without L3',
      met: ttft ? ttft.met : null,
      detail: ttft ? `ratio ${ttft.ratio.toFixed(3)}` : 'a row did not run',
    },
    {
      goal: 'shared-document: hit rate (all tiers) >= 0.98 x the pooled bound with L3',
      met: vsBound === undefined ? null : vsBound >= 0.98,
      detail: vsBound === undefined ? 'the L3 row did not run' : `${vsBound.toFixed(4)} of the bound`,
    },
  ];
}
