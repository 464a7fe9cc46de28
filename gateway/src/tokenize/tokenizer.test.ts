import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadTokenizer } from './index.ts';
import { CONFIG, id, TOKENIZER_JSON } from '../../../test/support/gateway/tiny-bpe.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function writeModel(files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'tokenize-unit-'));
  dirs.push(dir);
  for (const [name, content] of Object.entries(files))
    writeFileSync(join(dir, name), typeof content === 'string' ? content : JSON.stringify(content));
  return dir;
}

async function load(files: Record<string, unknown>) {
  const r = await loadTokenizer(writeModel(files));
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

describe('loadTokenizer', () => {
  it('encodes text with the post-processor: no BOS unless the tokenizer adds one', async () => {
    const tok = await load({ 'tokenizer.json': TOKENIZER_JSON, 'tokenizer_config.json': CONFIG });
    expect(await tok.encodeText('hello')).toEqual([id('hello')]);
    const llama = await load({
      'tokenizer.json': TOKENIZER_JSON,
      'tokenizer_config.json': { ...CONFIG, tokenizer_class: 'LlamaTokenizerFast' },
    });
    expect(await llama.encodeText('hello')).toEqual([0, id('hello')]);
  });

  it('templates a chat and encodes it without adding BOS (the template owns it)', async () => {
    const tok = await load({
      'tokenizer.json': TOKENIZER_JSON,
      'tokenizer_config.json': { ...CONFIG, tokenizer_class: 'LlamaTokenizerFast' },
    });
    const r = await tok.encodeChat([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'hello' },
          { type: 'text', text: 'he' },
        ],
      },
    ]);
    expect(r).toEqual({ ok: true, value: [3, id('hello'), id('Ġ'), id('he'), 4] });
  });

  it('passes template kwargs and special tokens to the template', async () => {
    const tok = await load({
      'tokenizer.json': TOKENIZER_JSON,
      'tokenizer_config.json': { ...CONFIG, chat_template: '{{ bos_token }}{{ greeting }}' },
    });
    expect(
      await tok.encodeChat([{ role: 'user', content: 'x' }], { templateKwargs: { greeting: 'hello' } }),
    ).toEqual({
      ok: true,
      value: [0, id('hello')],
    });
  });

  it('answers chats with an issue, not an exception', async () => {
    const noTemplate = await load({
      'tokenizer.json': TOKENIZER_JSON,
      'tokenizer_config.json': { bos_token: 'x' },
    });
    expect(await noTemplate.encodeChat([{ role: 'user', content: 'x' }])).toMatchObject({
      ok: false,
      error: { code: 'no-chat-template' },
    });
    const raising = await load({
      'tokenizer.json': TOKENIZER_JSON,
      'tokenizer_config.json': { ...CONFIG, chat_template: "{{ raise_exception('no system role') }}" },
    });
    expect(await raising.encodeChat([{ role: 'user', content: 'x' }])).toMatchObject({
      ok: false,
      error: { code: 'template-error', message: expect.stringContaining('no system role') },
    });
  });

  it.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    [
      'missing tokenizer.json',
      { 'tokenizer_config.json': CONFIG },
      { code: 'missing-file', file: expect.stringMatching(/tokenizer\.json$/) },
    ],
    [
      'missing tokenizer_config.json',
      { 'tokenizer.json': TOKENIZER_JSON },
      { code: 'missing-file', file: expect.stringMatching(/tokenizer_config\.json$/) },
    ],
    [
      'invalid JSON',
      { 'tokenizer.json': TOKENIZER_JSON, 'tokenizer_config.json': '{' },
      { code: 'invalid-json' },
    ],
    [
      'a wrong field',
      { 'tokenizer.json': TOKENIZER_JSON, 'tokenizer_config.json': { chat_template: 5 } },
      { code: 'invalid-field', field: 'chat_template' },
    ],
    [
      'a tokenizer.json without a model',
      { 'tokenizer.json': { version: '1.0' }, 'tokenizer_config.json': CONFIG },
      { code: 'invalid-field', field: 'model' },
    ],
    [
      'a tokenizer.json Rust refuses',
      { 'tokenizer.json': { ...TOKENIZER_JSON, model: { type: 'Nope' } }, 'tokenizer_config.json': CONFIG },
      { code: 'invalid-tokenizer' },
    ],
    [
      'a template that does not parse',
      {
        'tokenizer.json': TOKENIZER_JSON,
        'tokenizer_config.json': { ...CONFIG, chat_template: '{% for %}' },
      },
      { code: 'invalid-template' },
    ],
    [
      'a bad chat_template.jinja',
      {
        'tokenizer.json': TOKENIZER_JSON,
        'tokenizer_config.json': CONFIG,
        'chat_template.jinja': '{% if %}',
      },
      { code: 'invalid-template', file: expect.stringMatching(/chat_template\.jinja$/) },
    ],
    [
      'a BOS outside the vocabulary',
      {
        'tokenizer.json': TOKENIZER_JSON,
        'tokenizer_config.json': { ...CONFIG, tokenizer_class: 'LlamaTokenizer', bos_token: '<s>' },
      },
      { code: 'invalid-tokenizer', message: expect.stringContaining("'<s>'") },
    ],
  ])('refuses %s, naming the file', async (_name, files, issue) => {
    const r = await loadTokenizer(writeModel(files));
    expect(r).toMatchObject({ ok: false, error: issue });
  });

  it('refuses an unknown template name', async () => {
    const dir = writeModel({ 'tokenizer.json': TOKENIZER_JSON, 'tokenizer_config.json': CONFIG });
    expect(await loadTokenizer(dir, { templateName: 'tool_use' })).toMatchObject({
      ok: false,
      error: {
        code: 'invalid-field',
        field: 'chat_template',
        message: expect.stringContaining('have: default'),
      },
    });
  });
});
