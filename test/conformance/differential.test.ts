// The same requests to the real SGLang 0.5.23 server (on CPU, through `kit serve`)
// and to the simulator launched with the same arguments, compared field by
// field (differential-compare.ts): status codes, content types, key sets, JSON
// types, null against a value, stream chunk kinds, metric names, types, label
// names and values; text, token ids, timings and ids aside. One real server at
// a time, next to an in-process simulator.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordConformance } from '../support/conformance-report.ts';
import { isPidAlive } from '../support/processes.ts';
import { startRealSglang, type RealSglang } from '../support/real-sglang.ts';
import { postJson, startSim, type RunningSim } from '../support/sim/testing.ts';
import { compareObservations } from './differential-compare.ts';
import { runScript, type Observation } from './differential-script.ts';
import type { Mismatch } from './shape-diff.ts';

const MODEL = 'tiny-chat';
const mismatches: Mismatch[] = [];

afterAll(() => {
  recordConformance('differential', { differential_mismatches: mismatches.length });
});

interface Pair {
  readonly real: RealSglang;
  readonly sim: RunningSim;
  readonly dir: string;
}

/** A real server and a simulator on the same arguments; the declared model path is a fresh temp path. */
async function startPair(args: readonly string[]): Promise<Pair> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-differential-'));
  const argv = ['--model-path', join(dir, 'models'), ...args];
  const real = await startRealSglang({ args: argv });
  const sim = await startSim(argv);
  return { real, sim, dir };
}

async function stopPair(p: Pair | undefined): Promise<void> {
  if (!p) return;
  await Promise.all([p.real.stop(), p.sim.close()]);
  rmSync(p.dir, { recursive: true, force: true });
}

