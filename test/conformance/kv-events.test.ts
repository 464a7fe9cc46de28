// The simulator's KV and load event streams, judged by SGLang 0.5.23 itself:
// pyzmq subscribes as a KV-aware router does, SGLang's msgspec classes decode
// every message (and re-encode it to the same bytes), and SGLang's own radix
// cache, driven through the same cache operations the scheduler performs for
// the same requests, says which events (block hashes included) it publishes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  eventEndpoint,
  portOf,
  postJson,
  startSimWithKvEvents,
  type RunningSim,
  type SimWithKvEvents,
} from '../support/sim/testing.ts';
import {
  subscribeEvents,
  treeEvents,
  type DecodedMessage,
  type KvEventJson,
  type TreeOp,
} from '../support/sglang-kit-events.ts';

const PAGE = 16;
const MAX_TOTAL_TOKENS = 256;
const ids = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

interface Sent {
  readonly prompt: number[];
  readonly output: number[];
  readonly cacheSalt?: string;
  readonly extraKey?: string;
}

async function generate(sim: RunningSim, s: Omit<Sent, 'output'>, maxNewTokens: number): Promise<Sent> {
  const body = {
    input_ids: s.prompt,
    sampling_params: { max_new_tokens: maxNewTokens, temperature: 0 },
    ...(s.cacheSalt === undefined ? {} : { cache_salt: s.cacheSalt }),
    ...(s.extraKey === undefined ? {} : { extra_key: s.extraKey }),
  };
  const r = await postJson(`${sim.url}/generate`, body);
  expect(r.status).toBe(200);
  const output = (r.json as { output_ids: number[] }).output_ids;
  return { ...s, output };
}

/** What SGLang's scheduler does to its tree for one finished request, with a publish after prefill and at the end. */
function requestOps(s: Sent): TreeOp[] {
  const ns = {
    ...(s.cacheSalt === undefined ? {} : { cache_salt: s.cacheSalt }),
    ...(s.extraKey === undefined ? {} : { extra_key: s.extraKey }),
  };
  return [
    { op: 'match', tokens: s.prompt.slice(0, -1), ...ns },
    { op: 'insert', tokens: s.prompt, ...ns }, // checkpoint after prefill
    { op: 'take' },
    // release_kv_cache: prompt + output, minus the last token (no KV yet)
    { op: 'insert', tokens: [...s.prompt, ...s.output.slice(0, -1)], ...ns },
    { op: 'take' },
  ];
}

