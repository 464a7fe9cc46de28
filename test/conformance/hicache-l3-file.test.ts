// HiCache's L3 `file` tier on the real SGLang 0.5.23 (issue 33 items 2 and 4): one pair of real
// servers sharing one L3 directory (as ADR 0029 provisions it: SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR)
// serves both parts of this file, started once (a start costs a minute of this 2-core machine).
//
// The differential: the pair and two simulators launched with the same arguments sharing another
// directory get the same script:
//   A computes a prompt (a miss) and again (a device hit);
//   B with another tenant's cache_salt (nothing in L3 for it);
//   B unsalted: every cacheable page loaded from L3 (B never computed it);
//   B after /flush_cache, and A after /flush_cache: L3 survives a flush;
//   A then B with a prompt shorter than SGLang's prefetch threshold (256 tokens): computed on B.
// The two sides tokenize differently (the tiny model's BPE, the simulator's word tokenizer), so
// each answer is compared as where its cached tokens came from: each tier's count as a share of
// the prompt's cacheable pages, the key set of cached_tokens_details and its storage_backend.
// Every differing field is a mismatch, counted into the conformance line
// (l3_differential_mismatches).
//
// The first request on a replica that never computed a prefix (ADR 0042), under a salt of its
// own so nothing of the differential counts: a prefix is looked up in L3 only when the
// request's part past the replica's own match, page-aligned, reaches `prefetch_threshold`
// (default 256 tokens; UnifiedRadixCache.prefetch_from_storage, mem_cache/unified_radix_cache.py),
// so a short request is computed though L3 holds it, until the extra config lowers the
// threshold; with SGLang's default prefetch policy (timeout) a long one is loaded whole. B then
// gives way to C, a server with the default policy and a threshold of one page.
// At most two real servers at once, --sleep-on-idle (kit serve).

import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordConformance } from '../support/conformance-report.ts';
import { buildHicacheL3Args, cacheable, L3_PAGE, L3_PROMPT, L3_SENTENCE } from '../support/hicache-l3.ts';
import { eventually } from '../support/kubectl.ts';
import { startRealSglang, type RealSglang } from '../support/real-sglang.ts';
import { postJson, startSim, type RunningSim } from '../support/sim/testing.ts';

// Under 256 tokens with either tokenizer (the simulator spells these words in bytes).
const DIFF_SHORT = `A note. ${L3_SENTENCE.repeat(4)}`;
/** About 130 tokens: under the default threshold. */
const FIRST_SHORT = `A note. ${L3_SENTENCE.repeat(12)}`;
const FIRST_SALT = 'first-request';
// The differential's servers wait for a prefetch to finish: what B reports is then what L3 held.
const ARGS = buildHicacheL3Args({ backend: 'file', prefetchPolicy: 'wait_complete', metrics: true });

interface Server {
  readonly url: string;
}
interface Side {
  readonly a: Server;
  readonly b: Server;
  /** Resolves once L3 holds every cacheable page of a prompt of `promptTokens` (the real backup is asynchronous). */
  untilWritten(promptTokens: number): Promise<void>;
}

interface MetaInfo {
  prompt_tokens: number;
  cached_tokens: number;
  cached_tokens_details: { device: number; host: number; storage?: number } | null;
}

/** An answer as compared: where its cached tokens came from. */
type Outcome = Record<string, unknown>;

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
  const promptTokens = await ask('a_miss', side.a, L3_PROMPT);
  await ask('a_device_hit', side.a, L3_PROMPT);
  await side.untilWritten(promptTokens);
  await ask('b_other_tenant', side.b, L3_PROMPT, 'tenant-b');
  await ask('b_from_l3', side.b, L3_PROMPT);
  await flush(side.b);
  await ask('b_after_flush', side.b, L3_PROMPT);
  await flush(side.a);
  await ask('a_after_flush', side.a, L3_PROMPT);
  await ask('a_short', side.a, DIFF_SHORT);
  await ask('b_short', side.b, DIFF_SHORT);
  return out;
}

