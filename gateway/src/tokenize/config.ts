// What the gateway reads from a model's tokenizer files, validated: the
// tokenizer_config.json fields that change the ids SGLang computes (the chat
// template, the named special tokens a template sees, the BOS flag some
// tokenizer classes honour) and the legacy special_tokens_map.json. Everything
// else in those files is ignored. tokenizer.json itself is validated by the
// Rust tokenizer that parses it; here only its outer shape is checked so a
// wrong file is named before the native parser's message.

import { z } from 'zod';

/** A token as HF serialises it: a string, or an AddedToken object with its `content`. */
const TokenValue = z.union([z.string(), z.looseObject({ content: z.string() })]).nullable();

const NamedTemplate = z.looseObject({ name: z.string().min(1), template: z.string() });

export const TokenizerConfigFile = z.looseObject({
  tokenizer_class: z.string().nullish(),
  /** One template, or several named ones (transformers' list form). */
  chat_template: z.union([z.string(), z.array(NamedTemplate).min(1)]).nullish(),
  add_bos_token: z.boolean().nullish(),
  added_tokens_decoder: z.record(z.string(), z.unknown()).nullish(),
  extra_special_tokens: z.union([z.record(z.string(), TokenValue), z.array(z.unknown())]).nullish(),
});
export type TokenizerConfigFile = z.infer<typeof TokenizerConfigFile>;

export const SpecialTokensMapFile = z.record(z.string(), z.unknown());

export const TokenizerJsonFile = z.looseObject({
  model: z.looseObject({ type: z.string().optional() }),
  added_tokens: z.array(z.looseObject({ id: z.number().int(), content: z.string() })).optional(),
});

/** The named templates of a model, the default first (as transformers orders them). */
export type ChatTemplates = ReadonlyMap<string, string>;

export interface ResolvedConfig {
  readonly chatTemplates: ChatTemplates;
  /** Every `*_token` entry with a string value: the variables a chat template sees (bos_token, ...). */
  readonly specialTokens: Readonly<Record<string, string>>;
  /**
   * The tokenizer class makes BOS the whole post-processor (`<bos> $A`), in
   * place of tokenizer.json's: Llama/Gemma/Cohere classes with add_bos_token
   * true or unset, as SGLang's loader leaves them.
   */
  readonly bosPostProcessor: boolean;
}

// Classes whose v4 tokenizers honoured add_bos_token; SGLang 0.5.23 restores the
// flag for exactly these after transformers v5 drops it
// (utils/hf_transformers/tokenizer.py `_fix_v5_add_bos_eos_token`), default true,
// and rebuilds the post-processor from it; false keeps tokenizer.json's.
// add_eos_token stays false for fast tokenizers there, so it is not read.
const CLASSES_WITH_BOS_FLAG = new Set([
  'LlamaTokenizer',
  'LlamaTokenizerFast',
  'CodeLlamaTokenizer',
  'CodeLlamaTokenizerFast',
  'GemmaTokenizer',
  'GemmaTokenizerFast',
  'CohereTokenizerFast',
]);

function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null && 'content' in value && typeof value.content === 'string')
    return value.content;
  return undefined;
}

/**
 * The template variables transformers v5 passes as `special_tokens_map`: the
 * standard named tokens plus model-specific `*_token` keys (its
 * `model_specific_special_tokens`), and the entries of a dict-valued
 * `extra_special_tokens`. special_tokens_map.json only counts when the config
 * has no `added_tokens_decoder` (transformers reads it as legacy only) and then wins.
 */
function collectSpecialTokens(
  config: TokenizerConfigFile,
  specialTokensMap: Readonly<Record<string, unknown>> | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  const take = (entries: Iterable<[string, unknown]>): void => {
    for (const [key, value] of entries) {
      const text = tokenText(value);
      if (key.endsWith('_token') && text !== undefined) out[key] = text;
    }
  };
  take(Object.entries(config));
  if (config.extra_special_tokens && !Array.isArray(config.extra_special_tokens)) {
    for (const [key, value] of Object.entries(config.extra_special_tokens)) {
      const text = tokenText(value);
      if (text !== undefined) out[key] = text;
    }
  }
  if (specialTokensMap && !config.added_tokens_decoder) take(Object.entries(specialTokensMap));
  return out;
}

function collectTemplates(
  config: TokenizerConfigFile,
  templateFile: string | undefined,
): Map<string, string> {
  // A chat_template.jinja beside the config takes priority over the config's entry (transformers v5).
  if (templateFile !== undefined) return new Map([['default', templateFile]]);
  const t = config.chat_template;
  if (typeof t === 'string') return new Map([['default', t]]);
  return new Map((t ?? []).map((n) => [n.name, n.template]));
}

export function resolveConfig(
  config: TokenizerConfigFile,
  specialTokensMap: Readonly<Record<string, unknown>> | undefined,
  templateFile: string | undefined,
): ResolvedConfig {
  const specialTokens = collectSpecialTokens(config, specialTokensMap);
  const hasBosFlag = CLASSES_WITH_BOS_FLAG.has(config.tokenizer_class ?? '');
  return {
    chatTemplates: collectTemplates(config, templateFile),
    specialTokens,
    bosPostProcessor:
      hasBosFlag && (config.add_bos_token ?? true) && specialTokens['bos_token'] !== undefined,
  };
}
