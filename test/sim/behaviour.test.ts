// Cache, fault and prefill/decode behaviour through the HTTP API.

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseSimArgs } from './config.ts';
import { bootstrapPortOf, postJson, startSim, type RunningSim } from '../support/sim/testing.ts';

type Json = Record<string, unknown>;
const meta = (r: { json: unknown }): Json => (r.json as { meta_info: Json }).meta_info;
const ids = (from: number, n: number): number[] =>
  Array.from({ length: n }, (_, i) => 300 + ((from + i) % 30000));

async function withSim(argv: string[], fn: (s: RunningSim) => Promise<void>): Promise<void> {
  const s = await startSim(['--model-path', 'm', ...argv]);
  try {
    await fn(s);
  } finally {
    await s.close();
  }
}

const gen = (s: RunningSim, body: Json) =>
  postJson(`${s.url}/generate`, { sampling_params: { max_new_tokens: 1 }, ...body });

describe('cache behaviour', () => {
  it('hits after warm-up and isolates cache_salt / extra_key namespaces', () =>
    withSim([], async (s) => {
      const prompt = ids(0, 1000);
      expect(meta(await gen(s, { input_ids: prompt }))['cached_tokens']).toBe(0);
      expect(meta(await gen(s, { input_ids: prompt }))['cached_tokens']).toBe(999);
      expect(meta(await gen(s, { input_ids: prompt, cache_salt: 'tenant-a' }))['cached_tokens']).toBe(0);
      expect(meta(await gen(s, { input_ids: prompt, cache_salt: 'tenant-a' }))['cached_tokens']).toBe(999);
      expect(
        meta(await gen(s, { input_ids: prompt, cache_salt: 'tenant-a', extra_key: 'x' }))['cached_tokens'],
      ).toBe(0);
      expect(meta(await gen(s, { input_ids: prompt, cache_salt: 'tenant-b' }))['cached_tokens']).toBe(0);
    }));

  it('aligns hits to --page-size', () =>
    withSim(['--page-size', '64'], async (s) => {
      await gen(s, { input_ids: ids(0, 1000) });
      expect(meta(await gen(s, { input_ids: ids(0, 1000) }))['cached_tokens']).toBe(960);
    }));

  it('reuses nothing with --disable-radix-cache', () =>
    withSim(['--disable-radix-cache'], async (s) => {
      await gen(s, { input_ids: ids(0, 100) });
      expect(meta(await gen(s, { input_ids: ids(0, 100) }))['cached_tokens']).toBe(0);
    }));

  it('evicts at --max-total-tokens capacity (LRU)', () =>
    withSim(['--max-total-tokens', '3000'], async (s) => {
      await gen(s, { input_ids: ids(0, 1000) });
      await gen(s, { input_ids: ids(5000, 1000) });
      await gen(s, { input_ids: ids(10000, 1000) });
      await gen(s, { input_ids: ids(15000, 1000) }); // evicts the least recently used prompt
      expect(s.server.engine.tree.sizes().deviceSize).toBeLessThanOrEqual(3000);
      expect(meta(await gen(s, { input_ids: ids(0, 1000) }))['cached_tokens']).toBe(0);
      expect(meta(await gen(s, { input_ids: ids(15000, 1000) }))['cached_tokens']).toBe(999);
    }));

  it('serves evicted prefixes from the HiCache host tier, reported as host, faster than recompute', () =>
    withSim(
      ['--max-total-tokens', '3000', '--enable-hierarchical-cache', '--hicache-ratio', '2'],
      async (s) => {
        const cold = meta(await gen(s, { input_ids: ids(0, 1000) }));
        await gen(s, { input_ids: ids(5000, 1000) });
        await gen(s, { input_ids: ids(10000, 1000) });
        await gen(s, { input_ids: ids(15000, 1000) });
        const warm = meta(await gen(s, { input_ids: ids(0, 1000) }));
        expect(warm['cached_tokens']).toBe(999);
        expect((warm['cached_tokens_details'] as Json)['host']).toBeGreaterThan(0);
        expect(warm['e2e_latency'] as number).toBeLessThan((cold['e2e_latency'] as number) / 5);
      },
    ));
});

