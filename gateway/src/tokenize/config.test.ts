import { describe, expect, it } from 'vitest';
import { resolveConfig, TokenizerConfigFile } from './config.ts';

const parse = (raw: unknown) => TokenizerConfigFile.parse(raw);

describe('resolveConfig', () => {
  it('passes every named *_token a template may read, and model-specific ones', () => {
    const c = parse({
      bos_token: '<s>',
      eos_token: { content: '</s>', lstrip: false },
      pad_token: null,
      image_token: '<img>',
      add_bos_token: true,
      extra_special_tokens: { tool_token: '<tool>' },
    });
    expect(resolveConfig(c, undefined, undefined).specialTokens).toEqual({
      bos_token: '<s>',
      eos_token: '</s>',
      image_token: '<img>',
      tool_token: '<tool>',
    });
  });

  it('reads special_tokens_map.json only without added_tokens_decoder (legacy), and then it wins', () => {
    const map = { bos_token: { content: '<bos>' } };
    expect(resolveConfig(parse({ bos_token: '<s>' }), map, undefined).specialTokens['bos_token']).toBe(
      '<bos>',
    );
    const modern = parse({ bos_token: '<s>', added_tokens_decoder: {} });
    expect(resolveConfig(modern, map, undefined).specialTokens['bos_token']).toBe('<s>');
  });

  it('prefers chat_template.jinja, keeps named templates in order', () => {
    expect([...resolveConfig(parse({ chat_template: 'a' }), undefined, 'f').chatTemplates]).toEqual([
      ['default', 'f'],
    ]);
    const named = parse({
      chat_template: [
        { name: 'tool_use', template: 't' },
        { name: 'default', template: 'd' },
      ],
    });
    expect([...resolveConfig(named, undefined, undefined).chatTemplates.keys()]).toEqual([
      'tool_use',
      'default',
    ]);
    expect(resolveConfig(parse({}), undefined, undefined).chatTemplates.size).toBe(0);
  });

  it.each([
    ['LlamaTokenizerFast', undefined, true],
    ['LlamaTokenizerFast', true, true],
    ['LlamaTokenizerFast', false, false],
    ['GemmaTokenizer', undefined, true],
    ['PreTrainedTokenizerFast', true, false],
    ['Qwen2Tokenizer', undefined, false],
  ])('class %s with add_bos_token %s: BOS post-processor %s', (cls, addBos, want) => {
    const c = parse({
      tokenizer_class: cls,
      bos_token: '<s>',
      ...(addBos === undefined ? {} : { add_bos_token: addBos }),
    });
    expect(resolveConfig(c, undefined, undefined).bosPostProcessor).toBe(want);
  });
});
