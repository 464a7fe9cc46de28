// The gateway's tokenizer next to SGLang 0.5.23's own /tokenize handler
// (tokenizer-oracle.ts) for tokenizer configurations the tiny model lacks:
// BOS added by tokenizer.json or by the tokenizer class, a Llama-3-shaped
// template (BOS, trim, whitespace control, raise_exception), a template over
// content parts, the messages as a template sees them (tojson),
// chat_template.jinja, named templates, a legacy special_tokens_map.json, an
// NFC normaliser and non-special added tokens that strip. Each directory is
// the tiny model's tokenizer edited; the oracle is held to the real server on
// the tiny model in tokenizer.test.ts.

import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizer, type ChatMessage } from '../../gateway/src/tokenize/index.ts';
import { runKit } from '../support/sglang-kit.ts';
import { CHATS, TEXTS } from './tokenizer-cases.ts';
import { runOracle } from './tokenizer-oracle.ts';

const BOS = '<|begin_of_text|>';
const BOS_PROCESSOR = {
  type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: BOS, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
  pair: [
    { SpecialToken: { id: BOS, type_id: 0 } },
    { Sequence: { id: 'A', type_id: 0 } },
    { Sequence: { id: 'B', type_id: 1 } },
  ],
  special_tokens: { [BOS]: { id: BOS, ids: [0], tokens: [BOS] } },
};
// Llama 3's shape: BOS from the template, headers, trimmed content, whitespace control.
const LLAMA3_TEMPLATE = `{{- bos_token }}
{%- for message in messages %}
    {%- if message['role'] not in ['system', 'user', 'assistant', 'tool', 'developer'] %}
        {{- raise_exception('unknown role ' + message['role']) }}
    {%- endif %}
    {{- '<|' + message['role'] + '|>\\n\\n' + message['content'] | trim + '<|end_of_text|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|assistant|>\\n\\n' }}
{%- endif %}
`;
// Qwen's shape: content as a string or a list of parts (so SGLang hands it the parts).
const PARTS_TEMPLATE = `{%- for message in messages %}
{%- if message.content is string %}{%- set content = message.content %}
{%- else %}{%- set content = namespace(text='') %}
{%- for part in message.content %}{%- set content.text = content.text + '[' + part.text + ']' %}{%- endfor %}
{%- set content = content.text %}{%- endif %}
{{- '<|' + message.role + '|>' + content + '\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|assistant|>' }}{%- endif %}
`;

interface Variant {
  readonly name: string;
  readonly tokenizer?: (t: Record<string, unknown>) => Record<string, unknown>;
  readonly config?: (c: Record<string, unknown>) => Record<string, unknown>;
  readonly files?: Readonly<Record<string, string>>;
}

const VARIANTS: readonly Variant[] = [
  {
    name: 'BOS from tokenizer.json, template writes it too',
    tokenizer: (t) => ({ ...t, post_processor: BOS_PROCESSOR }),
    config: (c) => ({ ...c, chat_template: LLAMA3_TEMPLATE }),
  },
  {
    name: 'BOS from a Llama tokenizer class',
    config: (c) => ({ ...c, tokenizer_class: 'LlamaTokenizerFast' }),
  },
  {
    name: 'a Llama class with add_bos_token false',
    config: (c) => ({ ...c, tokenizer_class: 'LlamaTokenizerFast', add_bos_token: false }),
  },
  { name: 'a template over content parts', config: (c) => ({ ...c, chat_template: PARTS_TEMPLATE }) },
  {
    name: 'messages as the template sees them (string content)',
    config: (c) => ({ ...c, chat_template: '{{ messages | tojson }}' }),
  },
  {
    name: 'messages as the template sees them (content parts)',
    config: (c) => ({
      ...c,
      chat_template:
        '{% for m in messages if m.content is not string %}{% for p in m.content %}{% endfor %}{% endfor %}{{ messages | tojson }}',
    }),
  },
  { name: 'chat_template.jinja over the config', files: { 'chat_template.jinja': LLAMA3_TEMPLATE } },
  {
    name: 'named templates: the first',
    config: (c) => ({
      ...c,
      chat_template: [
        { name: 'default', template: PARTS_TEMPLATE },
        { name: 'tool_use', template: 'x' },
      ],
    }),
  },
  {
    name: 'bos_token from a legacy special_tokens_map.json',
    config: ({ bos_token: _b, ...c }) => ({ ...c, chat_template: LLAMA3_TEMPLATE }),
    files: { 'special_tokens_map.json': JSON.stringify({ bos_token: { content: BOS, lstrip: false } }) },
  },
  {
    name: 'NFC normaliser and non-special added tokens that strip',
    tokenizer: (t) => ({
      ...t,
      normalizer: { type: 'NFC' },
      added_tokens: [
        ...(t['added_tokens'] as unknown[]),
        {
          id: 430,
          content: '<tool>',
          single_word: false,
          lstrip: true,
          rstrip: true,
          normalized: false,
          special: false,
        },
        {
          id: 431,
          content: 'fox',
          single_word: true,
          lstrip: false,
          rstrip: false,
          normalized: true,
          special: false,
        },
      ],
    }),
  },
];

