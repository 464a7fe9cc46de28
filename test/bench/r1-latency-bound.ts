// How low the TTFT and e2e tails can go at one gateway replica (pure, printed), timed by the
// simulator's own model (test/sim/engine.ts: a prefill of U uncached tokens takes
// U / prefillTps; a decode step decodeBaseMs + decodePerReqMs x the batch), on the bench's own
// KV pool and arrival stretch (bench-workload.ts), with the best cache a router could give:
//
// - floor: every request served alone on an idle runtime. TTFT = uncached / prefillTps,
//   e2e = TTFT + (output - 1) steps of a batch of one. No routing beats it.
// - least-work FCFS: every runtime prefills FCFS and each request goes to the one that frees
//   first (for FCFS servers the same start times as one central queue), prefill only (no decode
//   step in between, no batching), every runtime holding the whole cache. Not a proof, a
//   reference: a router bound to per-runtime caches and decode steps does no better in practice.
// - shortest-first: one central queue that, whenever a runtime frees, starts the waiting request
//   with the shortest prefill (non-preemptive SJF), the same runtimes and cache. The median a
//   scheduler that may also reorder reaches; what a router in front of FCFS runtimes could at best
//   approach by holding requests back and releasing the shortest first.
//
// Two caches: pooled (one LRU pool of the whole fleet's KV, pooled-bound.ts) and infinite (every
// reuse hits).
//
//   node test/bench/r1-latency-bound.ts [--trace FILE] [--n 2000] [--workers 4] [--prefill-tps 8000] [--load 0.8]

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { choosePool, computeStretch, computeWorkload } from './bench-workload.ts';
import { percentile } from './replay-stats.ts';
import { pooledCachedPerRequest } from './pooled-bound.ts';
import { parseTrace, type TraceRecord } from './replay-trace.ts';
import { traceArgOrExit } from './default-trace.ts';

export interface Timing {
  readonly prefillTps: number;
  readonly decodeBaseMs: number;
  readonly decodePerReqMs: number;
}

/** Each request alone on an idle runtime: its TTFT and e2e, ms. */
export function aloneLatency(
  records: readonly TraceRecord[],
  cached: readonly number[],
  t: Timing,
): { ttftMs: number[]; e2eMs: number[] } {
  const ttftMs = records.map((r, i) => ((r.input_length - (cached[i] ?? 0)) / t.prefillTps) * 1000);
  const e2eMs = records.map(
    (r, i) => (ttftMs[i] ?? 0) + Math.max(0, r.output_length - 1) * (t.decodeBaseMs + t.decodePerReqMs),
  );
  return { ttftMs, e2eMs };
}

/**
 * TTFT, ms, of each request when `workers` runtimes prefill FCFS and each request goes to the one
 * that frees first; `arrivalsMs` ascending, `prefillMs[i]` request i's prefill time.
 */
export function leastWorkTtft(
  arrivalsMs: readonly number[],
  prefillMs: readonly number[],
  workers: number,
): number[] {
  const free = Array.from({ length: workers }, () => 0);
  return arrivalsMs.map((at, i) => {
    const w = free.indexOf(Math.min(...free));
    const done = Math.max(at, free[w] as number) + (prefillMs[i] ?? 0);
    free[w] = done;
    return done - at;
  });
}

/**
 * TTFT, ms, of each request when one central queue feeds `workers` runtimes and each runtime, as
 * it frees, starts the waiting request with the shortest prefill (ties: the earlier arrival);
 * `arrivalsMs` ascending. A request arriving at the instant a runtime frees is waiting then.
 */
export function shortestFirstTtft(
  arrivalsMs: readonly number[],
  prefillMs: readonly number[],
  workers: number,
): number[] {
  const free = Array.from({ length: workers }, () => 0);
  const out = arrivalsMs.map(() => 0);
  const waiting: number[] = [];
  let next = 0;
  for (let done = 0; done < arrivalsMs.length; done++) {
    const w = free.indexOf(Math.min(...free));
    // The runtime starts at once, or when the first request it could start arrives.
    const first = Math.min(
      ...waiting.map((i) => arrivalsMs[i] as number),
      next < arrivalsMs.length ? (arrivalsMs[next] as number) : Infinity,
    );
    const at = Math.max(free[w] as number, first);
    while (next < arrivalsMs.length && (arrivalsMs[next] as number) <= at) waiting.push(next++);
    let k = -1;
    waiting.forEach((i, j) => {
      if ((arrivalsMs[i] as number) > at) return;
      const best = k < 0 ? Infinity : (prefillMs[waiting[k] as number] ?? 0);
      if ((prefillMs[i] ?? 0) < best) k = j;
    });
    const [i] = waiting.splice(k, 1) as [number];
    free[w] = at + (prefillMs[i] ?? 0);
    out[i] = free[w] - (arrivalsMs[i] as number);
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const REPO = fileURLToPath(new URL('../../', import.meta.url));
  const { values } = parseArgs({
    options: {
      trace: { type: 'string' },
      n: { type: 'string', default: '2000' },
      workers: { type: 'string', default: '4' },
      'prefill-tps': { type: 'string', default: '8000' },
      load: { type: 'string', default: '0.8' },
      'decode-base-ms': { type: 'string', default: '6' },
      'decode-per-req-ms': { type: 'string', default: '0.35' },
    },
  });
  const file = traceArgOrExit(values.trace, REPO, 'r1-latency-bound');
  const trace = parseTrace(readFileSync(file, 'utf8'), Number(values.n));
  if (!trace.ok) throw new Error(trace.error);
  const records = trace.value;
  const workers = Number(values.workers);
  const timing: Timing = {
    prefillTps: Number(values['prefill-tps']),
    decodeBaseMs: Number(values['decode-base-ms']),
    decodePerReqMs: Number(values['decode-per-req-ms']),
  };
  // As bench-tier-virtual.ts: the pool where placement matters most, arrivals stretched to the load.
  const pool = choosePool(records, workers).pool;
  const stretch = computeStretch(
    computeWorkload(records, pool, workers).prompt_tps,
    workers * timing.prefillTps,
    Number(values.load),
  );
  const t0 = records[0]?.timestamp ?? 0;
  const arrivals = records.map((r) => (r.timestamp - t0) * stretch);
  for (const [cache, capacity] of [
    ['pooled', pool * workers],
    ['infinite', Infinity],
  ] as const) {
    const alone = aloneLatency(records, pooledCachedPerRequest(records, capacity), timing);
    const fcfs = leastWorkTtft(arrivals, alone.ttftMs, workers);
    const sjf = shortestFirstTtft(arrivals, alone.ttftMs, workers);
    const ms = (xs: number[], p: number): number => Math.round(percentile(xs, p));
    console.log(
      JSON.stringify({
        cache,
        floor: {
          ttft_p50_ms: ms(alone.ttftMs, 50),
          ttft_p99_ms: ms(alone.ttftMs, 99),
          e2e_p50_ms: ms(alone.e2eMs, 50),
          e2e_p99_ms: ms(alone.e2eMs, 99),
        },
        least_work_fcfs: { ttft_p50_ms: ms(fcfs, 50), ttft_p99_ms: ms(fcfs, 99) },
        shortest_first: { ttft_p50_ms: ms(sjf, 50), ttft_p99_ms: ms(sjf, 99) },
      }),
    );
  }
}
