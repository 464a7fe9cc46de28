// What one request costs the endpoint picker's process, deterministically: no
// Envoy, no wall-clock latency. This client speaks Envoy's side of ext_proc
// (request headers, the body, the answer's headers, the stream's end: what
// Envoy 1.40 sends with the reference bootstrap) to the picker of a gateway on
// a simulator publishing KV events, then to the Node floor (ext-proc-floor.ts:
// the same gRPC stack deciding nothing), `--requests` each after `--warmup`,
// `--concurrency` streams at a time; each picked body is sent on to the
// simulator as Envoy would send it, and the simulator's answer headers back
// to the server (its KV events reach the picker as behind Envoy). Each server process measures itself
// (alloc-probe.ts, loaded with --import, a window opened and closed by
// SIGUSR2): per request, CPU microseconds, bytes allocated on V8's heap, and
// scavenges / mark-compacts per 10k requests; then the picker minus the floor
// and their ratio. The last line is JSON.
//
//   node test/bench/bench-picker-alloc.ts [--requests 20000] [--warmup 3000]
//        [--concurrency 8] [--system-words 300] [--user-words 120] [--stream]
//        [--targets picker,floor] [--rounds 1] [--baseline DIR]
//
// --baseline DIR adds `picker@baseline`, the picker of another checkout (e.g. `git archive` of
// main, node_modules linked), measured the same way on the same simulator: a change's before
// and after. --rounds R measures the targets in turn R times and reports each figure's median.
//
// The chat is a shared system prompt (its blocks in the KV index: the gateway serves a few
// requests through its own proxy first, so the simulator publishes them) and a user turn
// unique to each request. CACHEROUTE_BENCH_PICKER_NODE_ARGS adds node flags to the picker's
// process (e.g. `--cpu-prof --cpu-prof-dir=DIR`, `--heap-prof --heap-prof-dir=DIR`).

import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { credentials, makeClientConstructor, type ClientDuplexStream } from '@grpc/grpc-js';
import { extProcService } from '../../gateway/src/epp/protos.ts';
import { spellWord } from '../sim/tokenizer.ts';
import {
  MODEL,
  pickerNodeArgs,
  startExtProcFloor,
  startPickerGateway,
  startSim,
  type Sim,
} from './bench-fleet.ts';
import { ZERO_LATENCY_SIM_ARGS } from './bench-overhead.ts';
import { installCleanup, stopProcess, type Proc } from './bench-procs.ts';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '20000' },
    warmup: { type: 'string', default: '3000' },
    concurrency: { type: 'string', default: '8' },
    'system-words': { type: 'string', default: '300' },
    'user-words': { type: 'string', default: '120' },
    stream: { type: 'boolean', default: false },
    targets: { type: 'string', default: 'picker,floor' },
    rounds: { type: 'string', default: '1' },
    baseline: { type: 'string' },
  },
});
const REQUESTS = Number(values.requests);
const WARMUP = Number(values.warmup);
const CONCURRENCY = Number(values.concurrency);
const ROUNDS = Number(values.rounds);
const BASELINE = values.baseline;
const SYSTEM_WORDS = Number(values['system-words']);
const USER_WORDS = Number(values['user-words']);
for (const [name, v] of Object.entries({ REQUESTS, WARMUP, CONCURRENCY, SYSTEM_WORDS, USER_WORDS, ROUNDS }))
  if (!Number.isInteger(v) || v < 0) throw new Error(`bench-picker-alloc: ${name} must be an integer >= 0`);
const TARGETS = values.targets.split(',').filter((t) => t !== '');
for (const t of TARGETS)
  if (t !== 'picker' && t !== 'floor') throw new Error(`bench-picker-alloc: --targets: unknown '${t}'`);

const PAGE_SIZE = 16;
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const logDir = mkdtempSync(path.join(os.tmpdir(), 'cacheroute-bench-picker-alloc-'));
const log = (msg: string): void => void process.stderr.write(`${new Date().toISOString()} ${msg}\n`);
const ctx = { repo, logDir, log };
const PROBE = ['--import', path.join(repo, 'test/bench/alloc-probe.ts')];