const VARIANT_TEXTS = [...TEXTS.slice(0, -1), 'a <tool> b  <tool>  c', 'fox foxes the fox.', 'e\u0301 é'];
const VARIANT_CHATS: readonly (readonly ChatMessage[])[] = [
  ...CHATS.slice(0, -2),
  [{ role: 'root', content: 'a role the Llama 3 template refuses' }],
  [{ role: 'user', content: 'x <tool> y fox' }],
];

describe("the gateway tokenizer next to SGLang's own /tokenize handler, for configurations the tiny model lacks", () => {
  let work: string;
  let dirs: string[];

  beforeAll(async () => {
    const tiny = (await runKit(['make-model'])).trim().split('\n').at(-1) ?? '';
    work = mkdtempSync(join(tmpdir(), 'cacheroute-tokenize-'));
    const read = (f: string): Record<string, unknown> =>
      JSON.parse(readFileSync(join(tiny, f), 'utf8')) as Record<string, unknown>;
    dirs = VARIANTS.map((v, i) => {
      const dir = join(work, `v${i}`);
      cpSync(join(tiny, 'config.json'), join(dir, 'config.json'));
      writeFileSync(
        join(dir, 'tokenizer.json'),
        JSON.stringify((v.tokenizer ?? ((t) => t))(read('tokenizer.json'))),
      );
      writeFileSync(
        join(dir, 'tokenizer_config.json'),
        JSON.stringify((v.config ?? ((c) => c))(read('tokenizer_config.json'))),
      );
      for (const [name, text] of Object.entries(v.files ?? {})) writeFileSync(join(dir, name), text);
      return dir;
    });
  });

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('gives the same ids, or refuses the same chats, in every configuration', async () => {
    const bodies = [{ prompt: VARIANT_TEXTS }, ...VARIANT_CHATS.map((messages) => ({ messages }))];
    const answers = await runOracle(dirs.flatMap((dir) => bodies.map((body) => ({ dir, body }))));
    for (const [v, dir] of dirs.entries()) {
      const loaded = await loadTokenizer(dir);
      if (!loaded.ok) throw new Error(loaded.error.message);
      const tok = loaded.value;
      const theirs = answers.slice(v * bodies.length, (v + 1) * bodies.length);
      const name = VARIANTS[v]?.name ?? '';
      expect(theirs[0], name).toEqual({
        tokens: await Promise.all(VARIANT_TEXTS.map((t) => tok.encodeText(t))),
      });
      for (const [i, messages] of VARIANT_CHATS.entries()) {
        const ours = await tok.encodeChat(messages);
        const want = theirs[i + 1];
        const label = `${name}: chat ${i}`;
        if (want && 'error' in want)
          expect(ours.ok ? ours.value : ours.error.code, label).toBe('template-error');
        else expect(ours.ok ? { tokens: ours.value } : ours.error, label).toEqual(want);
      }
    }
  });
});