/** SGLang's lof policy with priority scheduling, one request running at a time. */
const LOF_ONE_AT_A_TIME = [
  '--max-running-requests',
  '1',
  '--enable-priority-scheduling',
  '--disable-priority-preemption',
  '--schedule-policy',
  'lof',
];

describe('timing through the API', () => {
  it('queues under overload: each request waits for the one ahead (max-running-requests 1)', () =>
    withSim(['--max-running-requests', '1'], async (s) => {
      s.clock.hold();
      const pending = [0, 1, 2].map((i) =>
        gen(s, { input_ids: ids(i * 1000, 800), sampling_params: { max_new_tokens: 10 } }),
      );
      await s.untilWaiting(3);
      s.clock.release();
      const lat = (await Promise.all(pending))
        .map((r) => meta(r)['e2e_latency'] as number)
        .sort((a, b) => a - b);
      const service = 800 / 8000 + 9 * 0.00635; // prefill + 9 decode steps
      expect(lat[0]!).toBeCloseTo(service, 6);
      expect(lat[1]!).toBeCloseTo(2 * service, 6);
      expect(lat[2]!).toBeCloseTo(3 * service, 6);
    }));

  it("orders the queue by each request's priority with --enable-priority-scheduling", () =>
    withSim(
      ['--max-running-requests', '1', '--enable-priority-scheduling', '--disable-priority-preemption'],
      async (s) => {
        s.clock.hold();
        const pending = [1, 5, 3].map((priority, i) =>
          gen(s, { input_ids: ids(i * 1000, 800), priority }).then((r) => ({
            priority,
            e2e: meta(r)['e2e_latency'] as number,
          })),
        );
        await s.untilWaiting(3);
        s.clock.release();
        const done = (await Promise.all(pending)).sort((a, b) => a.e2e - b.e2e);
        expect(done.map((d) => d.priority)).toEqual([5, 3, 1]);
      },
    ));

  it('orders by priority, then the longest max_new_tokens first with --schedule-policy lof', () =>
    withSim(LOF_ONE_AT_A_TIME, async (s) => {
      s.clock.hold();
      const asked = [
        { priority: 1, max: 5 },
        { priority: 5, max: 4 },
        { priority: 5, max: 9 },
        { priority: 1, max: 20 },
      ];
      const pending = asked.map(({ priority, max }, i) =>
        gen(s, { input_ids: ids(i * 1000, 800), priority, sampling_params: { max_new_tokens: max } }).then(
          (r) => ({ label: `${priority}/${max}`, e2e: meta(r)['e2e_latency'] as number }),
        ),
      );
      await s.untilWaiting(4);
      s.clock.release();
      const done = (await Promise.all(pending)).sort((a, b) => a.e2e - b.e2e);
      expect(done.map((d) => d.label)).toEqual(['5/9', '5/4', '1/20', '1/5']);
    }));

  // Regression: with lof and priority scheduling off, the simulator served the queue FCFS.
  it('orders by the longest max_new_tokens with --schedule-policy lof and priority scheduling off', () =>
    withSim(['--max-running-requests', '1', '--schedule-policy', 'lof'], async (s) => {
      s.clock.hold();
      const pending = [5, 20, 4, 9].map((max, i) =>
        gen(s, { input_ids: ids(i * 1000, 800), sampling_params: { max_new_tokens: max } }).then((r) => ({
          max,
          e2e: meta(r)['e2e_latency'] as number,
        })),
      );
      await s.untilWaiting(4);
      s.clock.release();
      const done = (await Promise.all(pending)).sort((a, b) => a.e2e - b.e2e);
      expect(done.map((d) => d.max)).toEqual([20, 9, 5, 4]);
    }));

  it("with lof, a chat request without max_tokens sorts as SGLang's scheduler clips it: the longest", () =>
    withSim(LOF_ONE_AT_A_TIME, async (s) => {
      s.clock.hold();
      // One request at a time (max-running-requests 1): the order they finish in is the queue's.
      const finished: string[] = [];
      const done = (name: string) => (): void => void finished.push(name);
      const first = gen(s, { input_ids: ids(0, 800), priority: 1, sampling_params: { max_new_tokens: 1 } });
      const generate = gen(s, {
        input_ids: ids(1000, 200),
        priority: 1,
        sampling_params: { max_new_tokens: 500 },
      }).then(done('generate 500'));
      const chat = postJson(`${s.url}/v1/chat/completions`, {
        model: 'm',
        priority: 1,
        messages: [{ role: 'user', content: 'hello there' }],
      }).then(done('chat without max_tokens'));
      await s.untilWaiting(3);
      s.clock.release();
      await Promise.all([first, generate, chat]);
      // SGLang: no max_tokens is 2^30, clipped to the context: longer than 500.
      expect(finished).toEqual(['chat without max_tokens', 'generate 500']);
    }));
});

