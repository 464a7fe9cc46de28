// What the endpoint picker behind Envoy knows of an answer after its first byte, per
// bootstrap (ADR 0043): `old` (response trailers SKIP: the ext_proc stream ends at the
// response headers), `end` (trailers SEND: to the answer's end, progress estimated), `body`
// (the response body through the picker, its events counted).
// - accuracy: a real-time simulator, the picker in this process (its policy read directly),
//   streamed answers of 16-255 tokens; every 20 ms the policy's decode load on the endpoint is
//   sampled, and after the run compared with the tokens really still to come then (`held`: the
//   same answers counted whole until their end). The first quarter (the pace is learned) is left out.
// - cpu: the picker as its own process (as the bench's overhead phase runs it), one Envoy per
//   bootstrap, interleaved rounds of streamed answers and of 1-token ones; CPU per request.
// - lengths: `max` (default) answers run to their max_tokens (16-255); `stop` answers stop on
//   their own (stop_token_ids the simulator meets ~1 token in 150) under a max_tokens of 512.
// - kv-events: `on` (default) the simulator publishes KV events, the picker follows them and
//   learns real output lengths from them (ADR 0049); `off` the estimate runs on time alone.
// node test/bench/bench-picker-progress.ts [--answers 160] [--requests 300] [--rounds 3]
//   [--lengths max|stop] [--kv-events on|off] [--page-size 16] [--accuracy-only]
// Last line: JSON.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { build } from '../../gateway/src/app.ts';
import type { CacheAwarePolicy } from '../../gateway/src/policies/cache-aware.ts';
import { StaticRoutingTable } from '../../gateway/src/routing/table.ts';
import { startEndpointPicker } from '../../gateway/src/server.ts';
import { OPEN_DIRECTORY } from '../../gateway/src/tenancy/tenant.ts';
import { startEnvoy, type EnvoyRoute, type RunningEnvoy } from '../support/envoy.ts';
import { buildTestEndpoint, buildTestRoute } from '../support/gateway/routes.ts';
import { WORD_BASE, WORD_COUNT } from '../sim/tokenizer.ts';
import { MODEL, startPickerGateway, startSim, type FleetContext } from './bench-fleet.ts';
import { readGroupCpuMs } from './bench-overhead.ts';
import { stopAll } from './bench-procs.ts';
import { percentile } from './replay-stats.ts';
import { buildSimTokenizer } from './sim-tokenizer.ts';

const { values } = parseArgs({
  options: {
    answers: { type: 'string', default: '160' },
    requests: { type: 'string', default: '300' },
    rounds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '16' },
    lengths: { type: 'string', default: 'max' },
    'kv-events': { type: 'string', default: 'on' },
    'page-size': { type: 'string', default: '16' },
    'accuracy-only': { type: 'boolean', default: false },
  },
});
if (!['max', 'stop'].includes(values.lengths)) throw new Error('--lengths: max or stop');
if (!['on', 'off'].includes(values['kv-events'])) throw new Error('--kv-events: on or off');
const KV_EVENTS = values['kv-events'] === 'on';
const PAGE = Number(values['page-size']);
/** Ids the simulator's answers stop at: about one word in 150 (its words are drawn uniformly). */
const STOP_IDS = Array.from({ length: Math.round(WORD_COUNT / 150) }, (_, i) => WORD_BASE + i * 150);

type PickerRoute = Extract<EnvoyRoute, { kind: 'picker' }>;
const BOOTSTRAPS: Readonly<Record<string, Partial<PickerRoute>>> = {
  old: { untilResponseEnd: false },
  end: {},
  body: { responseBody: true },
};
const NAMES = Object.keys(BOOTSTRAPS);
const ctx: FleetContext = {
  repo: path.resolve(import.meta.dirname, '../..'),
  logDir: mkdtempSync(path.join(tmpdir(), 'bench-picker-progress-')),
  log: (m) => process.stderr.write(`${m}\n`),
};

interface Answer {
  readonly start: number;
  /** When each content event arrived. */
  readonly events: number[];
  end: number;
  readonly maxTokens: number;
}

