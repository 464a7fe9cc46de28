// A tier of R gateway replicas over N simulator engines in virtual time (issue
// 31, item 4): eight replica processes do not fit two cores on the wall clock,
// here they cost nothing. Prints one JSON line: a row per R, and each R's hit
// rate and TTFT p50 against R=1.
//
//   node test/bench/bench-virtual-replicas.ts [--trace FILE] [--n 2000] [--replicas 1,3,8]
//        [--policy cache-aware] [--settings '{...}'] [--load 0.8] [--workers 4]
//        [--max-total-tokens auto] [--prefill-tps 8000] [--queued]
//
// What a replica is, as the gateway is today:
// - its own policy instance (its own tree, its own predicted backlog) and
//   its own prefill tracker and in-flight counts: each replica knows only the
//   requests it sent;
// - the same cache view: every replica reads the runtimes' KV events into an
//   exact index (gateway/src/kv-index). Here that index is the engine's radix
//   tree itself, read without touching its LRU (RadixTree.peek): an index
//   with no lag, exact, so the gap between rows is the load each replica
//   does not see, not a stale cache view;
// - request i goes to replica i mod R (a Service spreading connections), and
//   routes on the prompt's exact token ids (a gateway with the model's
//   tokenizer).
// --queued adds each engine's waiting queue to every replica's view, as the
// gateway's /metrics scrape or load publisher does for the whole tier.
// Latencies are model ms.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { RoutingSettings } from '#api';
import { buildPolicy, type EndpointView, type Policy } from '../../gateway/src/policies/index.ts';
import { PrefillTracker } from '../../gateway/src/endpoints/prefill-tracker.ts';
import { VirtualClock } from '../sim/clock.ts';
import { buildEngineConfig, parseSimArgs } from '../sim/config.ts';
import { Engine, type RequestResult } from '../sim/engine.ts';
import { applyChatTemplate, buildNamespace } from '../sim/generation.ts';
import { encode } from '../sim/tokenizer.ts';
import { parseReplicaList } from './bench-replicas.ts';
import { choosePool, computeStretch, computeWorkload } from './bench-workload.ts';
import { buildVirtualRecord, computeSummary, type RequestRecord } from './replay-stats.ts';
import { buildPromptText, parseTrace, type TraceRecord } from './replay-trace.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const { values } = parseArgs({
  options: {
    trace: { type: 'string', default: path.join(REPO, '../shared/data/mooncake_conversation_trace.jsonl') },
    n: { type: 'string', default: '2000' },
    replicas: { type: 'string', default: '1,3,8' },
    policy: { type: 'string', default: 'cache-aware' },
    settings: { type: 'string', default: '{}' },
    load: { type: 'string', default: '0.8' },
    workers: { type: 'string', default: '4' },
    'max-total-tokens': { type: 'string', default: 'auto' },
    'prefill-tps': { type: 'string', default: '8000' },
    queued: { type: 'boolean', default: false },
  },
});

const workers = Number(values.workers);
const poolArg = values['max-total-tokens'] ?? 'auto';
const prefillTps = Number(values['prefill-tps']);
const replicaList = parseReplicaList(values.replicas ?? '1');
if (typeof replicaList === 'string') throw new Error(replicaList);
const trace = parseTrace(readFileSync(values.trace ?? '', 'utf8'), Number(values.n));
if (!trace.ok) throw new Error(trace.error);
const records = trace.value;
// As make bench (bench-routing.ts): 'auto' sizes each engine's pool for the slice.
const pool = poolArg === 'auto' ? choosePool(records, workers).pool : Number(poolArg);
const workload = computeWorkload(records, pool, workers);
const stretch = computeStretch(workload.prompt_tps, workers * prefillTps, Number(values.load));
const routing = RoutingSettings.parse({
  ...(JSON.parse(values.settings ?? '{}') as object),
  policy: values.policy,
});
const SALT = 'bench-salt';
const NAMESPACE = buildNamespace(SALT, null);
const parsedSim = parseSimArgs(['--model-path', 'sim', '--max-total-tokens', String(pool)]);
if (!parsedSim.ok) throw new Error(parsedSim.error);
const simConfig = parsedSim.value;
const filler = encode(' ba')[0] ?? 0;
const prompts = records.map((rec) => applyChatTemplate([{ role: 'user', content: buildPromptText(rec) }]));

interface Replica {
  readonly policy: Policy;
  readonly prefill: PrefillTracker;
  /** Requests this replica sent to each engine and not yet finished. */
  readonly inFlight: number[];
}