describe('faults', () => {
  it('--sim-fail-first N fails the first N generations', () =>
    withSim(['--sim-fail-first', '2'], async (s) => {
      expect((await gen(s, { text: 'a' })).status).toBe(500);
      expect((await postJson(`${s.url}/v1/completions`, { prompt: 'a' })).status).toBe(500);
      expect((await gen(s, { text: 'a' })).status).toBe(200);
    }));

  it('--sim-unhealthy-for-ms answers 503 on health until that much model time passed', () =>
    withSim(['--sim-unhealthy-for-ms', '50'], async (s) => {
      expect((await fetch(`${s.url}/health`)).status).toBe(503);
      await gen(s, { text: 'a', sampling_params: { max_new_tokens: 10 } }); // ~57 ms of model time
      expect((await fetch(`${s.url}/health`)).status).toBe(200);
    }));

  it('--sim-latency-spike-ms delays every Nth request', () =>
    withSim(['--sim-latency-spike-ms', '500', '--sim-latency-spike-every', '2'], async (s) => {
      const a = meta(await gen(s, { text: 'a' }))['e2e_latency'] as number;
      const b = meta(await gen(s, { text: 'a' }))['e2e_latency'] as number;
      expect(a).toBeLessThan(0.01);
      expect(b).toBeGreaterThan(0.5);
    }));

  it('--sim-crash-after N crashes on request N+1', () =>
    withSim(['--sim-crash-after', '1'], async (s) => {
      expect((await gen(s, { text: 'a' })).status).toBe(200);
      await expect(gen(s, { text: 'a' })).rejects.toThrow();
      expect(s.crashes.count).toBe(1);
    }));

  it('--sim-hang never answers', () =>
    withSim(['--sim-hang'], async (s) => {
      const r = await fetch(`${s.url}/health`, { signal: AbortSignal.timeout(100) }).catch((e: unknown) => e);
      expect(r).toBeInstanceOf(Error);
    }));
});

