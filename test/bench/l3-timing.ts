// What each KV tier is worth on the REAL SGLang 0.5.23 (issue 33 item 3): the TTFT of one long
// prompt as a miss, a device hit, a host-tier hit and an L3 (HiCache `file` backend) hit, on
// two real servers of the tiny model sharing one L3 directory, as ADR 0029 provisions it.
//
//   node test/bench/l3-timing.ts [--repeats 5] [--lengths 64,256] [--max-total-tokens 4096]
//
// Per repeat r and prompt length, with a fresh cache_salt (a salt seeds the device radix and
// the storage hash chain alike, so nothing of an earlier repeat is reused), and always with a
// device pool full of other prompts ("fillers", other salts), so every tier pays the same
// evictions for room:
//   miss    A computes the prompt (it is written through to host and L3);
//   device  A again: the device tree holds it;
//   host    A after fillers pushed it out of the device pool, into host only;
//   l3      B, after /flush_cache (device and host emptied; L3 survives, ADR 0034) and fillers,
//           every cacheable page loaded from L3 (--hicache-storage-prefetch-policy wait_complete).
// Each answer's cached_tokens_details is checked to say which tier served it; a row whose
// tier is not the intended one is reported, not counted. TTFT is the client's time for a
// /generate of max_new_tokens 1 (prefill and one sampled token) plus the server's own
// first_token_latency; both are reported. Prints one JSON line (per-tier medians, ratios).
// At most two real servers, --sleep-on-idle (the kit forces it); both are stopped at the end.

import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startRealSglang, type RealSglang } from '../support/real-sglang.ts';

const { values } = parseArgs({
  options: {
    repeats: { type: 'string', default: '5' },
    // Copies of the sentence: about ten tokens a copy with the tiny model's tokenizer.
    lengths: { type: 'string', default: '64,256' },
    'max-total-tokens': { type: 'string', default: '4096' },
  },
});
const repeats = Number(values.repeats);
const lengths = (values.lengths ?? '').split(',').map(Number);
const maxTotal = Number(values['max-total-tokens']);
const PAGE = 16;
const SENTENCE = 'the quick brown fox jumps over the lazy dog ';
const FILLER_COPIES = 64;

const Tier = { miss: 'miss', device: 'device', host: 'host', l3: 'l3' } as const;
type Tier = (typeof Tier)[keyof typeof Tier];

interface Details {
  device: number;
  host: number;
  storage?: number;
}
interface Meta {
  prompt_tokens: number;
  cached_tokens: number;
  cached_tokens_details: Details | null;
  first_token_latency?: number;
  storage_prefetch_wait?: number;
  queue_time?: number;
}
interface Row {
  tier: Tier;
  copies: number;
  promptTokens: number;
  clientMs: number;
  serverMs: number | null;
  prefetchWaitMs: number | null;
  details: Details | null;
  asIntended: boolean;
}

const args = [
  '--served-model-name',
  'tiny',
  '--page-size',
  String(PAGE),
  '--max-total-tokens',
  String(maxTotal),
  '--enable-metrics',
  '--enable-cache-report',
  '--enable-hierarchical-cache',
  '--hicache-ratio',
  '4',
  '--hicache-write-policy',
  'write_through',
  '--hicache-storage-backend',
  'file',
  '--hicache-storage-prefetch-policy',
  'wait_complete',
];

