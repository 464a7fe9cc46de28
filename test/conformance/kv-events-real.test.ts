// The simulator's KV event stream next to the real SGLang 0.5.23 server's
// (on CPU, `kit serve`), for the same requests: each stream equals what
// SGLang's own radix cache records for that server's requests (so the
// scheduler model in kv-events.test.ts holds on the real server), and the two
// streams agree wherever the model's own output does not enter: every batch
// but the stores of generated tokens.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withFreshPorts } from '../support/fresh-ports.ts';
import { kvEventsConfigArgs } from '../support/kv-events-config.ts';
import { portOf, postJson, startSimWithKvEvents, type RunningSim } from '../support/sim/testing.ts';
import { startRealSglang, type RealSglang } from '../support/real-sglang.ts';
import { openKitSession, type KitSession } from '../support/sglang-kit-session.ts';
import {
  drainReplay,
  subscribeEvents,
  treeEvents,
  type DecodedMessage,
  type Subscription,
  type TreeOp,
} from '../support/sglang-kit-events.ts';

const PAGE = 16;
// Inside the tiny model's vocabulary (512), so both servers take the same ids.
const PROMPT = Array.from({ length: 40 }, (_, i) => 100 + i);

// One kit process for the file: SGLang's tree is asked a dozen times and its stream decoded
// four, each a fresh tree or decoder as from `kit.sh`, without a Python start and import each.
let kit: KitSession;
beforeAll(() => {
  kit = openKitSession();
});
afterAll(async () => {
  await kit?.close();
});

interface Server {
  readonly url: string;
  readonly kvPort: number;
  readonly replayPort: number;
}

interface Sent {
  readonly prompt: readonly number[];
  readonly output: readonly number[];
  readonly ns: { cache_salt?: string; extra_key?: string };
}

/** SGLang's flags for KV events on `kvPort` and `replayPort`. */
function kvArgs(kvPort: number, replayPort: number, extra: readonly string[] = []): string[] {
  return ['--page-size', String(PAGE), ...extra, ...kvEventsConfigArgs({ kv: kvPort, replay: replayPort })];
}

/**
 * The real server publishing KV events. SGLang says nothing of event ports bound on 0: ports
 * free now, again if one was lost (fresh-ports.ts).
 */
function startRealWithEvents(
  extra: readonly string[] = [],
): Promise<{ real: RealSglang; kvPort: number; replayPort: number }> {
  return withFreshPorts(
    2,
    async ([kvPort = 0, replayPort = 0]) => ({
      real: await startRealSglang({ args: [...kvArgs(kvPort, replayPort, extra), '--skip-server-warmup'] }),
      kvPort,
      replayPort,
    }),
    { what: 'sglang (KV events)' },
  );
}

/** The simulator publishing KV events: placeholder ports, bound on ones the kernel picks, read back. */
async function startSimWithEvents(
  extra: readonly string[] = [],
): Promise<{ sim: RunningSim; kvPort: number; replayPort: number }> {
  const sim = await startSimWithKvEvents(['--model-path', 'm', '--page-size', String(PAGE), ...extra]);
  return { sim, kvPort: portOf(sim.kv), replayPort: portOf(sim.replay) };
}

/**
 * A repeat, a salted and an extra-keyed request, then a flush, each sent once the server has
 * published what the one before recorded. SGLang publishes at its next stats log or idle pass,
 * so a request sent before that pass lands in the same batch as the step before it (seen on a
 * loaded machine: a request's finishing store and the next one's prompt store in one batch).
 * The batches SGLang's own tree takes for the steps so far are what the stream must reach.
 */
async function runSequence(server: Server): Promise<Sent[]> {
  const stream = subscribeEvents({
    endpoint: `tcp://127.0.0.1:${server.kvPort}`,
    replay: `tcp://127.0.0.1:${server.replayPort}`,
    topic: 'kv',
    count: 10_000,
    timeoutS: 900,
  });
  // Stopped below, before its count: that end is not a failure here.
  stream.messages.catch(() => undefined);
  try {
    await stream.ready;
    const sent: Sent[] = [];
    for (const ns of [{}, {}, { cache_salt: 'tenant-a' }, { extra_key: 'x' }]) {
      const r = await postJson(`${server.url}/generate`, {
        input_ids: PROMPT,
        sampling_params: { max_new_tokens: 10, temperature: 0, ignore_eos: true },
        ...ns,
      });
      expect(r.status).toBe(200);
      sent.push({ prompt: PROMPT, output: (r.json as { output_ids: number[] }).output_ids, ns });
      await untilPublished(server, stream, scheduleOps(sent, { flushed: false }));
    }
    expect((await postJson(`${server.url}/flush_cache`, {})).status).toBe(200);
    await untilPublished(server, stream, scheduleOps(sent, { flushed: true }));
    return sent;
  } finally {
    stream.stop();
  }
}

