// What decides whether the FIRST request on a replica that never computed a prefix gets it from
// HiCache's L3 tier, on the real SGLang 0.5.23 (issue 33 item 4, ADR 0042): the `file` backend in
// one directory two servers share, SGLang's default prefetch policy (timeout). A prefix is looked
// up in L3 only when the request's part past the replica's own match, page-aligned, reaches
// `prefetch_threshold` (default 256 tokens; UnifiedRadixCache.prefetch_from_storage,
// mem_cache/unified_radix_cache.py), so a short request is computed though L3 holds it, until the
// extra config lowers the threshold. At most two real servers at once.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/kubectl.ts';
import { startRealSglang, type RealSglang } from '../support/real-sglang.ts';

const PAGE = 16;
const SENTENCE = 'the quick brown fox jumps over the lazy dog ';
/** About 370 tokens: past the default threshold. */
const LONG = `A handbook chapter. ${SENTENCE.repeat(36)}`;
/** About 130 tokens: under it. */
const SHORT = `A note. ${SENTENCE.repeat(12)}`;
const ARGS = [
  '--served-model-name',
  'tiny',
  '--page-size',
  String(PAGE),
  '--max-total-tokens',
  '2048',
  '--enable-cache-report',
  '--enable-hierarchical-cache',
  '--hicache-ratio',
  '2',
  '--hicache-write-policy',
  'write_through',
  '--hicache-storage-backend',
  'file',
];

interface MetaInfo {
  prompt_tokens: number;
  cached_tokens: number;
  cached_tokens_details: { device: number; host: number; storage?: number } | null;
}

const cacheable = (promptTokens: number): number => Math.floor((promptTokens - 1) / PAGE) * PAGE;

async function generate(server: RealSglang, text: string): Promise<MetaInfo> {
  const r = await fetch(`${server.url}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text, sampling_params: { max_new_tokens: 1, temperature: 0 } }),
  });
  expect(r.status).toBe(200);
  return ((await r.json()) as { meta_info: MetaInfo }).meta_info;
}

let dir = '';
const servers: RealSglang[] = [];
const start = async (extra: string[] = []): Promise<RealSglang> => {
  const s = await startRealSglang({
    args: [...ARGS, ...extra],
    env: { SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR: dir },
  });
  servers.push(s);
  return s;
};
const pages = (): number => readdirSync(dir).filter((f) => f.endsWith('.bin')).length;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cacheroute-l3-first-'));
});
afterAll(async () => {
  for (const s of servers) await s.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the first request on a replica that never computed the prefix (file L3, default policy)', () => {
  it('loads a prefix past prefetch_threshold from L3; a shorter one only once the threshold is lowered', async () => {
    const [a, b] = await Promise.all([start(), start()]);
    if (!a || !b) throw new Error('two servers');
    const long = await generate(a, LONG);
    const short = await generate(a, SHORT);
    expect(short.prompt_tokens).toBeLessThan(256);
    const written = cacheable(long.prompt_tokens) / PAGE + cacheable(short.prompt_tokens) / PAGE;
    await eventually(() => expect(pages()).toBeGreaterThanOrEqual(written), { timeoutMs: 30_000 });

    // SGLang's default policy (timeout) waits for the read: all of it, from storage.
    const longOnB = await generate(b, LONG);
    expect(longOnB.cached_tokens_details).toMatchObject({
      device: 0,
      host: 0,
      storage: cacheable(longOnB.prompt_tokens),
    });
    // Under the threshold L3 is never asked: computed, though L3 holds every page of it.
    const shortOnB = await generate(b, SHORT);
    expect(shortOnB.cached_tokens).toBe(0);

    // A server told a threshold of one page loads the short one too.
    await b.stop();
    const c = await start([
      '--hicache-storage-backend-extra-config',
      JSON.stringify({ prefetch_threshold: PAGE }),
    ]);
    const shortOnC = await generate(c, SHORT);
    expect(shortOnC.cached_tokens_details).toMatchObject({
      device: 0,
      host: 0,
      storage: cacheable(shortOnC.prompt_tokens),
    });
  });
});
