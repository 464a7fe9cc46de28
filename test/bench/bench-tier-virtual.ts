// The routing benchmark in virtual time, for a tier of gateway replicas
// (`make bench VIRTUAL=1`): SGLang's router and cache-aware at one replica,
// then cache-aware at each R of --replicas sharing load over the exchange
// (row "cache-aware@R") and, for comparison, each replica on its own share
// (row "cache-aware@R/own", the gateway before the exchange). Human table on
// stderr, one JSON line last on stdout. No HTTP and no wall clock
// (virtual-tier.ts): eight replicas fit two cores, and host load cannot move
// the figures; the exchange's delay is a flag (--exchange-ms): a constant, by
// default 20 ms, about the p99 bench-exchange-lag.ts measured on real sockets
// on a loaded 2-core host (p50 0.2 ms), the stress case; or
// `measured:FILE[,FILE]`, drawn per message and receiver from the lag
// distribution that `bench-exchange-lag.ts --replicas R --out FILE` wrote (for
// each R the file measured nearest R; --exchange-seed seeds the draws), each
// link delivering in order (exchange-delay.ts).
//
//   node test/bench/bench-tier-virtual.ts [--trace FILE] [--n 2000] [--load 0.8] [--workers 4] [--spread-bursts]
//        [--replicas 3,8] [--exchange-ms 20|measured:FILE,...] [--exchange-seed 1] [--runtime-load-ms 30]
//        [--settings '{...}'] [--no-own] [--draw-salts a,b,c] [--gateway-queue] [--dump-requests DIR]
//        [--runtime-priority log2|log8|exact|two] [--prefill-max-requests N] [--assign round-robin|random]

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { RoutingSettings } from '#api';
import { createSeededRandom } from '#kube/seeded-random.ts';
import { createDelaySampler, parseExchangeDelay, pickDistribution } from './exchange-delay.ts';
import { choosePool, computeStretch, computeWorkload } from './bench-workload.ts';
import { computePooledBound } from './pooled-bound.ts';
import { parseReplicaList } from './bench-replicas.ts';
import {
  buildTierRow,
  computeTierRatios,
  judgeTierGoals,
  renderTierTable,
  type TierRow,
} from './tier-report.ts';
import { renderDrawSummary, summarizeDraws } from './draw-spread.ts';
import { parseTrace } from './replay-trace.ts';
import { runTier } from './virtual-tier.ts';
import { isUncachedBucketing, UNCACHED_BUCKETINGS } from './uncached-priority.ts';
import { traceArgOrExit } from './default-trace.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const { values } = parseArgs({
  options: {
    trace: { type: 'string' },
    n: { type: 'string', default: '2000' },
    load: { type: 'string', default: '0.8' },
    workers: { type: 'string', default: '4' },
    'max-total-tokens': { type: 'string', default: 'auto' },
    'prefill-tps': { type: 'string', default: '8000' },
    replicas: { type: 'string', default: '3,8' },
    'exchange-ms': { type: 'string', default: '20' },
    'exchange-seed': { type: 'string', default: '1' },
    'runtime-load-ms': { type: 'string', default: '30' },
    settings: { type: 'string', default: '{}' },
    'no-own': { type: 'boolean', default: false },
    /** Spread requests sharing a timestamp over the gap to the next (virtual-tier.ts computeArrivals). */
    'spread-bursts': { type: 'boolean', default: false },
    /** Only these rows (comma-separated keys), for sweeps; goals then judge what ran. */
    rows: { type: 'string' },
    /**
     * Run the rows above one replica once per salt (comma-separated), each a different draw of
     * the same trace (draw-spread.ts), and report each goal's mean and range over the draws.
     */
    'draw-salts': { type: 'string' },
    /**
     * What-if: the cache-aware rows' replicas hold their requests for an endpoint while a
     * request of the tier is in prefill there, and release the shortest first (virtual-tier.ts
     * gatewayQueue, ADR 0056). No gateway does this yet.
     */
    'gateway-queue': { type: 'boolean', default: false },
    /**
     * Write each row's requests (and each draw's) to DIR/ROW[.SALT].jsonl, one line a request
     * (request-dump.ts); read two rows against each other with dump-compare.ts.
     */
    'dump-requests': { type: 'string' },
    /** How requests reach the replicas: round-robin (default) or random (virtual-tier.ts assign). */
    assign: { type: 'string', default: 'round-robin' },
    /**
     * The runtimes run SGLang's priority scheduling and the cache-aware rows' replicas stamp each
     * request's priority from its uncached tokens, by this bucketing: `two` is the product's stamp
     * (a Deployment's spec.serving.priorityScheduling; ADR 0057), log2, log8 and exact what-ifs
     * (uncached-priority.ts; ADR 0056). SGLang's router stamps none: its runtimes stay FCFS.
     */
    'runtime-priority': { type: 'string' },
    /** Every row's runtimes take --prefill-max-requests N (SGLang's cap on a prefill batch's requests). */
    'prefill-max-requests': { type: 'string' },
  },
});