/** Waits until `stream` holds as many batches as SGLang's tree takes for `ops`. */
async function untilPublished(server: Server, stream: Subscription, ops: readonly TreeOp[]): Promise<void> {
  const want = (await treeEvents(PAGE, ops, kit.run)).filter((b) => b.length > 0).length;
  const deadline = Date.now() + 60_000;
  while (stream.received() < want) {
    if (Date.now() > deadline)
      throw new Error(
        `${server.url} published ${stream.received()} KV event batches in 60 s; SGLang's tree takes ${want}`,
      );
    await new Promise((r) => setTimeout(r, 50));
  }
}

function scheduleOps(sent: readonly Sent[], opts: { readonly flushed: boolean }): TreeOp[] {
  return [
    { op: 'take' },
    ...sent.flatMap((s): TreeOp[] => [
      { op: 'match', tokens: s.prompt.slice(0, -1), ...s.ns },
      { op: 'insert', tokens: s.prompt, ...s.ns },
      { op: 'take' },
      { op: 'insert', tokens: [...s.prompt, ...s.output.slice(0, -1)], ...s.ns },
      { op: 'take' },
    ]),
    ...(opts.flushed ? [{ op: 'reset' } as const, { op: 'take' } as const] : []),
  ];
}

async function streamOf(server: Server): Promise<DecodedMessage[]> {
  // Everything since start-up, from the replay buffer: the publisher keeps 10,000 batches.
  return drainReplay(
    {
      endpoint: `tcp://127.0.0.1:${server.kvPort}`,
      replay: `tcp://127.0.0.1:${server.replayPort}`,
      topic: 'kv',
    },
    kit.run,
  );
}

describe('KV events: the simulator next to the real SGLang server', () => {
  let real: RealSglang;
  let realServer: Server;
  let sim: RunningSim;
  let simServer: Server;

  beforeAll(async () => {
    const r = await startRealWithEvents();
    real = r.real;
    realServer = { url: real.url, kvPort: r.kvPort, replayPort: r.replayPort };
    const s = await startSimWithEvents();
    sim = s.sim;
    simServer = { url: sim.url, kvPort: s.kvPort, replayPort: s.replayPort };
  });

  afterAll(async () => {
    await sim?.close();
    await real?.stop();
  });

  it('advertises the same kv_events block, but for the ports', async () => {
    const info = async (url: string): Promise<Record<string, unknown>> =>
      ((await fetch(`${url}/server_info`).then((r) => r.json())) as { kv_events: Record<string, unknown> })
        .kv_events;
    const [fromReal, fromSim] = [await info(real.url), await info(sim.url)];
    const withoutPorts = ({
      endpoint_port_base: _e,
      replay_endpoint_port_base: _r,
      ...rest
    }: Record<string, unknown>): Record<string, unknown> => rest;
    expect(withoutPorts(fromSim)).toEqual(withoutPorts(fromReal));
    expect(fromReal).toMatchObject({
      endpoint_port_base: realServer.kvPort,
      replay_endpoint_port_base: realServer.replayPort,
    });
  });

  it('publish what SGLang records for their own requests, and the same batches up to generated tokens', async () => {
    const realSent = await runSequence(realServer);
    const simSent = await runSequence(simServer);
    const [realStream, simStream] = [await streamOf(realServer), await streamOf(simServer)];
    const [realWant, simWant] = [
      await treeEvents(PAGE, scheduleOps(realSent, { flushed: true }), kit.run),
      await treeEvents(PAGE, scheduleOps(simSent, { flushed: true }), kit.run),
    ];
    const batches = (stream: DecodedMessage[]) => stream.map((m) => m.events);
    expect(batches(realStream)).toEqual(realWant.filter((b) => b.length > 0));
    expect(batches(simStream)).toEqual(simWant.filter((b) => b.length > 0));
    expect(realStream.every((m) => m.reencoded_equal)).toBe(true);

    // Where generated tokens do not enter (start-up, prompt stores, the flush), the streams are equal.
    expect(simStream.map((m) => m.seq)).toEqual(realStream.map((m) => m.seq));
    const promptOnly = (stream: DecodedMessage[]) =>
      batches(stream).filter((events) =>
        (events ?? []).every((e) => e.type !== 'BlockStored' || e.token_ids.every((t) => PROMPT.includes(t))),
      );
    expect(promptOnly(simStream)).toEqual(promptOnly(realStream));
    expect(promptOnly(realStream).length).toBeGreaterThanOrEqual(5);
  });
});