/** /generate of `text` under the first-request part's salt, on a real server. */
async function generate(server: Server, text: string): Promise<MetaInfo> {
  const r = await postJson(`${server.url}/generate`, {
    text,
    sampling_params: { max_new_tokens: 1, temperature: 0 },
    cache_salt: FIRST_SALT,
  });
  expect(r.status).toBe(200);
  return (r.json as { meta_info: MetaInfo }).meta_info;
}

let realDir = '';
const dirs: string[] = [];
const reals: RealSglang[] = [];
const sims: RunningSim[] = [];
let real: Map<string, Outcome>;
let sim: Map<string, Outcome>;
const mismatches: string[] = [];

/** The real backend's page files (<hash>_<model>_<rank>_<size>.bin). */
const countL3Pages = (): number => readdirSync(realDir).filter((f) => f.endsWith('.bin')).length;
const startReal = async (args: readonly string[]): Promise<RealSglang> => {
  const s = await startRealSglang({
    args,
    env: { SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR: realDir },
    // On a loaded 2-core machine one start-up alone can take minutes.
    startTimeoutMs: 600_000,
  });
  reals.push(s);
  return s;
};

beforeAll(async () => {
  realDir = mkdtempSync(join(tmpdir(), 'cacheroute-l3-diff-real-'));
  const simDir = mkdtempSync(join(tmpdir(), 'cacheroute-l3-diff-sim-'));
  dirs.push(realDir, simDir);
  const [ra, rb] = await Promise.all([startReal(ARGS), startReal(ARGS)]);
  const simEnv = { SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR: simDir };
  for (let i = 0; i < 2; i++) sims.push(await startSim(['--model-path', 'tiny', ...ARGS], { env: simEnv }));
  const [sa, sb] = sims;
  if (!ra || !rb || !sa || !sb) throw new Error('two servers a side');
  real = await runScript({
    a: ra,
    b: rb,
    // Every cacheable page of the prompt A computed is on disk before B asks.
    untilWritten: (tokens) =>
      eventually(() => expect(countL3Pages()).toBeGreaterThanOrEqual(cacheable(tokens) / L3_PAGE), {
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

describe('the first request on a replica that never computed the prefix (file L3)', () => {
  it('loads a prefix past prefetch_threshold from L3; a shorter one only once the threshold is lowered', async () => {
    const [a, b] = reals;
    if (!a || !b) throw new Error('the pair');
    const before = countL3Pages();
    const long = await generate(a, L3_PROMPT);
    const short = await generate(a, FIRST_SHORT);
    expect(short.prompt_tokens).toBeLessThan(256);
    const written = cacheable(long.prompt_tokens) / L3_PAGE + cacheable(short.prompt_tokens) / L3_PAGE;
    await eventually(() => expect(countL3Pages() - before).toBeGreaterThanOrEqual(written), {
      timeoutMs: 30_000,
    });

    // Under the threshold L3 is never asked (whatever the prefetch policy): computed on B,
    // though L3 holds every page of it.
    expect((await generate(b, FIRST_SHORT)).cached_tokens).toBe(0);

    // B gives way to C: SGLang's default policy (timeout), a threshold of one page.
    await b.stop();
    const c = await startReal(
      buildHicacheL3Args({ backend: 'file', extraConfig: { prefetch_threshold: L3_PAGE } }),
    );
    // The default policy waits for the read: all of it, from storage.
    const longOnC = await generate(c, L3_PROMPT);
    expect(longOnC.cached_tokens_details).toMatchObject({
      device: 0,
      host: 0,
      storage: cacheable(longOnC.prompt_tokens),
    });
    // The lowered threshold loads the short one too.
    const shortOnC = await generate(c, FIRST_SHORT);
    expect(shortOnC.cached_tokens_details).toMatchObject({
      device: 0,
      host: 0,
      storage: cacheable(shortOnC.prompt_tokens),
    });
  });
});
