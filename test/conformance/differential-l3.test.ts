// HiCache's L3 `file` tier, differential (issue 33 item 2): two real SGLang 0.5.23 servers on
// CPU sharing one L3 directory (as ADR 0029 provisions it: SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR)
// and two simulators launched with the same arguments sharing another get the same script:
//   A computes a prompt (a miss) and again (a device hit);
//   B with another tenant's cache_salt (nothing in L3 for it);
//   B unsalted: every cacheable page loaded from L3 (B never computed it);
//   B after /flush_cache, and A after /flush_cache: L3 survives a flush;
//   A then B with a prompt shorter than SGLang's prefetch threshold (256 tokens): computed on B.
// The two sides tokenize differently (the tiny model's BPE, the simulator's word tokenizer), so
// each answer is compared as where its cached tokens came from: each tier's count as a share of
// the prompt's cacheable pages, the key set of cached_tokens_details and its storage_backend.
// Every differing field is a mismatch, counted into the conformance line
// (l3_differential_mismatches). At most two real servers, --sleep-on-idle (kit serve).

import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordConformance } from '../support/conformance-report.ts';
import { eventually } from '../support/kubectl.ts';
import { startRealSglang, type RealSglang } from '../support/real-sglang.ts';
import { postJson, startSim, type RunningSim } from '../support/sim/testing.ts';

const PAGE = 16;
const SENTENCE = 'the quick brown fox jumps over the lazy dog ';
const PROMPT = `A handbook chapter. ${SENTENCE.repeat(36)}`;
// Under 256 tokens with either tokenizer (the simulator spells these words in bytes).
const SHORT = `A note. ${SENTENCE.repeat(4)}`;
const ARGS = [
  '--served-model-name',
  'tiny',
  '--page-size',
  String(PAGE),
  '--max-total-tokens',
  '2048',
  '--enable-metrics',
  '--enable-cache-report',
  '--enable-hierarchical-cache',
  '--hicache-ratio',
  '2',
  '--hicache-write-policy',
  'write_through',
  '--hicache-storage-backend',
  'file',
  '--hicache-storage-prefetch-policy',
  'wait_complete',
];

interface Server {
  readonly url: string;
}
interface Side {
  readonly a: Server;
  readonly b: Server;
  /** Resolves once L3 holds every cacheable page of a prompt of `promptTokens` (the real backup is asynchronous). */
  untilWritten(promptTokens: number): Promise<void>;
}

/** An answer as compared: where its cached tokens came from. */
type Outcome = Record<string, unknown>;

const cacheable = (promptTokens: number): number => Math.floor((promptTokens - 1) / PAGE) * PAGE;

function outcomeOf(status: number, body: unknown): Outcome {
  if (status !== 200) return { status };
  const meta = (body as { meta_info: Record<string, unknown> }).meta_info;
  const prompt = Number(meta['prompt_tokens']);
  const details = meta['cached_tokens_details'] as Record<string, unknown> | null;
  const share = (n: unknown): number => Number((Number(n ?? 0) / Math.max(1, cacheable(prompt))).toFixed(2));
  return {
    status,
    cached: share(meta['cached_tokens']),
    details_keys: details === null ? null : Object.keys(details).sort().join(','),
    device: share(details?.['device']),
    host: share(details?.['host']),
    storage: share(details?.['storage']),
    storage_backend: details?.['storage_backend'] ?? null,
  };
}