describe('KV events with eviction and the HiCache host tier: the simulator and the real server', () => {
  // 512 device tokens hold two 192-token prompts; a host tier twice that keeps what is evicted.
  const flags = ['--max-total-tokens', '512', '--enable-hierarchical-cache', '--hicache-ratio', '2'];
  const prompt = (from: number): number[] => Array.from({ length: 200 }, (_, i) => from + i);
  // A, B, A again, C (B goes to the host), B (loaded back; A goes), A (loaded back; C goes).
  const sequence = [prompt(10), prompt(50), prompt(10), prompt(30), prompt(50), prompt(10)];

  async function run(url: string): Promise<unknown[]> {
    const details: unknown[] = [];
    for (const input_ids of sequence) {
      const r = await postJson(`${url}/generate`, {
        input_ids,
        // 4 new tokens never fill a page: every stored block is the prompt's, whatever the model says.
        sampling_params: { max_new_tokens: 4, temperature: 0, ignore_eos: true },
      });
      expect(r.status).toBe(200);
      details.push(
        (r.json as { meta_info: { cached_tokens_details: unknown } }).meta_info.cached_tokens_details,
      );
    }
    return details;
  }

  it('publish the same events: write-through copies a pass later, GPU removals, load-backs', async () => {
    const r = await startRealWithEvents(flags);
    const realServer = r.real;
    let realDetails: unknown[];
    let realStream: DecodedMessage[];
    try {
      realDetails = await run(realServer.url);
      realStream = await streamOf({ url: realServer.url, kvPort: r.kvPort, replayPort: r.replayPort });
    } finally {
      await realServer.stop();
    }
    const s = await startSimWithEvents(flags);
    const simServer = s.sim;
    let simDetails: unknown[];
    let simStream: DecodedMessage[];
    try {
      simDetails = await run(simServer.url);
      simStream = await streamOf({ url: simServer.url, kvPort: s.kvPort, replayPort: s.replayPort });
    } finally {
      await simServer.close();
    }
    expect(simDetails).toEqual(realDetails);
    // Event for event. Batch boundaries around a write-through copy depend on timing on the real
    // server (its acknowledgement goes out at whichever publish point comes next: an idle pass or
    // the next request's prefill), so the batches are compared flattened.
    const flat = (stream: DecodedMessage[]) => stream.flatMap((m) => m.events ?? []);
    expect(flat(simStream)).toEqual(flat(realStream));
    // What does not depend on timing: a block's host copy is never in the batch that stored it on the device.
    const copiedInSameBatch = (stream: DecodedMessage[]) =>
      stream.some((m) => {
        const stores = (m.events ?? []).flatMap((e) =>
          e.type === 'BlockStored' ? e.block_hashes.map((h) => `${e.medium}:${h}`) : [],
        );
        return stores.some((k) => k.startsWith('GPU:') && stores.includes(`CPU_PINNED:${k.slice(4)}`));
      });
    expect(copiedInSameBatch(realStream)).toBe(false);
    expect(copiedInSameBatch(simStream)).toBe(false);
    const media = realStream.flatMap((m) => (m.events ?? []).map((e) => ('medium' in e ? e.medium : e.type)));
    expect(new Set(media)).toEqual(new Set(['AllBlocksCleared', 'GPU', 'CPU_PINNED']));
  });
});

describe('Load events: the simulator and the real server', () => {
  it('report the same idle LoadStat after the same request, on the advertised load port', async () => {
    const flags = [
      '--max-total-tokens',
      '8192',
      '--max-running-requests',
      '16',
      '--load-publish-endpoint',
      'auto',
    ];
    type Started = { url: string; kvPort: number; stop(): Promise<unknown> };
    const idleStat = async (start: (extra: string[]) => Promise<Started>, packed: boolean) => {
      const server = await start(flags);
      try {
        const info = (await fetch(`${server.url}/server_info`).then((r) => r.json())) as {
          kv_events: { load_endpoint_port_base: number };
        };
        const loadPort = info.kv_events.load_endpoint_port_base;
        // auto packs the load range after the KV and replay ranges (the simulator's ports are the kernel's picks).
        if (packed) expect(loadPort).toBeGreaterThan(server.kvPort);
        const sub = subscribeEvents({
          endpoint: `tcp://127.0.0.1:${loadPort}`,
          kind: 'load',
          count: 6,
          timeoutS: 90,
        });
        await sub.ready;
        const r = await postJson(`${server.url}/generate`, {
          input_ids: PROMPT,
          sampling_params: { max_new_tokens: 30, temperature: 0, ignore_eos: true },
        });
        expect(r.status).toBe(200);
        const got = await sub.messages;
        expect(got.every((m) => m.reencoded_equal)).toBe(true);
        const { total_prefill_busy_us: _busy, ...last } = got.at(-1)?.load ?? {};
        return last;
      } finally {
        await server.stop();
      }
    };
    const real = await idleStat(async (extra) => {
      const r = await startRealWithEvents(extra);
      return { url: r.real.url, kvPort: r.kvPort, stop: () => r.real.stop() };
    }, true);
    const sim = await idleStat(async (extra) => {
      const s = await startSimWithEvents(extra);
      return { url: s.sim.url, kvPort: s.kvPort, stop: () => s.sim.close() };
    }, false);
    expect(sim).toEqual(real);
    expect(real).toMatchObject({ num_running_reqs: 0, num_tokens: 0, total_prefill_uncached_tokens: 40n });
  });
});
