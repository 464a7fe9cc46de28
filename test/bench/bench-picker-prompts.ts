// The case GIE's users report (gateway-api-inference-extension #2928: 220 KB
// prompts at concurrency 150 through a gateway asking an endpoint picker):
// what the picker path adds to TTFT, against Envoy alone on a static route to
// the same simulator, in one run. Closed loop, `concurrency` clients, each a
// streamed chat request with a prompt of `prompt-kb` KB (unique per request:
// no prefix is shared) and a few output tokens. The two targets take turns in
// rounds so the shared machine's drift hits both alike; the figures are each
// target's TTFT p50/p99 and the differences (Envoy + picker minus Envoy alone)
// and ratios, with the load average over the run.
//
//   node test/bench/bench-picker-prompts.ts [--requests 900] [--concurrency 150]
//        [--prompt-kb 220] [--rounds 3] [--max-tokens 4] [--rate R]
//
// --baseline DIR adds a third target, Envoy + the picker of another checkout
// (e.g. `git archive` of main, with node_modules linked), on the same
// simulator in the same rounds: a change's before and after in one run.
//
// --rate R paces the sends at R a second (open loop, `concurrency` at most in
// flight; TTFT counts from the time a request was due, so a backlog shows):
// below the machine's capacity TTFT is each path's latency, not a queue. The
// closed loop (no --rate) is GIE's shape, but on a shared 2-core machine it
// measures whatever saturates first, and the picker's CPU then slows the
// simulator and the client too. Each target also reports the CPU a request
// took in the simulator and in this client (the back end both paths share):
// when those dominate, TTFT differences are queueing, not the path.
//
// The simulator prefills at an unbounded rate (--sim-prefill-tps 1e12): TTFT is
// the paths' own cost (Envoy's buffering, the picker's body round trip and
// tokenizing, the pick), not a model's. It publishes KV events, so the picker
// matches each prompt against the index as in the replay. The last line is JSON.

import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startEnvoy, type RunningEnvoy } from '../support/envoy.ts';
import { MODEL, startPickerGateway, startSim, waitKvIndexUsable, type Sim } from './bench-fleet.ts';
import { readGroupCpuMs, ZERO_LATENCY_SIM_ARGS } from './bench-overhead.ts';
import { installCleanup, stopProcess, type Proc } from './bench-procs.ts';
import { spellWord } from '../sim/tokenizer.ts';
import { postStream } from './replay-client.ts';
import { percentile } from './replay-stats.ts';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '900' },
    concurrency: { type: 'string', default: '150' },
    'prompt-kb': { type: 'string', default: '220' },
    rounds: { type: 'string', default: '3' },
    'max-tokens': { type: 'string', default: '4' },
    rate: { type: 'string', default: '0' },
    baseline: { type: 'string' },
  },
});
const REQUESTS = Number(values.requests);
const CONCURRENCY = Number(values.concurrency);
const PROMPT_BYTES = Number(values['prompt-kb']) * 1024;
const ROUNDS = Number(values.rounds);
const MAX_TOKENS = Number(values['max-tokens']);
const RATE = Number(values.rate);
if (!(RATE >= 0)) throw new Error('bench-picker-prompts: --rate must be >= 0 (0: closed loop)');
for (const [name, v] of Object.entries({ REQUESTS, CONCURRENCY, PROMPT_BYTES, ROUNDS, MAX_TOKENS }))
  if (!Number.isInteger(v) || v <= 0)
    throw new Error(`bench-picker-prompts: ${name} must be a positive integer`);

const PAGE_SIZE = 16;
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const logDir = mkdtempSync(path.join(os.tmpdir(), 'cacheroute-bench-picker-prompts-'));
const log = (msg: string): void => void process.stderr.write(`${new Date().toISOString()} ${msg}\n`);
const ctx = { repo, logDir, log };

/**
 * A prompt of about `bytes` bytes, unique to `id` from its first words on (no shared prefix).
 * Words of the simulator's vocabulary (test/sim/tokenizer.ts), a token each: four letters and a
 * space, so 220 KB is about 45,000 tokens, near what a real tokenizer makes of 220 KB of text
 * (GIE #2928 does not say; ~4 bytes a token), where other text would take a token a byte.
 */
// Spelled once: the client builds every prompt on the machine it measures (~45,000 words each).
const WORDS = Array.from({ length: 9_900 }, (_, i) => spellWord(100 + i));

function buildPrompt(id: string, bytes: number): string {
  const parts = [`Document ${id}:`];
  let size = parts[0]?.length ?? 0;
  let seed = [...id].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7);
  while (size < bytes) {
    seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
    const w = WORDS[seed % 9_900] ?? ''; // four letters
    parts.push(w);
    size += w.length + 1;
  }
  return parts.join(' ');
}

