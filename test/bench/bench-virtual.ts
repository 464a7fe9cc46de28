// The benchmark's slice through the gateway's own routing policies and N
// simulator engines in virtual time: no HTTP, no wall clock, immune to host
// CPU contention. For sweeping policy settings quickly (block size,
// thresholds, tree bound, KV pool) before a wall-clock `make bench` run.
//
//   node test/bench/bench-virtual.ts [--trace FILE] [--n 2000] [--policy cache-aware]
//        [--settings '{"cacheAware":{"blockTokens":64}}'] [--load 0.8 | --stretch S]
//        [--workers 4] [--max-total-tokens 413000] [--queued] [--loss]
//
// `--policy sglang-router` runs the emulation of SGLang's router
// (virtual-sglang-router.ts) on the request text instead of a gateway policy.
//
// Mirrors the gateway: route tokens are the pseudo-tokens of "user\n<text>\n"
// (request-shape.ts), load = requests in flight to the endpoint (+ the
// engine's waiting queue with --queued, as the gateway's /metrics scrape
// would add), `first-token` is observed when the engine emits a request's
// first token, `completed` carries the runtime's cached_tokens report.
// Latencies are model ms. Prints one JSON line.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { RoutingSettings } from '#api';
import {
  buildPolicy,
  type Policy,
  type EndpointView,
  type RouteInput,
} from '../../gateway/src/policies/index.ts';
import { PrefillTracker } from '../../gateway/src/endpoints/prefill-tracker.ts';
import { computeTextTokens } from '../../gateway/src/radix/blocks.ts';
import { VirtualClock } from '../sim/clock.ts';
import { buildEngineConfig, parseSimArgs } from '../sim/config.ts';
import { Engine, type RequestResult } from '../sim/engine.ts';
import { applyChatTemplate } from '../sim/generation.ts';
import { encode } from '../sim/tokenizer.ts';
import { computeStretch, computeWorkload } from './bench-workload.ts';
import { buildVirtualRecord, computeSummary, type RequestRecord } from './replay-stats.ts';
import { buildPromptText, parseTrace } from './replay-trace.ts';
import { SglangRouterEmulation } from './virtual-sglang-router.ts';
import { traceArgOrExit } from './default-trace.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const { values } = parseArgs({
  options: {
    trace: { type: 'string' },
    n: { type: 'string', default: '2000' },
    policy: { type: 'string', default: 'cache-aware' },
    settings: { type: 'string', default: '{}' },
    load: { type: 'string', default: '0.8' },
    stretch: { type: 'string' },
    workers: { type: 'string', default: '4' },
    'max-total-tokens': { type: 'string', default: '413000' },
    'prefill-tps': { type: 'string', default: '8000' },
    queued: { type: 'boolean', default: false },
    loss: { type: 'boolean', default: false },
  },
});

const workers = Number(values.workers);
const pool = Number(values['max-total-tokens']);
const prefillTps = Number(values['prefill-tps']);
const TRACE = traceArgOrExit(values.trace, REPO, 'bench-virtual');
const trace = parseTrace(readFileSync(TRACE, 'utf8'), Number(values.n));
if (!trace.ok) throw new Error(trace.error);
const records = trace.value;
const workload = computeWorkload(records, pool, workers);
const stretch =
  values.stretch !== undefined
    ? Number(values.stretch)
    : computeStretch(workload.prompt_tps, workers * prefillTps, Number(values.load));
const emulated = values.policy === 'sglang-router';
const routing = RoutingSettings.parse({
  ...(JSON.parse(values.settings ?? '{}') as object),
  policy: emulated ? 'cache-aware' : values.policy,
});
const texts = new Map<string, string>();
const policy: Policy = emulated
  ? new SglangRouterEmulation((req) => texts.get(req.id) ?? '')
  : buildPolicy(routing);

const simCfg = parseSimArgs(['--model-path', 'sim', '--max-total-tokens', String(pool)]);
if (!simCfg.ok) throw new Error(simCfg.error);
const clock = new VirtualClock();
const engines = Array.from(
  { length: workers },
  () => new Engine({ ...buildEngineConfig(simCfg.value), prefillTps }, clock),
);
const ids = engines.map((_e, i) => `w${i}`);
const inFlight = engines.map(() => 0);
// The gateway's shell keeps this for every policy (gateway.ts #observe).
const prefill = new PrefillTracker();
const view = (i: number): EndpointView => {
  const id = ids[i] ?? '';
  const rate = prefill.tokensPerSecond(id);
  return {
    id,
    inFlight: inFlight[i] ?? 0,
    queued: values.queued ? (engines[i]?.snapshot().numWaitingReqs ?? 0) : 0,
    generation: 'g',
    pendingPrefillTokens: prefill.pendingTokens(id),
    ...(rate !== undefined ? { prefillTokensPerSecond: rate } : {}),
  };
};
policy.syncEndpoints?.(engines.map((_e, i) => view(i)));
setMaintenance();

