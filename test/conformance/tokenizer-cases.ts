// Texts and chat conversations the tokenizer conformance tests send: ASCII,
// unicode, emoji, whitespace runs, special-token strings inside text, a
// 2,000-token text; chats with system, multi-turn, final assistant, content
// parts, thinking parts, tool and developer roles.

import type { ChatMessage } from '../../gateway/src/tokenize/index.ts';

/** A fixed pseudo-random text of `words` words from the tiny model's corpus and beyond. */
export function buildLongText(words: number): string {
  const pool =
    'the quick brown fox jumps over lazy dog cache router model server paris france alpha omega'.split(' ');
  pool.push('Größe', '東京', '😀', '\n', '  ', 'x=42;', "don't");
  let seed = 7;
  return Array.from({ length: words }, () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return pool[(seed >>> 16) % pool.length];
  }).join(' ');
}
export const LONG = buildLongText(900); // about 2,000 tokens with this tokenizer

export const TEXTS: readonly string[] = [
  'hello world',
  'the quick brown fox jumps over the lazy dog',
  'What is the capital of France? The capital of France is Paris.',
  'Hello, World!',
  '   leading and trailing   ',
  'runs     of     spaces',
  'tabs\tand\nnew\nlines\r\nand\r\n\r\nblank lines\n\n\n',
  '\n',
  ' ',
  "I'm you're they've we'll he'd SHE'S it's",
  'Größe Straße café naïve résumé',
  'e\u0301 combining versus é precomposed',
  'ﬁ ligature, ① circled, Ｆｕｌｌ width',
  '日本語のテキストです。東京は首都です。',
  '中文文本测试，缓存路由。',
  'Привет, как дела?',
  'مرحبا بالعالم',
  '😀🚀 emoji, 👩‍👩‍👧‍👦 a family, 🇫🇷 a flag, 🏳️‍🌈',
  'emoji😀glued😀to😀words',
  'zero\u200bwidth and \ufeff byte order mark',
  'numbers 0 12 123 1234 12345 3.14159 -42 1e-9 0xFF',
  '<|begin_of_text|>special tokens<|end_of_text|> inside text',
  '<|user|>hi<|assistant|>hello',
  '<|not_a_token|>',
  'def f(x):\n    return x ** 2  # square\n',
  '{"json": [1, 2, {"a": null}], "b": "c"}',
  'https://example.com/path?q=1&r=two#frag',
  '!!!???...---***',
  'a'.repeat(200),
  'ab '.repeat(120),
  LONG,
];

export const CHATS: readonly (readonly ChatMessage[])[] = [
  [{ role: 'user', content: 'hello' }],
  [
    { role: 'system', content: 'you are a helpful assistant. answer in one short sentence.' },
    { role: 'user', content: 'what is the capital of france?' },
  ],
  [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: 'tell me a story about a cache' },
    { role: 'assistant', content: 'a router met a model server.' },
    { role: 'user', content: 'and then?' },
  ],
  [
    { role: 'user', content: 'first' },
    { role: 'assistant', content: 'second' },
  ],
  [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'two text parts' },
        { type: 'text', text: 'joined' },
      ],
    },
  ],
  [
    { role: 'system', content: [{ type: 'text', text: 'system as parts' }] },
    { role: 'user', content: [{ type: 'text', text: 'Größe 😀' }] },
  ],
  [
    { role: 'user', content: 'q' },
    {
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: 'hidden' },
        { type: 'text', text: 'visible' },
      ],
    },
    { role: 'user', content: 'q2' },
  ],
  [
    { role: 'user', content: 'call the tool' },
    { role: 'assistant', content: null },
    { role: 'tool', content: 'tool says 42', tool_call_id: 'call_1' },
    { role: 'user', content: 'thanks' },
  ],
  [
    { role: 'developer', content: 'developer instructions' },
    { role: 'user', content: 'hi', name: 'alice' },
  ],
  [
    { role: 'System', content: 'capitalised role' },
    { role: 'user', content: 'hi' },
  ],
  [{ role: 'user', content: '' }],
  [{ role: 'user', content: '  whitespace\n\n\trun  ' }],
  [{ role: 'user', content: 'a literal <|assistant|> marker' }],
  [{ role: 'user', content: '日本語 中文 Привет مرحبا 🇫🇷👩‍👩‍👧‍👦' }],
  [
    { role: 'system', content: 'long context follows' },
    { role: 'user', content: LONG },
  ],
  [
    { role: 'user', content: 'one' },
    { role: 'assistant', content: 'two' },
    { role: 'user', content: 'three' },
    { role: 'assistant', content: [{ type: 'text', text: 'four as parts' }] },
  ],
];
