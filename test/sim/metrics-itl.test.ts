// SGLang observes an inter-token latency only from a request's second output to the tokenizer:
// every token when it streams, every SGLANG_FORCE_STREAM_INTERVAL (50) tokens when it does not
// (output_streamer.accept, tokenizer_manager.collect_metrics). Seen on the real server by
// test/conformance/differential.test.ts: short non-streamed requests leave no series.

import { afterEach, expect, it } from 'vitest';
import { postJson, postSse, startSim, type RunningSim } from '../support/sim/testing.ts';

const ARGS = ['--model-path', 'm', '--enable-metrics'];
const ITL_COUNT = /^sglang:inter_token_latency_seconds_count\{[^}]*\} (\S+)$/m;

let sim: RunningSim | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function itlCount(s: RunningSim): Promise<number> {
  const text = await (await fetch(`${s.url}/metrics`)).text();
  return Number(ITL_COUNT.exec(text)?.[1] ?? 0);
}

it('observes no inter-token latency for a request of 50 tokens or fewer that does not stream', async () => {
  sim = await startSim(ARGS);
  const body = (n: number) => ({ text: 'hello', sampling_params: { max_new_tokens: n, ignore_eos: true } });
  await postJson(`${sim.url}/generate`, body(8));
  await postJson(`${sim.url}/generate`, body(50));
  expect(await itlCount(sim)).toBe(0);
  await postJson(`${sim.url}/generate`, body(51));
  expect(await itlCount(sim)).toBeGreaterThan(0);
});

it('observes it for a streamed request of two tokens', async () => {
  sim = await startSim(ARGS);
  await postSse(`${sim.url}/generate`, {
    text: 'hello',
    stream: true,
    sampling_params: { max_new_tokens: 2, ignore_eos: true },
  });
  expect(await itlCount(sim)).toBeGreaterThan(0);
});
