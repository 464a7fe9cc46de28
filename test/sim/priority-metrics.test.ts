// With --enable-priority-scheduling SGLang 0.5.23 writes every scheduler series with a
// `priority` label (the totals under priority="") and the running and waiting counts, and a
// PD part's own queues (a prefill's bootstrap and inflight, a decode's prealloc and transfer),
// once more per priority (observability/metrics_collector.py: SchedulerMetricsCollector.init_new,
// _log_gauge_queue_count, QueueCount.from_reqs); the tokenizer's series carry each request's
// priority (tokenizer_manager.collect_metrics). Held to the real server by
// test/conformance/differential.test.ts.

import { afterEach, describe, expect, it } from 'vitest';
import { parseRuntimeMetrics } from '../../gateway/src/endpoints/runtime-load.ts';
import { bootstrapPortOf, postJson, startSim, type RunningSim } from '../support/sim/testing.ts';

const PRIORITY_ARGS = [
  '--model-path',
  'm',
  '--served-model-name',
  'served',
  '--enable-metrics',
  '--max-running-requests',
  '1',
  '--enable-priority-scheduling',
  '--disable-priority-preemption',
];
const SCHEDULER = 'model_name="served",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"';
const LAST_OF_ALL = '-9223372036854775808';

function ids(seed: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => 5 + ((seed * 131 + i * 7) % 400));
}

let sim: RunningSim | undefined;
let peer: RunningSim | undefined;
afterEach(async () => {
  await Promise.all([sim?.close(), peer?.close()]);
  sim = peer = undefined;
});

/** Four requests held waiting in the engine (its clock stopped): priorities 7, 7, 3 and none. */
async function holdFour(s: RunningSim): Promise<Promise<unknown>[]> {
  s.clock.hold();
  const pending = [7, 7, 3, undefined].map((priority, i) =>
    postJson(`${s.url}/generate`, {
      input_ids: ids(i, 64),
      sampling_params: { max_new_tokens: 2 },
      ...(priority === undefined ? {} : { priority }),
    }),
  );
  await s.untilWaiting(4);
  return pending;
}

/** Served four held requests to the end: the first prefill reports the other three waiting. */
async function serveFour(s: RunningSim): Promise<void> {
  const pending = await holdFour(s);
  s.clock.release();
  await Promise.all(pending);
}

describe('/metrics with priority scheduling', () => {
  it('writes each queue gauge as its total under priority="" and a count per known priority', async () => {
    sim = await startSim(PRIORITY_ARGS);
    await serveFour(sim);
    const pending = await holdFour(sim);
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    const samples = (name: string): string[] =>
      text.split('\n').filter((l) => l.startsWith(`sglang:${name}{`));
    expect(samples('num_queue_reqs').sort()).toEqual(
      [
        `sglang:num_queue_reqs{${SCHEDULER},priority=""} 4`,
        `sglang:num_queue_reqs{${SCHEDULER},priority="7"} 2`,
        `sglang:num_queue_reqs{${SCHEDULER},priority="3"} 1`,
        `sglang:num_queue_reqs{${SCHEDULER},priority="${LAST_OF_ALL}"} 1`,
      ].sort(),
    );
    expect(samples('num_running_reqs')).toContain(`sglang:num_running_reqs{${SCHEDULER},priority="7"} 0`);
    // Every other scheduler series carries the label, empty.
    expect(samples('token_usage')).toEqual([
      expect.stringMatching(`^sglang:token_usage\\{${SCHEDULER},priority=""\\} `),
    ]);
    sim.clock.release();
    await Promise.all(pending);
  });

  it('keeps a priority its stats have seen at 0 once its requests are gone', async () => {
    sim = await startSim(PRIORITY_ARGS);
    await serveFour(sim);
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    expect(text).toContain(`sglang:num_queue_reqs{${SCHEDULER},priority="3"} 0\n`);
  });

  it('never breaks down a priority whose requests ran alone: no stats report saw them', async () => {
    sim = await startSim(PRIORITY_ARGS);
    const alone = { input_ids: ids(9, 64), sampling_params: { max_new_tokens: 2 }, priority: 9 };
    expect((await postJson(`${sim.url}/generate`, alone)).status).toBe(200);
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    expect(text).not.toMatch(/^sglang:num_(queue|running)_reqs\{[^}]*priority="9"/m);
    expect(text).toContain('priority="9",is_streaming="false"'); // the tokenizer's series have it
  });

  it('learns the priority of a request running alone at every --decode-log-interval decode batches', async () => {
    sim = await startSim([...PRIORITY_ARGS, '--decode-log-interval', '2']);
    const alone = { input_ids: ids(9, 64), sampling_params: { max_new_tokens: 4 }, priority: 9 };
    expect((await postJson(`${sim.url}/generate`, alone)).status).toBe(200);
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    expect(text).toContain(`sglang:num_running_reqs{${SCHEDULER},priority="9"} 0\n`);
  });

  it('labels the tokenizer\'s series with the request\'s priority, "" for a request without one', async () => {
    sim = await startSim(PRIORITY_ARGS);
    await serveFour(sim);
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    const tokenizer = 'model_name="served",engine_type="unified"';
    for (const [p, n] of [
      ['7', 2],
      ['3', 1],
      ['', 1],
    ] as const)
      expect(text).toContain(
        `sglang:num_requests_total{${tokenizer},priority="${p}",is_streaming="false"} ${n}\n`,
      );
  });

  it("gives the gateway's load scrape the queue once, not once more per priority", async () => {
    sim = await startSim(PRIORITY_ARGS);
    await serveFour(sim);
    const pending = await holdFour(sim);
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    expect(parseRuntimeMetrics(text)).toMatchObject({ queued: 4 });
    sim.clock.release();
    await Promise.all(pending);
  });
});