describe('prefill/decode disaggregation', () => {
  it('decode completes once the prefill of the same room finished; refuses requests without bootstrap', async () => {
    const prefill = await startSim([
      '--model-path',
      'm',
      '--disaggregation-mode',
      'prefill',
      '--disaggregation-bootstrap-port',
      '0',
    ]);
    const bsPort = bootstrapPortOf(prefill);
    const decode = await startSim([
      '--model-path',
      'm',
      '--disaggregation-mode',
      'decode',
      '--sim-pd-timeout-ms',
      '2000',
    ]);
    try {
      const noBootstrap = await gen(decode, { text: 'a' });
      expect(noBootstrap.status).toBe(400);
      const req = {
        text: ' ba be',
        sampling_params: { max_new_tokens: 4 },
        bootstrap_host: '127.0.0.1',
        bootstrap_port: bsPort,
        bootstrap_room: 42,
      };
      const [p, d] = await Promise.all([gen(prefill, req), gen(decode, req)]);
      expect(p.status).toBe(200);
      expect(meta(p)['completion_tokens']).toBe(1);
      expect(d.status).toBe(200);
      expect(meta(d)['completion_tokens']).toBe(4);
      expect((await fetch(`${decode.url}/health`)).status).toBe(200); // fake bootstrap host 2.2.2.2
    } finally {
      await prefill.close();
      await decode.close();
    }
  });

  // Real SGLang (test/conformance/differential-pd.test.ts): the decode has no radix cache of its own,
  // and its answer reports the prefill's cached tokens, which arrive with the KV.
  it("a repeat through the pair: the decode reports the prefill's cached tokens as its own", async () => {
    const prefill = await startSim([
      '--model-path',
      'm',
      '--disaggregation-mode',
      'prefill',
      '--disaggregation-bootstrap-port',
      '0',
    ]);
    const bsPort = bootstrapPortOf(prefill);
    const decode = await startSim(['--model-path', 'm', '--disaggregation-mode', 'decode']);
    try {
      const through = async (room: number) => {
        const req = {
          text: ' ba be'.repeat(40),
          sampling_params: { max_new_tokens: 2 },
          bootstrap_host: '127.0.0.1',
          bootstrap_port: bsPort,
          bootstrap_room: room,
        };
        const [p, d] = await Promise.all([gen(prefill, req), gen(decode, req)]);
        return { prefill: meta(p), decode: meta(d) };
      };
      const first = await through(1);
      expect(first.decode['cached_tokens']).toBe(0);
      const again = await through(2);
      expect(again.prefill['cached_tokens']).toBeGreaterThan(0);
      expect(again.decode['cached_tokens']).toBe(again.prefill['cached_tokens']);
      expect(again.decode['cached_tokens_details']).toEqual(again.prefill['cached_tokens_details']);
    } finally {
      await prefill.close();
      await decode.close();
    }
  });

  it('decode aborts when no prefill arrives within the timeout', async () => {
    const prefill = await startSim([
      '--model-path',
      'm',
      '--disaggregation-mode',
      'prefill',
      '--disaggregation-bootstrap-port',
      '0',
    ]);
    const bsPort = bootstrapPortOf(prefill);
    const decode = await startSim([
      '--model-path',
      'm',
      '--disaggregation-mode',
      'decode',
      '--sim-pd-timeout-ms',
      '50',
    ]);
    try {
      const r = await gen(decode, {
        text: 'a',
        bootstrap_host: '127.0.0.1',
        bootstrap_port: bsPort,
        bootstrap_room: 7,
      });
      expect(r.status).toBe(500);
      // A non-stream abort with status 500 is an HTTPException: SGLang's ErrorResponse, type "500".
      expect(r.json).toMatchObject({ object: 'error', type: '500', code: 500 });
      expect((r.json as Json)['message']).toMatch(/KVTransferError\(bootstrap_room=7\)/);
    } finally {
      await prefill.close();
      await decode.close();
    }
  });

  it('HiSparse needs the radix cache off (SGLang 0.5.23 starts it standalone too)', () => {
    expect(parseSimArgs(['--model-path', 'm', '--enable-hisparse'])).toMatchObject({
      ok: false,
      error: 'Hierarchical sparse attention currently requires --disable-radix-cache.',
    });
    expect(parseSimArgs(['--model-path', 'm', '--enable-hisparse', '--disable-radix-cache']).ok).toBe(true);
  });

  // The bug this guards: warm-up sent room-less requests to prefill pods, which the
  // simulator served and a real disaggregated SGLang refuses.
  it.each([
    [['--disaggregation-mode', 'prefill']],
    [['--disaggregation-mode', 'decode']],
    [['--disaggregation-mode', 'decode', '--enable-hisparse', '--disable-radix-cache']],
  ])('%j refuses a request without a bootstrap room, as the scheduler does', (argv) =>
    withSim(argv, async (s) => {
      const r = await gen(s, { text: 'a', rid: 'r1' });
      expect(r.status).toBe(400);
      expect(((r.json as Json)['error'] as Json)['message']).toBe(
        "Invalid request: Disaggregated request received without bootstrap room id. req.rid='r1'",
      );
    }),
  );

  it('with the fake transfer backend a decode server serves a room-less request', () =>
    withSim(['--disaggregation-mode', 'decode', '--disaggregation-transfer-backend', 'fake'], async (s) => {
      expect((await gen(s, { text: 'a' })).status).toBe(200);
    }));

  it('computes but never caches a request with the fake bootstrap host (SGLang skips its radix insert)', () =>
    withSim(['--disaggregation-mode', 'prefill'], async (s) => {
      const prompt = ids(0, 300);
      const fake = { bootstrap_host: '2.2.2.2', bootstrap_port: 8998, bootstrap_room: 0 };
      expect((await gen(s, { input_ids: prompt, ...fake })).status).toBe(200);
      expect(meta(await gen(s, { input_ids: prompt, ...fake }))['cached_tokens']).toBe(0);
      const real = { bootstrap_host: '127.0.0.1', bootstrap_port: 8998, bootstrap_room: 7 };
      await gen(s, { input_ids: prompt, ...real });
      expect(meta(await gen(s, { input_ids: prompt, ...real, bootstrap_room: 8 }))['cached_tokens']).toBe(
        299,
      );
    }));
});