interface Target {
  readonly name: 'envoy-static' | 'envoy-picker' | 'envoy-picker-baseline';
  readonly url: string;
  /** Process groups whose CPU is the path's own: Envoy's, and the picker's. */
  readonly pgids: readonly number[];
}

interface TargetStats {
  readonly ok: number;
  readonly errors: number;
  readonly ttft_p50_ms: number;
  readonly ttft_p99_ms: number;
  readonly ttft_max_ms: number;
  /** Completed requests per second over the target's own rounds. */
  readonly rps: number;
  /** CPU the path's processes spent per answered request (Envoy, + the picker): load-independent. */
  readonly cpu_ms_per_req: number;
  /** CPU the simulator spent per answered request in this target's rounds (the shared back end). */
  readonly sim_cpu_ms_per_req: number;
  /** CPU this client spent per answered request (building prompts, reading streams). */
  readonly client_cpu_ms_per_req: number;
  readonly first_error?: string;
}

/** `count` requests through `target`, `concurrency` at a time; TTFTs of the ones answered 200. */
async function runRound(
  target: Target,
  round: number,
  count: number,
): Promise<{ ttfts: number[]; errors: string[]; elapsedMs: number }> {
  const ttfts: number[] = [];
  const errors: string[] = [];
  let next = 0;
  const url = new URL('/v1/chat/completions', target.url);
  const start = performance.now();
  const client = async (): Promise<void> => {
    while (next < count) {
      const n = next++;
      // Paced: wait for this request's turn; TTFT counts from it, so a late send is the path's backlog.
      const due = RATE > 0 ? start + (n * 1000) / RATE : performance.now();
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const late = Math.max(0, performance.now() - due);
      const out = await postStream(url, {
        model: MODEL,
        messages: [{ role: 'user', content: buildPrompt(`${target.name}-${round}-${n}`, PROMPT_BYTES) }],
        max_tokens: MAX_TOKENS,
        stream: true,
      });
      if (out.status === 200 && !out.error && out.ttftMs >= 0) ttfts.push(late + out.ttftMs);
      else errors.push(`${out.status} ${out.error ?? ''}`.slice(0, 200));
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, count) }, client));
  return { ttfts, errors, elapsedMs: performance.now() - start };
}

interface Spent {
  readonly ms: number;
  readonly cpuMs: number;
  readonly simCpuMs: number;
  readonly clientCpuMs: number;
}

function summarize(ttfts: readonly number[], errors: readonly string[], spent: Spent): TargetStats {
  const perReq = (ms: number): number => Number((ms / Math.max(1, ttfts.length)).toFixed(2));
  const r = (x: number): number => Number(x.toFixed(1));
  return {
    ok: ttfts.length,
    errors: errors.length,
    ttft_p50_ms: r(percentile(ttfts, 50)),
    ttft_p99_ms: r(percentile(ttfts, 99)),
    ttft_max_ms: r(Math.max(...ttfts)),
    rps: Number(((ttfts.length * 1000) / spent.ms).toFixed(1)),
    cpu_ms_per_req: perReq(spent.cpuMs),
    sim_cpu_ms_per_req: perReq(spent.simCpuMs),
    client_cpu_ms_per_req: perReq(spent.clientCpuMs),
    ...(errors[0] !== undefined ? { first_error: errors[0] } : {}),
  };
}