// A token a word in the simulator's tokenizer (test/sim/tokenizer.ts), as bench-picker-prompts.
const words = (from: number, n: number): string =>
  Array.from({ length: n }, (_, i) => spellWord(100 + ((from + i) % 9_900))).join(' ');
const SYSTEM = words(0, SYSTEM_WORDS);

function chatBody(i: number): Buffer {
  return Buffer.from(
    JSON.stringify({
      model: MODEL,
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: `${i} ${words(SYSTEM_WORDS + ((i * 7919) % 9_000), USER_WORDS)}` },
      ],
      max_tokens: 1,
      ...(values.stream ? { stream: true } : {}),
    }),
  );
}

const header = (key: string, value: string): object => ({ key, raw_value: Buffer.from(value) });

/** Request headers as Envoy 1.40 sends them (raw_value; pseudo-headers first). */
function requestHeaders(i: number, length: number): object {
  return {
    request_headers: {
      headers: {
        headers: [
          header(':authority', '127.0.0.1:10000'),
          header(':path', '/v1/chat/completions'),
          header(':method', 'POST'),
          header(':scheme', 'http'),
          header('content-type', 'application/json'),
          header('content-length', String(length)),
          header('user-agent', 'bench-picker-alloc'),
          header('x-forwarded-proto', 'http'),
          header('x-request-id', `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`),
        ],
      },
      end_of_stream: false,
    },
  };
}

/** The answer's headers as Envoy passes them on: the runtime's status and content type. */
function responseHeaders(status: number, contentType: string): object {
  return {
    response_headers: {
      headers: {
        headers: [
          header(':status', String(status)),
          header('content-type', contentType),
          header('date', 'Sat, 05 Dec 2026 17:00:00 GMT'),
          header('server', 'envoy'),
          header('x-envoy-upstream-service-time', '1'),
        ],
      },
      end_of_stream: false,
    },
  };
}

interface PickAnswer {
  request_headers?: {
    response?: { header_mutation?: { set_headers?: { header?: { key?: string; raw_value?: Buffer } }[] } };
  };
  request_body?: {
    response?: { body_mutation?: { streamed_response?: { body?: Buffer; end_of_stream?: boolean } } };
  };
}

/**
 * The body the picker sent back, to the endpoint it named, as Envoy forwards it: the runtime
 * answers, and its KV events reach the picker as they would (its index and output attribution
 * then hold what they hold behind Envoy, not every request waiting for a store that never comes).
 */