/** DIFFERENTIAL_DUMP_DIR=<dir> keeps both sides' answers, to compare offline. */
function dump(name: string, real: Map<string, Observation>, sim: Map<string, Observation>): void {
  const dir = process.env['DIFFERENTIAL_DUMP_DIR'];
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${name}-real.json`), JSON.stringify(Object.fromEntries(real), null, 1));
  writeFileSync(join(dir, `${name}-sim.json`), JSON.stringify(Object.fromEntries(sim), null, 1));
}

function format(list: readonly Mismatch[]): string {
  return list.map((m) => `${m.path}: real ${m.real} | sim ${m.sim}`).join('\n');
}

/** The suite's mismatches between both answers to the script, kept for the conformance report; '' when none. */
function compareAndKeep(real: Map<string, Observation>, sim: Map<string, Observation>): string {
  const found = compareObservations(real, sim);
  mismatches.push(...found);
  return format(found);
}

/** The dense sample's arguments. */
const DENSE_ARGS = [
  '--served-model-name',
  MODEL,
  '--enable-metrics',
  '--enable-cache-report',
  // Large enough that neither server evicts: the simulator's tokenizer makes
  // more tokens of the same text than the tiny model's.
  '--max-total-tokens',
  '65536',
];

describe('dense: radix cache, metrics, cache report', () => {
  let pair: Pair | undefined;
  let real: Map<string, Observation>;
  let sim: Map<string, Observation>;
  beforeAll(async () => {
    pair = await startPair(DENSE_ARGS);
    // A figure, not a bound (a loaded machine stretches it): starting at all is bounded by
    // startRealSglang's own wait.
    process.stderr.write(
      `[differential] real SGLang answered /health after ${Math.round(pair.real.startupMs)} ms\n`,
    );
    real = await runScript(pair.real.url, MODEL);
    sim = await runScript(pair.sim.url, MODEL);
    dump('dense', real, sim);
  });
  afterAll(() => stopPair(pair));

  it('answers every request with the same shapes, codes and metric families', () => {
    expect(compareAndKeep(real, sim)).toBe('');
  });

  it('holds less than 4 GB', () => {
    expect(pair?.real.readPssMb()).toBeLessThan(4096);
  });

  // Last: it ends both servers. SGLang's SignalHandler and sigterm_watchdog (test/sim/sigterm.ts).
  it('after SIGTERM: /ready, /health and /health_generate 503 on both, generation still served, both end on their own', async () => {
    if (!pair) throw new Error('no pair');
    const { real: r, sim: s } = pair;
    process.kill(r.pid, 'SIGTERM');
    const simExit = s.server.terminate();
    const answers = async (url: string): Promise<Record<string, number>> => {
      const out: Record<string, number> = {};
      for (const path of ['/ready', '/health', '/health_generate'])
        out[path] = (await fetch(`${url}${path}`)).status;
      const gen = await postJson(`${url}/generate`, {
        text: 'hello there',
        sampling_params: { max_new_tokens: 4, temperature: 0, ignore_eos: true },
      });
      out['/generate'] = gen.status;
      return out;
    };
    const afterSigterm = { real: await answers(r.url), sim: await answers(s.url) };
    const found: Mismatch[] = Object.entries(afterSigterm.real)
      .filter(([path, status]) => afterSigterm.sim[path] !== status)
      .map(([path, status]) => ({
        path: `after SIGTERM ${path} status`,
        real: String(status),
        sim: String(afterSigterm.sim[path]),
      }));
    mismatches.push(...found);
    expect(format(found)).toBe('');
    expect(afterSigterm.real).toEqual({
      '/ready': 503,
      '/health': 503,
      '/health_generate': 503,
      '/generate': 200,
    });
    // Nothing is sent any more: the real server's watchdog (5 s) ends it, no kill needed.
    const signalled = performance.now();
    while (isPidAlive(r.pid) && performance.now() - signalled < 30_000)
      await new Promise((w) => setTimeout(w, 100));
    expect(isPidAlive(r.pid)).toBe(false);
    await simExit;
  });
});

// ADR 0057: the runtime the operator starts with spec.serving.priorityScheduling. Its metrics
// carry a `priority` label on every scheduler and tokenizer series, and its queue gauges a count
// per priority beside the total; the label's values are compared (differential-compare.ts).
// With the operator's --default-priority-value 0 (ADR 0057's amendment), as every pod runs it: the
// script's unstamped requests carry "0" (without the flag SGLang's last-of-all value, and "" on
// the tokenizer's series; one real start a pair, so only what the operator launches is compared).
describe('dense with priority scheduling: the priority label on every metric', () => {
  let pair: Pair | undefined;
  let real: Map<string, Observation>;
  let sim: Map<string, Observation>;
  beforeAll(async () => {
    pair = await startPair([
      ...DENSE_ARGS,
      '--enable-priority-scheduling',
      '--disable-priority-preemption',
      '--default-priority-value',
      '0',
    ]);
    // One request with the priority the gateway stamps, then the script's (none of them stamped).
    const stamped = {
      text: 'hello there',
      priority: 7,
      sampling_params: { max_new_tokens: 4, temperature: 0, ignore_eos: true },
    };
    for (const url of [pair.real.url, pair.sim.url])
      expect((await postJson(`${url}/generate`, stamped)).status).toBe(200);
    real = await runScript(pair.real.url, MODEL);
    sim = await runScript(pair.sim.url, MODEL);
    dump('priority', real, sim);
  });
  afterAll(() => stopPair(pair));

  it('answers every request with the same shapes, codes, metric families and priority labels', () => {
    expect(compareAndKeep(real, sim)).toBe('');
  });
});

/** input_ids of `n` tokens valid in both vocabularies (the tiny model's is the smaller: 430). */
function ids(seed: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => 5 + ((seed * 131 + i * 7) % 400));
}

/** The HiCache script: fill the device pool past capacity, then ask for the first prompt again. */
async function runHicacheScript(url: string): Promise<Map<string, Observation>> {
  const out = new Map<string, Observation>();
  const gen = async (name: string, inputIds: number[]): Promise<void> => {
    const r = await postJson(`${url}/generate`, {
      input_ids: inputIds,
      sampling_params: { max_new_tokens: 1, temperature: 0, ignore_eos: true },
    });
    out.set(name, { name, status: r.status, contentType: 'application/json', body: r.json });
  };
  await gen('first', ids(0, 700));
  for (let i = 1; i <= 6; i++) await gen(`filler_${i}`, ids(i, 700));
  await gen('back_from_host', ids(0, 700));
  for (const path of ['/server_info', '/metrics']) {
    const r = await fetch(`${url}${path}`);
    const text = await r.text();
    const contentType = (r.headers.get('content-type') ?? '').split(';')[0] ?? '';
    const name = path === '/metrics' ? 'metrics' : 'server_info';
    out.set(name, {
      name,
      status: r.status,
      contentType,
      body: name === 'metrics' ? text : JSON.parse(text),
    });
  }
  return out;
}

function hostTokens(o: Observation | undefined): number {
  const meta = (o?.body as { meta_info?: { cached_tokens_details?: { host?: number } | null } } | undefined)
    ?.meta_info;
  return meta?.cached_tokens_details?.host ?? 0;
}

describe('HiCache: a prompt pushed out of the device pool comes back from the host tier', () => {
  let pair: Pair | undefined;
  let real: Map<string, Observation>;
  let sim: Map<string, Observation>;
  beforeAll(async () => {
    pair = await startPair([
      '--served-model-name',
      MODEL,
      '--enable-metrics',
      '--enable-cache-report',
      '--enable-hierarchical-cache',
      '--hicache-ratio',
      '2',
      '--page-size',
      '16',
      '--max-total-tokens',
      '4096',
    ]);
    real = await runHicacheScript(pair.real.url);
    sim = await runHicacheScript(pair.sim.url);
    dump('hicache', real, sim);
  });
  afterAll(() => stopPair(pair));

  it('reports host-tier cached tokens on both', () => {
    expect(hostTokens(real.get('back_from_host'))).toBeGreaterThan(0);
    expect(hostTokens(sim.get('back_from_host'))).toBeGreaterThan(0);
  });

  it('answers with the same shapes and HiCache metric families', () => {
    expect(compareAndKeep(real, sim)).toBe('');
  });
});