installCleanup();
const procs: Proc[] = [];
const envoys: RunningEnvoy[] = [];
let sim: Sim | undefined;
try {
  sim = await startSim(
    ctx,
    'sim0',
    [
      ...ZERO_LATENCY_SIM_ARGS,
      '--page-size',
      String(PAGE_SIZE),
      // Room for every prompt at once (~45,000 tokens each): never queued in the runtime.
      '--context-length',
      '1000000',
      '--max-total-tokens',
      '1000000000',
      '--max-running-requests',
      '10000',
    ],
    PAGE_SIZE,
  );
  procs.push(sim.proc);
  const picker = await startPickerGateway(ctx, [sim], 'prompts');
  procs.push(picker.proc);
  await waitKvIndexUsable({ name: 'cache-aware', urls: [picker.url], procs: [picker.proc], kvIndexed: true });
  const envoyStatic = await startEnvoy({ kind: 'static', upstream: sim.url }, { detached: true });
  envoys.push(envoyStatic);
  const envoyPicker = await startEnvoy({ kind: 'picker', pickerPort: picker.pickerPort }, { detached: true });
  envoys.push(envoyPicker);
  const pid = (p: Proc): number[] => (p.child.pid ? [p.child.pid] : []);
  const targets: Target[] = [
    { name: 'envoy-static', url: envoyStatic.url, pgids: [envoyStatic.proc.pid] },
    { name: 'envoy-picker', url: envoyPicker.url, pgids: [envoyPicker.proc.pid, ...pid(picker.proc)] },
  ];
  if (values.baseline !== undefined) {
    const base = await startPickerGateway({ ...ctx, repo: path.resolve(values.baseline) }, [sim], 'baseline');
    procs.push(base.proc);
    await waitKvIndexUsable({ name: 'cache-aware', urls: [base.url], procs: [base.proc], kvIndexed: true });
    const envoyBase = await startEnvoy({ kind: 'picker', pickerPort: base.pickerPort }, { detached: true });
    envoys.push(envoyBase);
    targets.push({
      name: 'envoy-picker-baseline',
      url: envoyBase.url,
      pgids: [envoyBase.proc.pid, ...pid(base.proc)],
    });
  }
  // One unmeasured round each: connections, JIT, the first collections of every process.
  for (const t of targets) await runRound(t, -1, Math.min(CONCURRENCY, REQUESTS));
  const per = Math.ceil(REQUESTS / ROUNDS);
  const acc = new Map(
    targets.map((t) => [
      t.name,
      { ttfts: [] as number[], errors: [] as string[], ms: 0, cpuMs: 0, simCpuMs: 0, clientCpuMs: 0 },
    ]),
  );
  const simPgids = pid(sim.proc);
  const clientCpuMs = (): number => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const load: number[] = [os.loadavg()[0] ?? 0];
  const sampler = setInterval(() => load.push(os.loadavg()[0] ?? 0), 5000).unref();
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate which goes first: neither always follows the other's backlog.
    const order = round % 2 === 0 ? targets : [...targets].reverse();
    for (const t of order) {
      const cpuBefore = readGroupCpuMs(t.pgids);
      const simBefore = readGroupCpuMs(simPgids);
      const clientBefore = clientCpuMs();
      const out = await runRound(t, round, per);
      const a = acc.get(t.name);
      if (!a) continue;
      a.cpuMs += readGroupCpuMs(t.pgids) - cpuBefore;
      a.simCpuMs += readGroupCpuMs(simPgids) - simBefore;
      a.clientCpuMs += clientCpuMs() - clientBefore;
      a.ttfts.push(...out.ttfts);
      a.errors.push(...out.errors);
      a.ms += out.elapsedMs;
      log(`${t.name} round ${round}: ${out.ttfts.length} ok, ${out.errors.length} errors`);
    }
  }
  clearInterval(sampler);
  load.push(os.loadavg()[0] ?? 0);
  const stats = Object.fromEntries(
    [...acc].map(([name, a]) => [name, summarize(a.ttfts, a.errors, a)]),
  ) as Partial<Record<Target['name'], TargetStats>>;
  const s = stats['envoy-static'];
  const p = stats['envoy-picker'];
  const b = stats['envoy-picker-baseline'];
  if (!s || !p) throw new Error('bench-picker-prompts: a target has no figures');
  const result = {
    case: 'gateway-api-inference-extension#2928',
    prompt_kb: PROMPT_BYTES / 1024,
    concurrency: CONCURRENCY,
    rate_per_s: RATE > 0 ? RATE : null,
    requests_per_target: per * ROUNDS,
    ...stats,
    picker_adds_ttft_p50_ms: Number((p.ttft_p50_ms - s.ttft_p50_ms).toFixed(1)),
    picker_adds_ttft_p99_ms: Number((p.ttft_p99_ms - s.ttft_p99_ms).toFixed(1)),
    ttft_p99_ratio: Number((p.ttft_p99_ms / s.ttft_p99_ms).toFixed(3)),
    ...(b
      ? {
          baseline_adds_ttft_p50_ms: Number((b.ttft_p50_ms - s.ttft_p50_ms).toFixed(1)),
          baseline_adds_ttft_p99_ms: Number((b.ttft_p99_ms - s.ttft_p99_ms).toFixed(1)),
          picker_cpu_vs_baseline: Number((p.cpu_ms_per_req / b.cpu_ms_per_req).toFixed(3)),
        }
      : {}),
    goal: 'picker adds < 50 ms TTFT p99',
    loadavg_mean: Number((load.reduce((x, y) => x + y, 0) / load.length).toFixed(2)),
    loadavg_max: Number(Math.max(...load).toFixed(2)),
    cpus: os.cpus().length,
    logs: logDir,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  for (const e of envoys) await e.close();
  for (const p of procs.reverse()) await stopProcess(p);
}