function replayAt(replicas: number, slice: readonly TraceRecord[]): ReturnType<typeof computeSummary> {
  const clock = new VirtualClock();
  const engines = Array.from(
    { length: workers },
    () => new Engine({ ...buildEngineConfig(simConfig), prefillTps }, clock),
  );
  const ids = engines.map((_e, i) => `w${i}`);
  const tier: Replica[] = Array.from({ length: replicas }, () => ({
    policy: buildPolicy(routing),
    prefill: new PrefillTracker(),
    inFlight: engines.map(() => 0),
  }));
  const view = (r: Replica, k: number, tokens: readonly number[]): EndpointView => {
    const id = ids[k] ?? '';
    const rate = r.prefill.tokensPerSecond(id);
    // SGLang matches at most all but the last prompt token (gateway/src/kv-index/fleet.ts match).
    const held = engines[k]?.tree.peek(NAMESPACE, tokens.slice(0, -1));
    return {
      id,
      inFlight: r.inFlight[k] ?? 0,
      queued: values.queued ? (engines[k]?.snapshot().numWaitingReqs ?? 0) : 0,
      generation: 'g',
      pendingPrefillTokens: r.prefill.pendingTokens(id),
      ...(rate !== undefined ? { prefillTokensPerSecond: rate } : {}),
      cached: { deviceTokens: held?.deviceTokens ?? 0, hostTokens: held?.hostTokens ?? 0, storageTokens: 0 },
    };
  };
  for (const r of tier) r.policy.syncEndpoints?.(engines.map((_e, k) => view(r, k, [])));
  const maintain = (): void => {
    clock.setTimer(60_000, () => {
      for (const r of tier) r.policy.maintain?.(clock.now());
      if (clock.pendingTimers > 0) maintain();
    });
  };
  maintain();
  const out: RequestRecord[] = [];
  const t0 = slice[0]?.timestamp ?? 0;
  slice.forEach((rec, i) => {
    clock.setTimer((rec.timestamp - t0) * stretch, () => {
      const r = tier[i % replicas] as Replica;
      const tokens = prompts[i] ?? [];
      const input = { id: String(i), salt: SALT, tokens, now: clock.now() };
      const w = r.policy.select(
        engines.map((_e, k) => view(r, k, tokens)),
        input,
      );
      const id = ids[w ?? 0] ?? '';
      const k = w ?? 0;
      r.policy.observe?.({ kind: 'routed', endpoint: id, input });
      r.prefill.sent(input.id, id, tokens.length, clock.now());
      r.inFlight[k] = (r.inFlight[k] ?? 0) + 1;
      engines[k]?.submit(
        {
          rid: String(i),
          namespace: NAMESPACE,
          promptIds: tokens,
          outputIds: Array.from({ length: Math.max(1, rec.output_length) }, () => filler),
        },
        {
          onTokens: (generated: number) => {
            if (generated !== 1) return;
            r.policy.observe?.({ kind: 'first-token', endpoint: id, input });
            r.prefill.firstByte(input.id, clock.now());
          },
          onFinish: (res: RequestResult) => {
            r.inFlight[k] = (r.inFlight[k] ?? 1) - 1;
            const report = { promptTokens: res.promptTokens, cachedTokens: res.cachedTokens };
            r.prefill.finished(input.id, report);
            r.policy.observe?.({
              kind: 'completed',
              endpoint: id,
              input: { ...input, now: clock.now() },
              report,
            });
            out.push(buildVirtualRecord(i, id, res));
          },
        },
      );
    });
  });
  clock.runAll(Infinity);
  return computeSummary(out, workload.bound, clock.now(), 1);
}

const rows: Record<string, unknown>[] = [];
let one: ReturnType<typeof computeSummary> | undefined;
for (const replicas of replicaList) {
  const s = replayAt(replicas, records);
  if (replicas === 1) one = s;
  const r4 = (x: number): number => Number(x.toFixed(4));
  rows.push({
    replicas,
    hit_rate: s.hit_rate,
    ttft_p50_ms: s.ttft_p50_ms,
    ttft_p99_ms: s.ttft_p99_ms,
    e2e_p50_ms: s.e2e_p50_ms,
    e2e_p99_ms: s.e2e_p99_ms,
    imbalance: s.imbalance,
    ...(one && replicas > 1
      ? {
          hit_vs_1: one.hit_rate > 0 ? r4(s.hit_rate / one.hit_rate) : 0,
          ttft_p50_vs_1: one.ttft_p50_ms > 0 ? r4(s.ttft_p50_ms / one.ttft_p50_ms) : 0,
        }
      : {}),
  });
  console.error(`bench-virtual-replicas: R=${replicas} ${JSON.stringify(rows.at(-1))}`);
}
console.log(
  JSON.stringify({
    policy: values.policy,
    settings: routing,
    queued: values.queued,
    stretch: Number(stretch.toFixed(3)),
    max_total_tokens: pool,
    bound: workload.bound,
    rows,
  }),
);