async function forward(address: string, body: Buffer): Promise<{ status: number; contentType: string }> {
  const res = await fetch(`http://${address}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  await res.arrayBuffer();
  return { status: res.status, contentType: res.headers.get('content-type') ?? '' };
}

interface ExtProcClient {
  Process(): ClientDuplexStream<object, Record<string, unknown>>;
  close(): void;
}

/** One request through the ext_proc stream, as Envoy drives it; rejects on anything but a pick. */
function exchange(client: ExtProcClient, i: number): Promise<void> {
  const body = chatBody(i);
  return new Promise((resolve, reject) => {
    const call = client.Process();
    let address: string | undefined;
    const sent: Buffer[] = [];
    call.on('data', (m: Record<string, unknown> & PickAnswer) => {
      if (m['immediate_response'] !== undefined) {
        reject(new Error(`an immediate response, not a pick: ${JSON.stringify(m['immediate_response'])}`));
        call.cancel();
        return;
      }
      for (const h of m.request_headers?.response?.header_mutation?.set_headers ?? [])
        if (h.header?.key === 'x-gateway-destination-endpoint') address = h.header.raw_value?.toString();
      const streamed = m.request_body?.response?.body_mutation?.streamed_response;
      if (streamed?.body) sent.push(streamed.body);
      if (streamed?.end_of_stream === true) {
        if (address === undefined) {
          reject(new Error('the pick named no endpoint'));
          call.cancel();
          return;
        }
        forward(address, Buffer.concat(sent)).then(
          (r) => call.write(responseHeaders(r.status, r.contentType)),
          (err: unknown) => {
            reject(err instanceof Error ? err : new Error(String(err)));
            call.cancel();
          },
        );
      } else if (m['response_headers'] !== undefined) call.end();
    });
    call.on('error', reject);
    call.on('status', (s: { code: number; details: string }) =>
      s.code === 0 ? resolve() : reject(new Error(`status ${s.code}: ${s.details}`)),
    );
    call.write(requestHeaders(i, body.length));
    call.write({ request_body: { body, end_of_stream: true } });
  });
}

async function drive(client: ExtProcClient, from: number, n: number): Promise<void> {
  let next = from;
  const end = from + n;
  const worker = async (): Promise<void> => {
    while (next < end) await exchange(client, next++);
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

/** The probe's next line of `msg` from the process's stdout, after sending it SIGUSR2. */
function probe(proc: Proc, msg: string): Promise<Record<string, unknown>> {
  const stdout = proc.child.stdout;
  if (!stdout) throw new Error(`${proc.name}: no stdout`);
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: stdout });
    const timer = setTimeout(() => {
      lines.close();
      reject(new Error(`${proc.name}: no '${msg}' line from alloc-probe (is it loaded?)`));
    }, 10_000);
    lines.on('line', (line) => {
      if (!line.includes('"alloc-probe')) return;
      const parsed = JSON.parse(line) as Record<string, unknown>;
      if (parsed['msg'] !== msg) return;
      clearTimeout(timer);
      lines.close();
      resolve(parsed);
    });
    proc.child.kill('SIGUSR2');
  });
}

interface Cost {
  readonly requests: number;
  readonly cpu_us_per_req: number;
  readonly heap_bytes_per_req: number;
  /** Bytes a request left for the old generation (scavenges promoted them): longer-lived state. */
  readonly promoted_bytes_per_req: number;
  readonly scavenges_per_10k: number;
  readonly mark_compacts_per_10k: number;
  readonly gc_us_per_req: number;
}

async function measure(proc: Proc, port: number, seed: number): Promise<Cost> {
  const Client = makeClientConstructor(extProcService(), 'ExternalProcessor');
  const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure()) as unknown as ExtProcClient;
  try {
    await drive(client, seed, WARMUP);
    await probe(proc, 'alloc-probe-open');
    await drive(client, seed + WARMUP, REQUESTS);
    const r = await probe(proc, 'alloc-probe');
    const gcs = r['gcs'] as Record<string, number>;
    const per = (v: unknown): number => Number((Number(v) / REQUESTS).toFixed(1));
    const per10k = (v: number): number => Number(((v * 10_000) / REQUESTS).toFixed(1));
    return {
      requests: REQUESTS,
      cpu_us_per_req: per(Number(r['cpuUserUs']) + Number(r['cpuSystemUs'])),
      heap_bytes_per_req: Math.round(Number(r['heapAllocatedBytes']) / REQUESTS),
      promoted_bytes_per_req: Math.round(Number(r['scavengePromotedBytes']) / REQUESTS),
      scavenges_per_10k: per10k(gcs['Scavenge'] ?? 0),
      mark_compacts_per_10k: per10k((gcs['MarkSweepCompact'] ?? 0) + (gcs['MarkCompact'] ?? 0)),
      gc_us_per_req: per(r['gcCost']),
    };
  } finally {
    client.close();
  }
}

/** Each metric's median over the rounds (the CPU figures move with the machine's other work). */
function median(costs: readonly Cost[]): Cost {
  const mid = (k: keyof Cost): number => {
    const v = costs.map((c) => c[k]).sort((a, b) => a - b);
    return v[Math.floor((v.length - 1) / 2)] ?? 0;
  };
  return {
    requests: mid('requests'),
    cpu_us_per_req: mid('cpu_us_per_req'),
    heap_bytes_per_req: mid('heap_bytes_per_req'),
    promoted_bytes_per_req: mid('promoted_bytes_per_req'),
    scavenges_per_10k: mid('scavenges_per_10k'),
    mark_compacts_per_10k: mid('mark_compacts_per_10k'),
    gc_us_per_req: mid('gc_us_per_req'),
  };
}

/** A picker (this checkout's, or --baseline's), its KV index warm, measured, stopped. */
async function measurePicker(name: string, repo: string, sim: Sim, seed: number): Promise<Cost> {
  const picker = await startPickerGateway({ ...ctx, repo }, [sim], name.replace('@', '-'), [
    ...pickerNodeArgs(),
    ...PROBE,
  ]);
  try {
    // The system prompt's blocks into the KV index, as a conversation's earlier turns put them.
    for (let i = 0; i < 8; i++) {
      const res = await fetch(`${picker.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: chatBody(1_000_000 + i),
      });
      if (!res.ok) throw new Error(`warming the KV index: ${res.status} ${await res.text()}`);
    }
    await new Promise((r) => setTimeout(r, 500));
    log(`${name}: ${WARMUP} + ${REQUESTS} requests`);
    return await measure(picker.proc, picker.pickerPort, seed);
  } finally {
    await stopProcess(picker.proc);
  }
}