/** Streams one answer, noting when each content event arrives (ms since `t0`). */
async function streamAnswer(url: string, body: object, t0: number): Promise<Answer> {
  const a: Answer = { start: performance.now() - t0, events: [], end: 0, maxTokens: 0 };
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  if (!res.ok || !res.body) throw new Error(`status ${res.status}`);
  const decoder = new TextDecoder();
  let tail = '';
  const reader = res.body.getReader();
  for (let read = await reader.read(); !read.done; read = await reader.read()) {
    tail += decoder.decode(read.value as Uint8Array, { stream: true });
    for (let cut = tail.indexOf('\n\n'); cut >= 0; cut = tail.indexOf('\n\n')) {
      const event = tail.slice(0, cut);
      tail = tail.slice(cut + 2);
      if (event.startsWith('data: {') && event.includes('"content"')) a.events.push(performance.now() - t0);
    }
  }
  a.end = performance.now() - t0;
  return a;
}

async function accuracy(name: string): Promise<Record<string, number>> {
  const sim = await startSim(
    ctx,
    `acc-${name}`,
    [
      '--sim-decode-base-ms',
      '6',
      '--sim-decode-per-req-ms',
      '0.35',
      '--sim-prefill-tps',
      '1e6',
      '--page-size',
      String(PAGE),
    ],
    KV_EVENTS ? PAGE : undefined,
  );
  const events = sim.events
    ? { kv: [sim.events.kv], replay: [sim.events.replay], topic: 'kv', blockSize: sim.events.blockSize }
    : undefined;
  const table = new StaticRoutingTable([
    buildTestRoute(
      [buildTestEndpoint('sim0', sim.url, events ? { events } : {})],
      { policy: 'cache-aware' },
      {},
    ),
  ]);
  // The simulator's own tokenizer: the picker matches and expects the exact prompt (as --tokenizers gives it).
  const app = build({ table, tenants: OPEN_DIRECTORY, tokenizers: new Map([['m', buildSimTokenizer()]]) });
  for (let i = 0; events && i < 500 && !app.gateway.kvIndex.usability('sim0').usable; i++)
    await new Promise((r) => setTimeout(r, 20));
  const epp = await startEndpointPicker(
    app,
    { mode: 'picker', port: 0, healthPort: 0 },
    '127.0.0.1',
    OPEN_DIRECTORY,
    () => true,
  );
  const envoy = await startEnvoy({ kind: 'picker', pickerPort: epp.port, ...BOOTSTRAPS[name] });
  const t0 = performance.now();
  const answers: Answer[] = [];
  const samples: { t: number; decode: number }[] = [];
  const policy = (): CacheAwarePolicy | undefined =>
    app.gateway.policyOf('ns/m') as CacheAwarePolicy | undefined;
  const sampler = setInterval(
    () => samples.push({ t: performance.now() - t0, decode: policy()?.decodeTokens('sim0') ?? 0 }),
    20,
  );
  const total = Number(values.answers);
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < total) {
        const i = next++;
        const stop = values.lengths === 'stop';
        const maxTokens = stop ? 512 : 16 + ((i * 37) % 240);
        // Over a page of prompt (a prompt under one page is not followed: output-attribution.ts).
        const content = `q ${i} ${'x '.repeat(2 * PAGE)}`;
        const body = {
          model: 'm',
          messages: [{ role: 'user', content }],
          max_tokens: maxTokens,
          ...(stop ? { stop_token_ids: STOP_IDS } : {}),
        };
        answers.push({ ...(await streamAnswer(envoy.url, body, t0)), maxTokens });
      }
    }),
  );
  clearInterval(sampler);
  await envoy.close();
  await epp.close();
  await app.close();
  const from = answers.map((a) => a.end).sort((x, y) => x - y)[Math.floor(answers.length / 4)] ?? 0;
  let truthSum = 0;
  let loadSum = 0;
  let err = 0;
  let heldErr = 0;
  let n = 0;
  for (const s of samples) {
    if (s.t < from) continue;
    let truth = 0;
    let held = 0;
    for (const a of answers)
      if (a.start <= s.t && s.t < a.end) {
        truth += a.events.filter((e) => e > s.t).length;
        held += a.maxTokens;
      }
    truthSum += truth;
    loadSum += s.decode;
    err += Math.abs(s.decode - truth);
    heldErr += Math.abs(held - truth);
    n++;
  }
  const r3 = (x: number): number => Math.round(x * 1000) / 1000;
  return {
    samples: n,
    mean_truth: r3(truthSum / n),
    mean_decode_load: r3(loadSum / n),
    error: r3(err / truthSum),
    error_held_whole: r3(heldErr / truthSum),
  };
}

