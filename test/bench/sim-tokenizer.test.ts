import { afterEach, describe, expect, it } from 'vitest';
import { postJson, startSim, type RunningSim } from '../support/sim/testing.ts';
import { buildSimTokenizer } from './sim-tokenizer.ts';

let sim: RunningSim | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

const PAGE = 16;
const pageFloor = (n: number): number => n - (n % PAGE);

/** What the simulator reports cached for `/generate` with these ids (after one request warmed it). */
async function cachedFor(url: string, ids: readonly number[]): Promise<{ prompt: number; cached: number }> {
  const r = await postJson(`${url}/generate`, {
    input_ids: ids,
    sampling_params: { max_new_tokens: 1, temperature: 0 },
  });
  const meta = (r.json as { meta_info: { prompt_tokens: number; cached_tokens: number } }).meta_info;
  return { prompt: meta.prompt_tokens, cached: meta.cached_tokens };
}

describe('the simulator tokenizer as the gateway sees it', () => {
  it('encodes a chat as the simulator does: its ids hit exactly what the chat cached', async () => {
    sim = await startSim(['--model-path', 'm', '--page-size', String(PAGE), '--enable-cache-report']);
    const messages = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: ' ba ko zu mi, 42 <x>' }] },
    ];
    const chat = await postJson(`${sim.url}/v1/chat/completions`, {
      model: 'm',
      messages,
      max_tokens: 1,
    });
    const usage = (chat.json as { usage: { prompt_tokens: number } }).usage;
    const ids = await buildSimTokenizer().encodeChat(messages);
    if (!ids.ok) throw new Error(ids.error.message);
    expect(ids.value).toHaveLength(usage.prompt_tokens);
    // Identical ids: the whole prompt but the last token is a page-granular hit.
    const again = await cachedFor(sim.url, ids.value);
    expect(again).toEqual({ prompt: ids.value.length, cached: pageFloor(ids.value.length - 1) });
    // One id off at the start: nothing matches (a wrong template would look like this).
    const shifted = await cachedFor(sim.url, [0, ...ids.value]);
    expect(shifted.cached).toBe(0);
  });

  it('encodes text as the simulator does', async () => {
    sim = await startSim(['--model-path', 'm', '--enable-cache-report']);
    const text = ' ba be bi'.repeat(20);
    const r = await postJson(`${sim.url}/generate`, {
      text,
      sampling_params: { max_new_tokens: 1, temperature: 0 },
    });
    const meta = (r.json as { meta_info: { prompt_tokens: number } }).meta_info;
    const ids = await buildSimTokenizer().encodeText(text);
    expect(ids).toHaveLength(meta.prompt_tokens);
    expect((await cachedFor(sim.url, ids)).cached).toBe(ids.length - 1);
  });
});
