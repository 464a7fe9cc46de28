import { describe, expect, it } from 'vitest';
import { readChatBody } from './chat-body.ts';
import { ChatBody, parseBody } from './shape.ts';

const user = { role: 'user', content: 'hi' };
const base = { model: 'm', messages: [user] };

// Bodies clients send, which the hand reading takes.
const TAKEN: Record<string, unknown> = {
  minimal: base,
  sampling: { ...base, n: 2, stream: true, temperature: 0.7, seed: 42, cache_salt: 's', max_tokens: 8 },
  temperatureBounds: { ...base, temperature: 100 },
  parts: {
    model: 'm',
    messages: [
      { role: 'system', content: null },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'a' },
          { type: 'image_url', image_url: { url: 'x' } },
        ],
      },
      { role: 'assistant', tool_calls: [] },
      { role: 'tool', content: 'r', tool_call_id: 7 },
    ],
  },
  extraFields: { ...base, chat_template_kwargs: { enable_thinking: false }, tools: [{ type: 'function' }] },
};

// Bodies the schema refuses or must name: the hand reading leaves each to it.
const LEFT: Record<string, unknown> = {
  noModel: { messages: [user] },
  emptyModel: { ...base, model: '' },
  noMessages: { model: 'm', messages: [] },
  messagesNotArray: { model: 'm', messages: user },
  emptyRole: { model: 'm', messages: [{ role: '', content: 'x' }] },
  numberContent: { model: 'm', messages: [{ role: 'user', content: 3 }] },
  partWithoutType: { model: 'm', messages: [{ role: 'user', content: [{ text: 'a' }] }] },
  partNumberText: { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 1 }] }] },
  partArray: { model: 'm', messages: [{ role: 'user', content: [['text']] }] },
  nZero: { ...base, n: 0 },
  nFraction: { ...base, n: 1.5 },
  nHuge: { ...base, n: 2 ** 60 },
  streamString: { ...base, stream: 'yes' },
  temperatureHigh: { ...base, temperature: 101 },
  temperatureNegative: { ...base, temperature: -0.1 },
  seedFraction: { ...base, seed: 0.5 },
  saltLong: { ...base, cache_salt: 'x'.repeat(513) },
  saltNumber: { ...base, cache_salt: 1 },
  array: [base],
  nullBody: null,
};

describe('readChatBody', () => {
  it.each(Object.entries(TAKEN))('reads %s by hand, as the schema does', (_, body) => {
    const schema = ChatBody.safeParse(body);
    expect(schema.success).toBe(true);
    const read = readChatBody(body);
    expect(read).toBeDefined();
    expect(read).toEqual(schema.data);
  });

  it.each(Object.entries(LEFT))('leaves %s to the schema', (_, body) => {
    expect(readChatBody(body)).toBeUndefined();
  });

  it('refuses each left body through parseBody with the schema own message', () => {
    for (const body of Object.values(LEFT)) {
      const r = parseBody('chat', body);
      expect(r.ok).toBe(false);
    }
  });

  it('gives a copy of the body: stamping its salt leaves the client body as it came', () => {
    const body = { ...base };
    const read = readChatBody(body);
    expect(read).not.toBe(body);
    (read as Record<string, unknown>)['cache_salt'] = 'stamped';
    expect(body).not.toHaveProperty('cache_salt');
  });
});