describe('launch flags', () => {
  it.each([
    [['--model-path', 'm', '--bogus'], 'unrecognized arguments: --bogus'],
    [['--model-path', 'm', '--sim-bogus', '1'], 'unrecognized arguments: --sim-bogus 1'],
    [
      ['--model-path', 'm', '--sim-time-scale', 'fast'],
      "argument --sim-time-scale: invalid float value: 'fast'",
    ],
    [
      ['--model-path', 'm', '--disaggregation-mode', 'both'],
      "argument --disaggregation-mode: invalid choice: 'both' (choose from 'null', 'prefill', 'decode')",
    ],
    [
      ['--model-path', 'm', '--enable-priority-scheduling'],
      'the simulator does not model priority preemption: pass --disable-priority-preemption with --enable-priority-scheduling',
    ],
    [
      ['--model-path', 'm', '--enable-priority-scheduling', '--schedule-policy', 'lpm'],
      "To use priority scheduling, schedule_policy must be 'fcfs' or 'lof'. 'lpm' is not supported.",
    ],
  ])('refuses %j', (argv, error) => {
    expect(parseSimArgs(argv)).toEqual({ ok: false, error });
  });

  it('exits 2 with an argparse-style message on an unknown flag (CLI)', () => {
    const main = fileURLToPath(new URL('./main.ts', import.meta.url));
    const r = spawnSync(process.execPath, [main, '--model-path', 'm', '--foo'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('launch_server.py: error: unrecognized arguments: --foo');
  });

  it('reports whatever identity its flags say', () =>
    withSim(['--served-model-name', 'other-model', '--revision', 'abc123'], async (s) => {
      const info = (await (await fetch(`${s.url}/server_info`)).json()) as Json;
      expect(info).toMatchObject({ model_path: 'm', served_model_name: 'other-model', revision: 'abc123' });
    }));
});

describe('--schedule-policy routing-key through the API', () => {
  // One request with key k decodes; two queue behind it, one slot free. SGLang reads the key from
  // /generate's routing_key and from the OpenAI routes' x-smg-routing-key header
  // (serving_base.extract_routing_key).
  it('admits the queued request whose key the running batch holds first, whatever the route', () =>
    withSim(['--max-running-requests', '2', '--schedule-policy', 'routing-key'], async (s) => {
      s.clock.hold();
      const anchor = gen(s, {
        input_ids: ids(0, 800),
        routing_key: 'k',
        sampling_params: { max_new_tokens: 100 },
      });
      await s.untilWaiting(1);
      s.clock.release();
      for (let i = 0; i < 100_000 && s.server.engine.snapshot().numRunningReqs < 1; i++)
        await new Promise((r) => setImmediate(r));
      s.clock.hold();
      const finished: string[] = [];
      const complete = (name: string, key: string, from: number) =>
        postJson(
          `${s.url}/v1/completions`,
          { model: 'm', prompt: ids(from, 800), max_tokens: 1 },
          { 'x-smg-routing-key': key },
        ).then(() => void finished.push(name));
      const queued = [complete('other key', 'other', 2000), complete('same key', 'k', 4000)];
      await s.untilWaiting(2);
      s.clock.release();
      await Promise.all([anchor, ...queued]);
      expect(finished).toEqual(['same key', 'other key']);
    }));
});