async function generate(s: RealSglang, text: string, salt: string): Promise<{ meta: Meta; ms: number }> {
  const t0 = performance.now();
  const r = await fetch(`${s.url}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text, sampling_params: { max_new_tokens: 1, temperature: 0 }, cache_salt: salt }),
  });
  const ms = performance.now() - t0;
  if (r.status !== 200) throw new Error(`/generate answered ${r.status}: ${await r.text()}`);
  return { meta: ((await r.json()) as { meta_info: Meta }).meta_info, ms };
}

async function flush(s: RealSglang): Promise<void> {
  const r = await fetch(`${s.url}/flush_cache`, { method: 'POST' });
  if (r.status !== 200) throw new Error(`/flush_cache answered ${r.status}`);
}

const cacheable = (prompt: number): number => Math.floor((prompt - 1) / PAGE) * PAGE;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function intended(tier: Tier, m: Meta): boolean {
  const d = m.cached_tokens_details ?? { device: 0, host: 0, storage: 0 };
  const full = cacheable(m.prompt_tokens);
  if (tier === Tier.miss) return m.cached_tokens === 0;
  if (tier === Tier.device) return d.device === full;
  if (tier === Tier.host) return d.host === full && d.device === 0;
  return (d.storage ?? 0) === full && d.device === 0 && d.host === 0;
}

function row(tier: Tier, copies: number, res: { meta: Meta; ms: number }): Row {
  const m = res.meta;
  return {
    tier,
    copies,
    promptTokens: m.prompt_tokens,
    clientMs: res.ms,
    serverMs: m.first_token_latency === undefined ? null : m.first_token_latency * 1000,
    prefetchWaitMs: m.storage_prefetch_wait === undefined ? null : m.storage_prefetch_wait * 1000,
    details: m.cached_tokens_details,
    asIntended: intended(tier, m),
  };
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length === 0 ? NaN : s.length % 2 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
};

async function waitForPages(dir: string, atLeast: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (readdirSync(dir).filter((f) => f.endsWith('.bin')).length >= atLeast) return;
    await sleep(100);
  }
  throw new Error(`L3 never reached ${atLeast} pages`);
}

async function main(): Promise<void> {
  const l3Dir = mkdtempSync(join(tmpdir(), 'cacheroute-l3-timing-'));
  const env = { SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR: l3Dir };
  const servers: RealSglang[] = [];
  const load = [loadavg()[0] ?? 0];
  const rows: Row[] = [];
  try {
    // One after the other, with time to spare: on a loaded 2-core machine start-up alone takes minutes.
    const a = await startRealSglang({ args, env, startTimeoutMs: 900_000 });
    servers.push(a);
    const b = await startRealSglang({ args, env, startTimeoutMs: 900_000 });
    servers.push(b);
    // Warm both (first-request compile and allocation paths) with a salt never used again.
    for (const s of [a, b]) for (let i = 0; i < 3; i++) await generate(s, SENTENCE.repeat(32), `warm-${i}`);
    // Fillers of other salts, in all more than the device pool. Every tier is measured with a
    // full device pool, so each pays the same evictions for room (a load-back or L3 load into an
    // empty pool would look cheaper than a host hit that first evicts).
    const fill = async (s: RealSglang, tag: string): Promise<void> => {
      const count = Math.ceil((maxTotal * 1.5) / (FILLER_COPIES * 10));
      for (let f = 0; f < count; f++) await generate(s, SENTENCE.repeat(FILLER_COPIES), `filler-${tag}-${f}`);
    };
    await fill(a, 'a0');
    for (let r = 0; r < repeats; r++) {
      for (const copies of lengths) {
        const text = `Repeat ${r}. ${SENTENCE.repeat(copies)}`;
        const salt = `r${r}-c${copies}`;
        const miss = await generate(a, text, salt);
        rows.push(row(Tier.miss, copies, miss));
        rows.push(row(Tier.device, copies, await generate(a, text, salt)));
        const pages = cacheable(miss.meta.prompt_tokens) / PAGE;
        await waitForPages(l3Dir, pages);
        await fill(a, salt);
        rows.push(row(Tier.host, copies, await generate(a, text, salt)));
        // B: nothing of it in device or host (flushed), a device pool full of others; all from L3.
        await flush(b);
        await fill(b, `b-${salt}`);
        rows.push(row(Tier.l3, copies, await generate(b, text, salt)));
        load.push(loadavg()[0] ?? 0);
      }
    }
  } finally {
    for (const s of servers) await s.stop();
    rmSync(l3Dir, { recursive: true, force: true });
  }
  for (const r of rows) process.stderr.write(`${JSON.stringify(r)}\n`);
  const summary: Record<string, unknown> = {};
  for (const copies of lengths) {
    const by = (t: Tier, k: 'clientMs' | 'serverMs'): number =>
      median(rows.filter((r) => r.tier === t && r.copies === copies && r.asIntended).map((r) => r[k] ?? NaN));
    const tiers = Object.values(Tier);
    const med = Object.fromEntries(
      tiers.map((t) => [t, { client_ms: by(t, 'clientMs'), server_ms: by(t, 'serverMs') }]),
    );
    const tokens = rows.find((r) => r.copies === copies)?.promptTokens ?? 0;
    const off = rows.filter((r) => r.copies === copies && !r.asIntended).map((r) => r.tier);
    summary[`tokens_${tokens}`] = { median: med, not_as_intended: off };
  }
  // Marginal cost per cached token between the two lengths: the fixed overhead of a request cancels.
  if (lengths.length >= 2) {
    const tok = (c: number): number => rows.find((r) => r.copies === c)?.promptTokens ?? 0;
    const [short = 0, long = 0] = [lengths[0], lengths.at(-1)];
    const dTok = tok(long) - tok(short);
    const per = (t: Tier): number => {
      const m = (c: number): number =>
        median(
          rows.filter((r) => r.tier === t && r.copies === c && r.asIntended).map((r) => r.serverMs ?? NaN),
        );
      return (m(long) - m(short)) / dTok;
    };
    const miss = per(Tier.miss);
    const host = per(Tier.host);
    const l3 = per(Tier.l3);
    const device = per(Tier.device);
    summary['marginal_ms_per_token'] = { miss, device, host, l3 };
    summary['ratios'] = { l3_over_miss: l3 / miss, l3_over_host: l3 / host, host_over_miss: host / miss };
  }
  summary['load_average'] = { min: Math.min(...load), max: Math.max(...load) };
  summary['repeats'] = repeats;
  process.stdout.write(`${JSON.stringify(summary)}\n`);
}

await main();
