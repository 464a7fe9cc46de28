import { describe, expect, it } from 'vitest';
import { requestUsageEvent, UsageEventFilter } from './strip-usage.ts';

const ev = (json: object): string => `data: ${JSON.stringify(json)}\n\n`;
const content = ev({ id: 'c', choices: [{ index: 0, delta: { content: 'hi' } }] });
const usage = ev({
  id: 'c',
  choices: [],
  usage: { prompt_tokens: 9, prompt_tokens_details: { cached_tokens: 8 } },
});
const done = 'data: [DONE]\n\n';

function run(chunks: string[]): string {
  const f = new UsageEventFilter();
  const enc = new TextEncoder();
  const dec = new TextDecoder();
  return chunks.map((c) => dec.decode(f.push(enc.encode(c)))).join('') + dec.decode(f.flush());
}

describe('requestUsageEvent', () => {
  it('asks for usage when the client did not, keeping its other stream options', () => {
    const body: Record<string, unknown> = { stream: true, stream_options: { continuous_usage_stats: false } };
    expect(requestUsageEvent(body)).toBe(true);
    expect(body['stream_options']).toEqual({ continuous_usage_stats: false, include_usage: true });
  });

  it('leaves a client that asked for usage alone', () => {
    const body: Record<string, unknown> = { stream: true, stream_options: { include_usage: true } };
    expect(requestUsageEvent(body)).toBe(false);
  });
});

describe('UsageEventFilter', () => {
  it('drops the usage-only event and passes every other event unchanged', () => {
    expect(run([content, content, usage, done])).toBe(content + content + done);
  });

  it('reassembles events split across chunks, at any byte', () => {
    const whole = content + usage + done;
    for (let cut = 1; cut < whole.length; cut += 7)
      expect(run([whole.slice(0, cut), whole.slice(cut)])).toBe(content + done);
  });

  it('keeps an event that carries usage beside choices (the client asked for nothing else)', () => {
    const both = ev({ id: 'c', choices: [{ index: 0, delta: {} }], usage: { prompt_tokens: 1 } });
    expect(run([both, done])).toBe(both + done);
  });

  it('keeps a trailing event without its blank line', () => {
    expect(run([content, 'data: [DONE]'])).toBe(`${content}data: [DONE]`);
  });
});
