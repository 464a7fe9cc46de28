// HiCache's `mooncake` L3 backend on the real SGLang 0.5.23 (issue 33 item 2), on CPU over
// Mooncake's TCP transport: a mooncake_master and one store node (support/mooncake.ts), two
// real servers joined to it as clients that lend no memory. What a prefix computed on A and
// written through is worth on B, whether a salt keeps tenants apart in the store, and whether a
// server that replaces B finds it, all from the servers' own cache reports
// (cached_tokens_details.storage) and the master's own gauges. (The file backend, provisioned
// by the operator, is test/e2e/real-sglang-l3.test.ts.) At most two real servers at once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildHicacheL3Args, cacheable, L3_PAGE, L3_PROMPT } from '../support/hicache-l3.ts';
import { eventually } from '../support/kubectl.ts';
import { startMooncakeStore, type MooncakeStore } from '../support/mooncake.ts';
import { startRealSglang, type RealSglang } from '../support/real-sglang.ts';

const ARGS = buildHicacheL3Args({ backend: 'mooncake', prefetchPolicy: 'wait_complete', metrics: true });

interface MetaInfo {
  prompt_tokens: number;
  cached_tokens: number;
  cached_tokens_details: { device: number; host: number; storage?: number; storage_backend?: string } | null;
}

async function generate(server: RealSglang, cacheSalt?: string): Promise<MetaInfo> {
  const r = await fetch(`${server.url}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      text: L3_PROMPT,
      sampling_params: { max_new_tokens: 1, temperature: 0 },
      ...(cacheSalt === undefined ? {} : { cache_salt: cacheSalt }),
    }),
  });
  expect(r.status).toBe(200);
  return ((await r.json()) as { meta_info: MetaInfo }).meta_info;
}

let store: MooncakeStore | undefined;
const servers: RealSglang[] = [];
const start = async (): Promise<RealSglang> => {
  const s = await startRealSglang({ args: ARGS, env: store?.clientEnv() ?? {} });
  servers.push(s);
  return s;
};

beforeAll(async () => {
  store = await startMooncakeStore();
});

afterAll(async () => {
  for (const s of servers) await s.stop();
  await store?.stop();
});

describe('HiCache mooncake backend on the real server', () => {
  it('B loads from the store what A computed; salts stay apart; a replacement of B finds both', async () => {
    if (!store) throw new Error('no store');
    const [a, b] = await Promise.all([start(), start()]);
    if (!a || !b) throw new Error('two servers');
    const keysBefore = (await store.readMetrics()).get('master_key_count') ?? 0;
    const onA = await generate(a);
    expect(onA.cached_tokens).toBe(0);
    const pages = cacheable(onA.prompt_tokens) / L3_PAGE;
    // A K and a V object a page.
    await eventually(
      async () =>
        expect(
          ((await store?.readMetrics())?.get('master_key_count') ?? 0) - keysBefore,
        ).toBeGreaterThanOrEqual(2 * pages),
      { timeoutMs: 30_000 },
    );

    expect((await generate(b, 'tenant-b')).cached_tokens).toBe(0);
    const onB = await generate(b);
    expect(onB.cached_tokens_details).toMatchObject({
      device: 0,
      host: 0,
      storage: cacheable(onB.prompt_tokens),
      storage_backend: 'MooncakeStore',
    });

    // The store tells its usage: what status would show for a mooncake tier.
    const gauges = await store.readMetrics();
    expect(gauges.get('master_total_capacity_bytes')).toBe(store.segmentBytes);
    expect(gauges.get('master_allocated_bytes')).toBeGreaterThan(0);

    // B goes; a new server takes its place with empty device and host tiers.
    await b.stop();
    const fresh = await start();
    expect((await generate(fresh, 'tenant-b')).cached_tokens_details).toMatchObject({
      device: 0,
      host: 0,
      storage: cacheable(onB.prompt_tokens),
    });
    expect((await generate(fresh)).cached_tokens_details).toMatchObject({ device: 0, host: 0 });
    expect((await generate(fresh, 'tenant-c')).cached_tokens).toBe(0);
  });
});