function usage(msg: string): never {
  console.error(`bench-tier-virtual: ${msg}`);
  process.exit(2);
}

const runtimePriority = values['runtime-priority'];
if (runtimePriority !== undefined && !isUncachedBucketing(runtimePriority))
  usage(`--runtime-priority: one of ${UNCACHED_BUCKETINGS.join(', ')}`);
const prefillMaxRequests =
  values['prefill-max-requests'] === undefined ? undefined : Number(values['prefill-max-requests']);
if (prefillMaxRequests !== undefined && !(Number.isInteger(prefillMaxRequests) && prefillMaxRequests >= 1))
  usage('--prefill-max-requests: give a positive integer');
const assign = values.assign;
if (assign !== 'round-robin' && assign !== 'random') usage('--assign: round-robin or random');
const workers = Number(values.workers);
const poolFlag = values['max-total-tokens'] ?? 'auto';
const prefillTps = Number(values['prefill-tps']);
const exchange = parseExchangeDelay(values['exchange-ms'] ?? '20');
if (typeof exchange === 'string') usage(exchange);
const exchangeSeed = Number(values['exchange-seed']);
if (!Number.isInteger(exchangeSeed)) usage('--exchange-seed: give an integer');
/** The exchange's delay for a tier of R: the constant, or draws from the distribution measured nearest R. */
const exchangeFor = (R: number): number | (() => number) =>
  exchange.kind === 'constant'
    ? exchange.ms
    : createDelaySampler(pickDistribution(exchange.dists, R), createSeededRandom(exchangeSeed));
const exchangeLabel =
  exchange.kind === 'constant'
    ? `exchange delay ${exchange.ms} ms`
    : `exchange delay drawn from ${exchange.files.map((f, i) => `${path.basename(f)} (R=${exchange.dists[i]?.replicas ?? '?'})`).join(', ')}, seed ${exchangeSeed}, in order per link`;
const runtimeLoadMs = Number(values['runtime-load-ms']);
if (!(workers >= 1) || !(prefillTps > 0) || !(runtimeLoadMs > 0))
  usage('--workers, --max-total-tokens, --prefill-tps, --runtime-load-ms must be positive');
const replicaList = parseReplicaList(values.replicas ?? '');
if (typeof replicaList === 'string') usage(replicaList);
const TRACE = traceArgOrExit(values.trace, REPO, 'bench-tier-virtual');
const trace = parseTrace(readFileSync(TRACE, 'utf8'), Number(values.n));
if (!trace.ok) usage(trace.error);
const records = trace.value;
// As `make bench`: the KV pool at which placement matters most (bench-workload.ts choosePool).
const pool = poolFlag === 'auto' ? choosePool(records, workers).pool : Number(poolFlag);
if (!(pool > 0)) usage('--max-total-tokens: give a token count or auto');
const workload = computeWorkload(records, pool, workers);
const stretch = computeStretch(workload.prompt_tps, workers * prefillTps, Number(values.load));
const routing = RoutingSettings.parse({
  ...(JSON.parse(values.settings ?? '{}') as object),
  policy: 'cache-aware',
});
const bound = computePooledBound(records, pool * workers).hitRate;

const base = {
  records,
  stretch,
  workers,
  maxTotalTokens: pool,
  prefillTps,
  routing,
  spreadBursts: values['spread-bursts'] === true,
};
const salts = values['draw-salts']?.split(',').map((s) => s.trim()) ?? [];
if (salts.some((s) => s === '') || new Set(salts).size !== salts.length)
  usage('--draw-salts: give distinct, non-empty salts, comma-separated');
