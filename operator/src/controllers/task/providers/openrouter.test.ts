import { describe, expect, it } from 'vitest';
import type { GenerateCall } from '../attempt/call.ts';
import { scrub } from './http.ts';
import { buildOpenRouterBody, normalizeProviderName } from './openrouter.ts';

const call: GenerateCall = {
  attempt: 1,
  target: {
    provider: 'openrouter',
    identity: {
      provider: 'openrouter',
      baseUrl: 'http://x/api/v1',
      model: 'openai/gpt-4.1-mini',
      upstreamProvider: 'google-vertex',
      cacheWriteUsage: 'required',
      inputTokenUpperBound: 10,
    },
  },
  prepared: { kind: 'messages', messages: [{ role: 'user', content: 'hi' }] },
  maxNewTokens: 5,
  sampling: { temperature: 0.2, topP: 0.9, stop: ['\n'] },
  budget: { maxInputTokens: 10, currency: 'USD' },
  spent: 0n,
};

describe('normalizeProviderName', () => {
  it.each([
    ['OpenAI', 'openai', true],
    ['Google Vertex', 'google-vertex', true],
    ['DeepInfra', 'deepinfra', true],
    ['Azure', 'openai', false],
    ['Google Vertex (Europe)', 'google-vertex', false],
    ['', 'openai', false],
  ])('%s ~ %s: %s', (display, slug, same) => {
    expect(normalizeProviderName(display) === normalizeProviderName(slug)).toBe(same);
  });
});

describe('buildOpenRouterBody', () => {
  it('pins one provider, one model, no fallbacks, no tools, a zero request fee', () => {
    const body = buildOpenRouterBody(call);
    expect(body).toEqual({
      model: 'openai/gpt-4.1-mini',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 5,
      temperature: 0.2,
      top_p: 0.9,
      stop: ['\n'],
      stream: false,
      provider: {
        only: ['google-vertex'],
        order: ['google-vertex'],
        allow_fallbacks: false,
        require_parameters: true,
        max_price: { request: 0 },
      },
      usage: { include: true },
    });
    for (const k of ['models', 'tools', 'tool_choice', 'route', 'transforms'])
      expect(body).not.toHaveProperty(k);
  });
});

describe('scrub', () => {
  it('removes every secret occurrence', () => {
    expect(scrub('a KEY b KEY', ['KEY'])).toBe('a [redacted] b [redacted]');
    expect(scrub('nothing', [''])).toBe('nothing');
  });
});