describe('KV events: the simulator publishes what SGLang 0.5.23 publishes', () => {
  let sim: SimWithKvEvents;
  let kvPort: number;
  let replayPort: number;
  let loadBase: number;

  beforeAll(async () => {
    // Placeholder ports, checked as SGLang checks them: the sockets bind on ports the kernel picks.
    sim = await startSimWithKvEvents([
      '--model-path',
      'm',
      '--page-size',
      String(PAGE),
      '--max-total-tokens',
      String(MAX_TOTAL_TOKENS),
      '--load-publish-endpoint',
      'tcp://*:5600',
    ]);
    kvPort = portOf(sim.kv);
    replayPort = portOf(sim.replay);
    loadBase = portOf(eventEndpoint(sim, 'load'));
  });

  afterAll(async () => {
    await sim.close();
  });

  it('advertises the publisher in /server_info as SGLang does', async () => {
    const info = await fetch(`${sim.url}/server_info`).then((r) => r.json());
    expect((info as { kv_events: unknown }).kv_events).toEqual({
      publisher: 'zmq',
      endpoint_host: '*',
      endpoint_port_base: kvPort,
      topic: 'kv',
      block_size: PAGE,
      dp_size: 1,
      load_endpoint_port_base: loadBase,
      load_topic: 'load',
      replay_endpoint_port_base: replayPort,
    });
  });

  it('streams a repeat, a salted and an extra-keyed request, an eviction and a flush with SGLang hashes; a gap is replayed', async () => {
    const p1 = ids(1000, 40);
    // Published before anyone subscribes: lost live, recovered through the replay endpoint.
    const r1 = await generate(sim, { prompt: p1 }, 10);
    const r2 = await generate(sim, { prompt: p1 }, 10); // a repeat: nothing new to store
    expect(r2.output).toEqual(r1.output);

    const sub = subscribeEvents({
      endpoint: `tcp://127.0.0.1:${kvPort}`,
      topic: 'kv',
      replay: `tcp://127.0.0.1:${replayPort}`,
      from: 0,
      count: 10,
      timeoutS: 90,
    });
    await sub.ready;
    const r3 = await generate(sim, { prompt: p1, cacheSalt: 'tenant-a' }, 10);
    const r4 = await generate(sim, { prompt: p1, extraKey: 'x' }, 10);
    // 3 namespaces x 48 tokens cached; this one needs 120 of the 112 free: the LRU leaf goes.
    const evictedBefore = sim.server.engine.counters.evictedDeviceTokens;
    const r5 = await generate(sim, { prompt: ids(5000, 100) }, 20);
    const evicted = sim.server.engine.counters.evictedDeviceTokens - evictedBefore;
    expect(evicted).toBe(PAGE);
    expect((await postJson(`${sim.url}/flush_cache`, {})).status).toBe(200);
    const got = await sub.messages;

    const want = await treeEvents(PAGE, [
      { op: 'take' }, // the cache's construction
      ...requestOps(r1),
      ...requestOps(r2),
      ...requestOps(r3),
      ...requestOps(r4),
      ...requestOps(r5).flatMap((op) =>
        op.op === 'match' ? [op, { op: 'evict', tokens: evicted } as const] : [op],
      ),
      { op: 'reset' },
      { op: 'take' },
    ]);
    const wantBatches = want.filter((events) => events.length > 0);

    await sim.server.kvEvents?.flushed();
    expect(sim.server.kvEvents?.sentBatches).toBe(wantBatches.length);
    expect(got.map((m) => m.seq)).toEqual(ids(0, wantBatches.length));
    expect(got.map((m) => m.events)).toEqual(wantBatches);
    expect(got.every((m) => m.reencoded_equal && m.dp_rank === 0)).toBe(true);
    // seq 0-2 (startup, r1's two batches) went out before the subscription: replayed.
    expect(got.slice(0, 3).map((m) => m.via)).toEqual(['replay', 'replay', 'replay']);
    expect(got.some((m) => m.via === 'live')).toBe(true);
    expectShapes(got);
  });

  it('publishes LoadStat on the load socket, decoded by SGLang; idle, cached KV is not counted as used', async () => {
    const sub = subscribeEvents({
      endpoint: `tcp://127.0.0.1:${loadBase}`,
      kind: 'load',
      count: 4,
      timeoutS: 60,
    });
    await sub.ready;
    await generate(sim, { prompt: ids(7000, 20) }, 4);
    const got = await sub.messages;
    expect(got.every((m) => m.reencoded_equal)).toBe(true);
    expect(got.map((m) => m.seq - (got[0]?.seq ?? 0))).toEqual([0, 1, 2, 3]);
    for (const m of got) {
      expect(m.load).toMatchObject({
        max_total_num_tokens: MAX_TOTAL_TOKENS,
        attn_dp_rank: 0,
        max_running_requests: 256,
      });
    }
    // The last one is an idle heartbeat: the request's 16 cached tokens are evictable, so not "used".
    expect(got.at(-1)?.load).toMatchObject({
      num_running_reqs: 0,
      num_waiting_reqs: 0,
      num_tokens: 0,
      num_total_tokens: 0,
    });
    expect(sim.server.engine.tree.sizes().deviceSize).toBe(PAGE);
  });
});

/** The facts a reader of the stream relies on, stated once more in plain terms. */
function expectShapes(got: readonly DecodedMessage[]): void {
  const events = got.flatMap((m) => m.events ?? []);
  const stored = events.filter(
    (e): e is Extract<KvEventJson, { type: 'BlockStored' }> => e.type === 'BlockStored',
  );
  expect(events[0]).toEqual({ type: 'AllBlocksCleared' });
  expect(events.at(-1)).toEqual({ type: 'AllBlocksCleared' });
  expect(events.some((e) => e.type === 'BlockRemoved' && e.medium === 'GPU')).toBe(true);
  for (const e of stored) {
    expect(e.block_size).toBe(PAGE);
    expect(e.token_ids).toHaveLength(PAGE * e.block_hashes.length);
  }
  // The salted chain hashes differently; an extra_key alone does not change a hash.
  const roots = stored.filter((e) => e.parent_block_hash === null && e.token_ids[0] === 1000);
  const plain = roots.find((e) => e.cache_salt === undefined)?.block_hashes[0];
  const salted = roots.find((e) => e.cache_salt === 'tenant-a')?.block_hashes[0];
  expect(plain).toBeDefined();
  expect(salted).toBeDefined();
  expect(salted).not.toBe(plain);
  // r1 and the extra-keyed r4 (its own tree namespace) publish the same first block.
  expect(roots.filter((e) => e.cache_salt === undefined && e.block_hashes[0] === plain)).toHaveLength(2);
}