/** The samples of one family in a /metrics text. */
async function samplesOf(s: RunningSim, name: string): Promise<string[]> {
  const text = await (await fetch(`${s.url}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(`sglang:${name}{`))
    .sort();
}

const PREFILL = ['--disaggregation-mode', 'prefill', '--disaggregation-bootstrap-port', '0'];

describe("/metrics with priority scheduling: the PD queues' gauges", () => {
  /** A gauge's samples should be one per `priority` label value ("" the total) with these counts. */
  const expectGauge = async (
    s: RunningSim,
    name: string,
    engineType: string,
    byLabel: Readonly<Record<string, number>>,
  ): Promise<void> => {
    const labels = SCHEDULER.replace('unified', engineType);
    const want = Object.entries(byLabel).map(([p, n]) => `sglang:${name}{${labels},priority="${p}"} ${n}`);
    expect(await samplesOf(s, name)).toEqual(want.sort());
  };

  /** Requests of these priorities to a PD part, bootstrapped by `bootstrapPort`, one room each. */
  const sendPd = (s: RunningSim, bootstrapPort: number, priorities: readonly number[], room: number) =>
    priorities.map((priority, i) =>
      postJson(`${s.url}/generate`, {
        input_ids: ids(room + i, 64),
        sampling_params: { max_new_tokens: 2 },
        priority,
        bootstrap_host: '127.0.0.1',
        bootstrap_port: bootstrapPort,
        bootstrap_room: room + i,
      }),
    );

  // Regression: the simulator wrote only the totals of the PD queue gauges.
  it("breaks down a prefill's bootstrap and inflight queues per known priority, the decode's not", async () => {
    sim = await startSim([...PRIORITY_ARGS, ...PREFILL]);
    const port = bootstrapPortOf(sim);
    sim.clock.hold();
    const served = sendPd(sim, port, [7, 7, 3], 100);
    await sim.untilWaiting(3);
    sim.clock.release();
    await Promise.all(served);
    sim.clock.hold();
    const held = sendPd(sim, port, [7, 3, 3], 200);
    await sim.untilWaiting(3);
    await expectGauge(sim, 'num_prefill_inflight_queue_reqs', 'prefill', { '': 3, 7: 1, 3: 2 });
    await expectGauge(sim, 'num_prefill_bootstrap_queue_reqs', 'prefill', { '': 0, 7: 0, 3: 0 });
    // A prefill's report leaves the decode's QueueCounts empty (by_priority None): the total only.
    await expectGauge(sim, 'num_decode_transfer_queue_reqs', 'prefill', { '': 0 });
    sim.clock.release();
    await Promise.all(held);
  });

  it("breaks down a decode's prealloc and transfer queues, learning a priority waiting for its KV", async () => {
    peer = await startSim([...PRIORITY_ARGS, ...PREFILL]);
    sim = await startSim([...PRIORITY_ARGS, '--disaggregation-mode', 'decode', '--decode-log-interval', '1']);
    const port = bootstrapPortOf(peer);
    // Waits in the transfer queue: its room's prefill is sent only at the end.
    const [waiting] = sendPd(sim, port, [4], 300);
    // Decodes meanwhile (the fake bootstrap host waits for no prefill): its reports see priority 4.
    const decoded = await postJson(`${sim.url}/generate`, {
      input_ids: ids(1, 64),
      sampling_params: { max_new_tokens: 3 },
      priority: 2,
      bootstrap_host: '2.2.2.2',
      bootstrap_port: port,
      bootstrap_room: 1,
    });
    expect(decoded.status).toBe(200);
    await expectGauge(sim, 'num_decode_transfer_queue_reqs', 'decode', { '': 1, 4: 1, 2: 0 });
    await expectGauge(sim, 'num_decode_prealloc_queue_reqs', 'decode', { '': 0, 4: 0, 2: 0 });
    await expectGauge(sim, 'num_prefill_inflight_queue_reqs', 'decode', { '': 0 });
    await Promise.all([...sendPd(peer, port, [4], 300), waiting]);
  });
});

describe('/metrics without priority scheduling', () => {
  it('writes no priority label', async () => {
    sim = await startSim(PRIORITY_ARGS.slice(0, PRIORITY_ARGS.indexOf('--enable-priority-scheduling')));
    await serveFour(sim);
    expect(await (await fetch(`${sim.url}/metrics`)).text()).not.toContain('priority=');
  });
});
