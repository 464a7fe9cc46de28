import { describe, expect, it } from 'vitest';
import { prepareMessages, type ChatMessage } from './messages.ts';

const parts = (...texts: string[]) => texts.map((text) => ({ type: 'text', text }));

describe('prepareMessages (as SGLang builds what the template sees)', () => {
  it.each<[string, ChatMessage[], 'string' | 'openai', unknown[]]>([
    ['keeps string content', [{ role: 'user', content: 'hi' }], 'string', [{ role: 'user', content: 'hi' }]],
    [
      'null content becomes ""',
      [
        { role: 'system', content: null },
        { role: 'user', content: 'x' },
      ],
      'string',
      [
        { role: 'system', content: '' },
        { role: 'user', content: 'x' },
      ],
    ],
    [
      'joins text parts with a space for string templates',
      [{ role: 'user', content: parts('a', 'b') }],
      'string',
      [{ role: 'user', content: 'a b' }],
    ],
    [
      'keeps text parts for openai templates',
      [{ role: 'user', content: parts('a', 'b') }],
      'openai',
      [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ],
        },
      ],
    ],
    [
      'drops thinking parts',
      [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: [{ type: 'thinking', thinking: 'h' }, ...parts('v')] },
        { role: 'user', content: 'r' },
      ],
      'openai',
      [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: [{ type: 'text', text: 'v' }] },
        { role: 'user', content: 'r' },
      ],
    ],
    [
      'a user message keeps role and content only',
      [{ role: 'user', content: 'hi', name: 'al' }],
      'string',
      [{ role: 'user', content: 'hi' }],
    ],
    [
      'other roles keep tool_call_id and name, lower-cased',
      [
        { role: 'Tool', content: 'r', tool_call_id: 'c1', name: 'f' },
        { role: 'user', content: 'x' },
      ],
      'string',
      [
        { role: 'tool', content: 'r', tool_call_id: 'c1', name: 'f' },
        { role: 'user', content: 'x' },
      ],
    ],
    [
      'openai templates get content last',
      [
        { role: 'system', content: parts('s'), name: 'n' },
        { role: 'user', content: 'x' },
      ],
      'openai',
      [
        { role: 'system', name: 'n', content: [{ type: 'text', text: 's' }] },
        { role: 'user', content: 'x' },
      ],
    ],
    [
      'a tool message of text parts becomes their text',
      [
        { role: 'tool', content: parts('a', 'b') },
        { role: 'user', content: 'x' },
      ],
      'openai',
      [
        { role: 'tool', content: 'a b' },
        { role: 'user', content: 'x' },
      ],
    ],
    [
      'a final assistant message becomes a user message',
      [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: 'b', name: 'n' },
      ],
      'string',
      [
        { role: 'user', content: 'a' },
        { role: 'user', content: 'b' },
      ],
    ],
    [
      'a final assistant message of parts stays for openai templates',
      [{ role: 'assistant', content: parts('b') }],
      'openai',
      [{ role: 'assistant', content: [{ type: 'text', text: 'b' }] }],
    ],
  ])('%s', (_name, messages, format, want) => {
    expect(prepareMessages(messages, format)).toEqual({ ok: true, value: want });
  });

  it('refuses a media part, naming it', () => {
    const r = prepareMessages([{ role: 'user', content: [{ type: 'image_url' }] }], 'openai');
    expect(r).toMatchObject({
      ok: false,
      error: { code: 'unsupported-content', path: 'messages.0.content.0' },
    });
  });
});