async function runScript(side: Side): Promise<Map<string, Outcome>> {
  const out = new Map<string, Outcome>();
  /** Asks, records the outcome, and returns the prompt's token count (this side's tokenizer). */
  const ask = async (name: string, s: Server, text: string, salt?: string): Promise<number> => {
    const r = await postJson(`${s.url}/generate`, {
      text,
      sampling_params: { max_new_tokens: 1, temperature: 0 },
      ...(salt === undefined ? {} : { cache_salt: salt }),
    });
    out.set(name, outcomeOf(r.status, r.json));
    return Number((r.json as { meta_info?: { prompt_tokens?: number } }).meta_info?.prompt_tokens ?? 0);
  };
  const flush = async (s: Server): Promise<void> => {
    const r = await fetch(`${s.url}/flush_cache`, { method: 'POST' });
    expect(r.status).toBe(200);
  };
  const promptTokens = await ask('a_miss', side.a, PROMPT);
  await ask('a_device_hit', side.a, PROMPT);
  await side.untilWritten(promptTokens);
  await ask('b_other_tenant', side.b, PROMPT, 'tenant-b');
  await ask('b_from_l3', side.b, PROMPT);
  await flush(side.b);
  await ask('b_after_flush', side.b, PROMPT);
  await flush(side.a);
  await ask('a_after_flush', side.a, PROMPT);
  await ask('a_short', side.a, SHORT);
  await ask('b_short', side.b, SHORT);
  return out;
}

/** The real backend's page files (<hash>_<model>_<rank>_<size>.bin). */
function countL3Pages(dir: string): number {
  return readdirSync(dir).filter((f) => f.endsWith('.bin')).length;
}

const dirs: string[] = [];
const reals: RealSglang[] = [];
const sims: RunningSim[] = [];
let real: Map<string, Outcome>;
let sim: Map<string, Outcome>;
const mismatches: string[] = [];

beforeAll(async () => {
  const realDir = mkdtempSync(join(tmpdir(), 'cacheroute-l3-diff-real-'));
  const simDir = mkdtempSync(join(tmpdir(), 'cacheroute-l3-diff-sim-'));
  dirs.push(realDir, simDir);
  const realEnv = { SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR: realDir };
  // Together, with time to spare: on a loaded 2-core machine one start-up alone can take minutes.
  reals.push(
    ...(await Promise.all(
      [0, 1].map(() => startRealSglang({ args: ARGS, env: realEnv, startTimeoutMs: 600_000 })),
    )),
  );
  const simEnv = { SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR: simDir };
  for (let i = 0; i < 2; i++) sims.push(await startSim(['--model-path', 'tiny', ...ARGS], { env: simEnv }));
  const [ra, rb] = reals;
  const [sa, sb] = sims;
  if (!ra || !rb || !sa || !sb) throw new Error('two servers a side');
  real = await runScript({
    a: ra,
    b: rb,
    // Every cacheable page of the prompt A computed is on disk before B asks.
    untilWritten: (tokens) =>
      eventually(() => expect(countL3Pages(realDir)).toBeGreaterThanOrEqual(cacheable(tokens) / PAGE), {
        timeoutMs: 60_000,
      }),
  });
  // The simulator writes through as the host copy is made: nothing to wait for.
  sim = await runScript({ a: sa, b: sb, untilWritten: () => Promise.resolve() });
  for (const [name, r] of real) {
    const s = sim.get(name) ?? {};
    for (const key of new Set([...Object.keys(r), ...Object.keys(s)]))
      if (JSON.stringify(r[key]) !== JSON.stringify(s[key]))
        mismatches.push(`${name}.${key}: real ${JSON.stringify(r[key])}, sim ${JSON.stringify(s[key])}`);
  }
  recordConformance('differential-l3', { l3_differential_mismatches: mismatches.length });
});

afterAll(async () => {
  for (const s of reals) await s.stop();
  for (const s of sims) await s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('HiCache L3 (file backend), real server against the simulator', () => {
  it('the real servers answer as the script expects (the script means what it says)', () => {
    expect(real.get('a_miss')).toMatchObject({ cached: 0, details_keys: null });
    expect(real.get('b_from_l3')).toMatchObject({
      device: 0,
      host: 0,
      storage: 1,
      storage_backend: 'HiCacheFile',
    });
    expect(real.get('b_after_flush')).toMatchObject({ storage: 1 });
    expect(real.get('b_other_tenant')).toMatchObject({ cached: 0 });
    expect(real.get('b_short')).toMatchObject({ cached: 0 });
  });

  it('the simulator answers every step as the real servers do', () => {
    expect(mismatches).toEqual([]);
  });
});