const dumpDir = values['dump-requests'];
if (dumpDir !== undefined) mkdirSync(dumpDir, { recursive: true });
const rows: Record<string, TierRow> = {};
const started = Date.now();
const only = values.rows?.split(',').map((k) => k.trim());
const run = (
  into: Record<string, TierRow>,
  key: string,
  router: 'cache-aware' | 'sglang-router',
  replicas: number,
  shared: boolean,
  drawSalt?: string,
): void => {
  if (only && !only.includes(key)) return;
  const t = Date.now();
  const res = runTier({
    ...base,
    router,
    replicas,
    ...(shared ? { exchangeMs: exchangeFor(replicas) } : {}),
    ...(router === 'cache-aware' ? { runtimeLoadMs } : {}),
    ...(router === 'cache-aware' && values['gateway-queue'] === true ? { gatewayQueue: true } : {}),
    ...(router === 'cache-aware' && runtimePriority !== undefined ? { runtimePriority } : {}),
    ...(prefillMaxRequests === undefined ? {} : { prefillMaxRequests }),
    ...(drawSalt === undefined ? {} : { drawSalt }),
    ...(assign === 'random' ? { assign } : {}),
    ...(dumpDir === undefined ? {} : { dumpRequests: true }),
  });
  if (dumpDir !== undefined && res.dump)
    writeFileSync(
      path.join(dumpDir, `${key.replace('/', '-')}${drawSalt === undefined ? '' : `.${drawSalt}`}.jsonl`),
      res.dump.map((l) => JSON.stringify(l)).join('\n') + '\n',
    );
  into[key] = buildTierRow(router, replicas, res.records, res.itl, bound, res.staleness);
  console.error(
    `  ${key}${drawSalt === undefined ? '' : ` (salt ${drawSalt})`}: ${((Date.now() - t) / 1000).toFixed(1)} s`,
  );
};
const runTierRows = (into: Record<string, TierRow>, drawSalt?: string): void => {
  for (const R of replicaList.filter((r) => r > 1)) {
    run(into, `cache-aware@${R}`, 'cache-aware', R, true, drawSalt);
    if (!values['no-own']) run(into, `cache-aware@${R}/own`, 'cache-aware', R, false, drawSalt);
  }
};
run(rows, 'sglang-router', 'sglang-router', 1, false);
run(rows, 'cache-aware', 'cache-aware', 1, true);
runTierRows(rows);
// One replica draws nothing (no peer picks in transit): its rows serve every salt.
const draws = salts.map((salt) => {
  const salted: Record<string, TierRow> = {};
  for (const key of ['sglang-router', 'cache-aware']) if (rows[key]) salted[key] = rows[key];
  runTierRows(salted, salt);
  return { salt, rows: salted, ratios: computeTierRatios(salted) };
});
const drawSummary =
  draws.length > 0 ? summarizeDraws([computeTierRatios(rows), ...draws.map((d) => d.ratios)]) : undefined;
const goals = judgeTierGoals(rows);
const header = [
  `virtual-time tier bench: ${records.length} requests of ${path.basename(TRACE)}, ${workers} simulated engines (prefill ${prefillTps} tok/s, KV pool ${pool}), stretch ${stretch.toFixed(3)} (load ${values.load}), pooled bound ${bound.toFixed(3)}`,
  `${values['gateway-queue'] === true ? 'cache-aware behind a gateway queue (one prefill per endpoint, shortest first), ' : ''}${runtimePriority !== undefined ? `cache-aware's runtimes ordered by a stamped priority (${runtimePriority} of uncached tokens), ` : ''}${prefillMaxRequests !== undefined ? `every runtime --prefill-max-requests ${prefillMaxRequests}, ` : ''}${base.spreadBursts ? 'bursts spread over their gap, ' : ''}${exchangeLabel}, runtime load refreshed every ${runtimeLoadMs} ms; cacheAware ${JSON.stringify(routing.cacheAware)}; ${((Date.now() - started) / 1000).toFixed(0)} s`,
];
console.error(renderTierTable(rows, goals, header));
if (drawSummary) console.error(`\n${renderDrawSummary(['(none)', ...salts], drawSummary)}`);
console.log(
  JSON.stringify({
    setup: {
      trace: path.basename(TRACE),
      n: records.length,
      workers,
      pool,
      prefillTps,
      stretch,
      exchangeMs: exchange.kind === 'constant' ? exchange.ms : values['exchange-ms'],
      exchangeSeed,
      runtimeLoadMs,
      routing,
    },
    pooled_bound: bound,
    rows,
    goals,
    ...(drawSummary
      ? { draws: draws.map(({ salt, rows: r }) => ({ salt, rows: r })), draw_summary: drawSummary }
      : {}),
  }),
);