function setMaintenance(): void {
  clock.setTimer(60_000, () => {
    policy.maintain?.(clock.now());
    if (inFlight.some((x) => x > 0) || clock.pendingTimers > 0) setMaintenance();
  });
}

// --loss: split the hit lost against the infinite-cache bound into `moved`
// (the deepest reusable block was last served by another worker) and
// `evicted` (same worker, or a new conversation), in tokens.
const DEBUG_LOSS = values.loss === true;
const loss = { moved: 0, evicted: 0, bound: 0 };
const seenLen = new Map<string, number>();
const lastAt = new Map<string, string>();
function lossProbe(
  rec: (typeof records)[number],
  worker: string,
): { bound: number; holder: string | undefined } {
  let chain = '';
  let matched = 0;
  let holder: string | undefined;
  let ok = true;
  let remaining = rec.input_length;
  for (const h of rec.hash_ids) {
    if (remaining <= 0) break;
    const len = Math.min(512, remaining);
    chain = chain === '' ? String(h) : `${chain},${h}`;
    if (ok && (seenLen.get(chain) ?? 0) >= len) {
      matched += len;
      holder = lastAt.get(chain);
    } else ok = false;
    if ((seenLen.get(chain) ?? 0) < len) seenLen.set(chain, len);
    lastAt.set(chain, worker);
    remaining -= len;
  }
  return {
    bound: Math.min(matched, Math.max(0, rec.input_length - 1)),
    holder: matched > 512 ? holder : undefined,
  };
}
const out: RequestRecord[] = [];
const t0 = records[0]?.timestamp ?? 0;
const filler = encode(' ba')[0] ?? 0;
records.forEach((rec, i) => {
  clock.setTimer((rec.timestamp - t0) * stretch, () => {
    const text = buildPromptText(rec);
    if (emulated) texts.set(String(i), text);
    const input: RouteInput = {
      id: String(i),
      salt: 'bench-salt',
      tokens: computeTextTokens(`user\n${text}\n`),
      now: clock.now(),
    };
    const views = engines.map((_e, k) => view(k));
    const w = policy.select(views, input) ?? 0;
    const id = ids[w] ?? '';
    const lossInfo = DEBUG_LOSS ? lossProbe(rec, id) : undefined;
    policy.observe?.({ kind: 'routed', endpoint: id, input });
    prefill.sent(input.id, id, input.tokens.length, clock.now());
    inFlight[w] = (inFlight[w] ?? 0) + 1;
    engines[w]?.submit(
      {
        rid: String(i),
        namespace: 'bench-salt',
        promptIds: applyChatTemplate([{ role: 'user', content: text }]),
        outputIds: Array.from({ length: Math.max(1, rec.output_length) }, () => filler),
      },
      {
        onTokens: (generated: number) => {
          if (generated !== 1) return;
          policy.observe?.({ kind: 'first-token', endpoint: id, input });
          prefill.firstByte(input.id, clock.now());
        },
        onFinish: (r: RequestResult) => {
          inFlight[w] = (inFlight[w] ?? 1) - 1;
          prefill.finished(input.id, { promptTokens: r.promptTokens, cachedTokens: r.cachedTokens });
          policy.observe?.({
            kind: 'completed',
            endpoint: id,
            input: { ...input, now: clock.now() },
            report: { promptTokens: r.promptTokens, cachedTokens: r.cachedTokens },
          });
          if (emulated) texts.delete(String(i));
          if (lossInfo) {
            const lost = Math.max(0, lossInfo.bound - r.cachedTokens);
            if (lossInfo.holder !== undefined && lossInfo.holder !== id) loss.moved += lost;
            else loss.evicted += lost;
            loss.bound += lossInfo.bound;
          }
          out.push(buildVirtualRecord(i, id, r));
        },
      },
    );
  });
});
clock.runAll(Infinity);
const s = computeSummary(out, workload.bound, clock.now(), 1);
console.log(
  JSON.stringify({
    policy: values.policy,
    settings: emulated ? 'sglang-router 0.3.2 defaults' : routing,
    stretch: Number(stretch.toFixed(3)),
    hit_rate: s.hit_rate,
    hit_rate_vs_bound: s.hit_rate_vs_bound,
    ttft_p50_ms: s.ttft_p50_ms,
    ttft_p99_ms: s.ttft_p99_ms,
    e2e_p50_ms: s.e2e_p50_ms,
    e2e_p99_ms: s.e2e_p99_ms,
    imbalance: s.imbalance,
    per_worker: s.per_worker,
    ...(DEBUG_LOSS ? { loss } : {}),
  }),
);