async function measureFloor(sim: Sim, seed: number): Promise<Cost> {
  const floor = await startExtProcFloor(ctx, new URL(sim.url).host, PROBE);
  try {
    log(`floor: ${WARMUP} + ${REQUESTS} requests`);
    return await measure(floor.proc, floor.pickerPort, seed);
  } finally {
    await stopProcess(floor.proc);
  }
}

installCleanup();
const sim = await startSim(
  ctx,
  'sim',
  [...ZERO_LATENCY_SIM_ARGS, '--page-size', String(PAGE_SIZE)],
  PAGE_SIZE,
);
const names = [
  ...(TARGETS.includes('picker') ? ['picker'] : []),
  ...(BASELINE !== undefined ? ['picker@baseline'] : []),
  ...(TARGETS.includes('floor') ? ['floor'] : []),
];
const rounds: Record<string, Cost[]> = Object.fromEntries(names.map((n) => [n, []]));
try {
  for (let round = 0; round < ROUNDS; round++)
    for (const name of names) {
      // Each round's prompts are new ones: the index holds the same share of them for every target.
      const seed = round * (WARMUP + REQUESTS);
      const cost =
        name === 'floor'
          ? await measureFloor(sim, seed)
          : await measurePicker(name, name === 'picker' ? repo : (BASELINE ?? repo), sim, seed);
      rounds[name]?.push(cost);
    }
} finally {
  await stopProcess(sim.proc);
}
const out: Record<string, Cost> = Object.fromEntries(
  Object.entries(rounds).map(([n, costs]) => [n, median(costs)]),
);
const COMPARED: readonly (keyof Cost)[] = [
  'cpu_us_per_req',
  'heap_bytes_per_req',
  'promoted_bytes_per_req',
  'gc_us_per_req',
  'scavenges_per_10k',
];
const compare = (
  a: Cost | undefined,
  b: Cost | undefined,
  op: (x: number, y: number) => number,
): Record<string, number> | undefined =>
  a && b ? Object.fromEntries(COMPARED.map((k) => [k, Number(op(a[k], b[k]).toFixed(2))])) : undefined;
const minus = (x: number, y: number): number => x - y;
const over = (x: number, y: number): number => x / (y || 1);
const result = {
  ...out,
  picker_minus_floor: compare(out['picker'], out['floor'], minus),
  picker_over_floor: compare(out['picker'], out['floor'], over),
  baseline_minus_floor: compare(out['picker@baseline'], out['floor'], minus),
  picker_over_baseline: compare(out['picker'], out['picker@baseline'], over),
  rounds: ROUNDS,
  concurrency: CONCURRENCY,
  warmup: WARMUP,
  body_bytes: chatBody(0).length,
  stream: values.stream,
  logs: logDir,
};
console.log(JSON.stringify(result));