interface Shape {
  readonly label: string;
  readonly tokens: number;
  readonly stream: boolean;
}

/** One round of `requests` answers through `envoy`: their e2e latencies. */
async function cpuRound(envoy: RunningEnvoy, shape: Shape): Promise<number[]> {
  const e2e: number[] = [];
  const total = Number(values.requests);
  let next = 0;
  const send = async (i: number): Promise<void> => {
    const t = performance.now();
    const res = await fetch(`${envoy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: `q ${i} ${'x '.repeat(20)}` }],
        max_tokens: shape.tokens,
        stream: shape.stream,
      }),
    });
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`status ${res.status}`);
    e2e.push(performance.now() - t);
  };
  await Promise.all(
    Array.from({ length: Number(values.concurrency) }, async () => {
      while (next < total) await send(next++);
    }),
  );
  return e2e;
}

interface CpuTotals {
  cpu: number;
  envoyCpu: number;
  n: number;
  e2e: number[];
}

/** Interleaved rounds of `shape` through every bootstrap's Envoy (a first, unmeasured, warms up). */
async function cpuShape(
  envoys: ReadonlyMap<string, RunningEnvoy>,
  pgid: number,
  shape: Shape,
): Promise<Map<string, CpuTotals>> {
  const acc = new Map<string, CpuTotals>();
  for (let round = -1; round < Number(values.rounds); round++)
    for (const [name, envoy] of envoys) {
      const p0 = readGroupCpuMs([pgid]);
      const e0 = readGroupCpuMs([envoy.proc.pid]);
      const e2e = await cpuRound(envoy, shape);
      if (round < 0) continue;
      const a = acc.get(name) ?? { cpu: 0, envoyCpu: 0, n: 0, e2e: [] };
      a.cpu += readGroupCpuMs([pgid]) - p0;
      a.envoyCpu += readGroupCpuMs([envoy.proc.pid]) - e0;
      a.n += e2e.length;
      a.e2e.push(...e2e);
      acc.set(name, a);
    }
  return acc;
}

async function cpu(): Promise<Record<string, Record<string, number>>> {
  const sim = await startSim(ctx, 'cpu-sim', [
    '--sim-decode-base-ms',
    '4',
    '--sim-decode-per-req-ms',
    '0',
    '--sim-prefill-tps',
    '1e9',
  ]);
  const picker = await startPickerGateway(ctx, [sim], 'progress');
  const pgid = picker.proc.child.pid ?? 0;
  const envoys = new Map<string, RunningEnvoy>();
  const out: Record<string, Record<string, number>> = {};
  try {
    for (const name of NAMES)
      envoys.set(
        name,
        await startEnvoy(
          { kind: 'picker', pickerPort: picker.pickerPort, ...BOOTSTRAPS[name] },
          { detached: true },
        ),
      );
    const shapes: Shape[] = [
      { label: 'stream64', tokens: 64, stream: true },
      { label: 'tiny', tokens: 1, stream: false },
    ];
    for (const shape of shapes)
      for (const [name, a] of await cpuShape(envoys, pgid, shape))
        out[`${shape.label}_${name}`] = {
          requests: a.n,
          picker_cpu_ms_per_req: Math.round((a.cpu / a.n) * 1000) / 1000,
          envoy_cpu_ms_per_req: Math.round((a.envoyCpu / a.n) * 1000) / 1000,
          e2e_p50_ms: Math.round(percentile(a.e2e, 50) * 10) / 10,
          e2e_p99_ms: Math.round(percentile(a.e2e, 99) * 10) / 10,
        };
  } finally {
    for (const e of envoys.values()) await e.close();
  }
  return out;
}

try {
  const result: Record<string, unknown> = { accuracy: {}, cpu: {} };
  const acc: Record<string, unknown> = {};
  for (const name of NAMES) {
    acc[name] = await accuracy(name);
    ctx.log(`accuracy ${name}: ${JSON.stringify(acc[name])}`);
  }
  result['accuracy'] = acc;
  if (!values['accuracy-only']) result['cpu'] = await cpu();
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  await stopAll();
}
process.exit(0);
