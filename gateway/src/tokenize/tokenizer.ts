// A model's tokenizer as SGLang 0.5.23 applies it, so the gateway's token ids
// are the runtime's (its KV events hash these ids):
//   - text (/generate `text`, /v1/completions `prompt`): the HF tokenizer
//     with special tokens, i.e. tokenizer.json's post-processor (BOS where the
//     model adds one), tokenizer_manager.py `_tokenize_texts`;
//   - chat (/v1/chat/completions): messages prepared as SGLang prepares them
//     (messages.ts), the chat template rendered with add_generation_prompt,
//     then the text encoded WITHOUT special tokens (the template writes BOS
//     itself; serving_chat.py `_render_and_encode_chat_template`).
// The tokenizer is HF's own Rust `tokenizers` crate (npm `tokenizers`, the
// same release as the pinned SGLang's Python `tokenizers`), so normalisers,
// pre-tokenizer regexes and added tokens behave identically. Its encode runs
// on libuv's thread pool, hence the promises.

import { join } from 'node:path';
import { Tokenizer as RustTokenizer, templateProcessing } from 'tokenizers';
import { resolveConfig, type ResolvedConfig } from './config.ts';
import { TOKENIZER_FILES, type TokenizerFiles } from './files.ts';
import type { ChatIssue, LoadIssue, Result } from './issues.ts';
import { prepareMessages, type ChatMessage } from './messages.ts';
import { compileTemplate, type ChatTemplate } from './template.ts';

export interface EncodeChatOptions {
  /**
   * Extra template variables: the request's `chat_template_kwargs` over the
   * server's `--chat-template-kwargs`, plus `reasoning_effort` when the
   * request sets it (SGLang passes both to the template).
   */
  readonly templateKwargs?: Readonly<Record<string, unknown>>;
}

export interface Tokenizer {
  /** Ids of a /generate `text` or /v1/completions `prompt` string. */
  encodeText(text: string): Promise<number[]>;
  /** Ids of a /v1/chat/completions request's messages (tools ignored: see messages.ts). */
  encodeChat(
    messages: readonly ChatMessage[],
    opts?: EncodeChatOptions,
  ): Promise<Result<number[], ChatIssue>>;
  /** The chat template applied, when the model has one. */
  readonly chatTemplate: ChatTemplate | undefined;
}

export interface BuildOptions {
  /** Which named template to use when the model has several (SGLang's --hf-chat-template-name); default the first. */
  readonly templateName?: string;
}

function buildRust(files: TokenizerFiles, config: ResolvedConfig): Result<RustTokenizer, LoadIssue> {
  const file = join(files.dir, TOKENIZER_FILES.tokenizer);
  let tok: RustTokenizer;
  try {
    tok = RustTokenizer.fromString(files.tokenizerJson);
  } catch (err) {
    return {
      ok: false,
      error: { code: 'invalid-tokenizer', file, message: `${file}: ${(err as Error).message}` },
    };
  }
  const bos = config.specialTokens['bos_token'];
  if (config.bosPostProcessor && bos !== undefined) {
    const id = tok.tokenToId(bos);
    if (id === null) {
      const message = `${file}: bos_token '${bos}' of ${TOKENIZER_FILES.config} is not in the vocabulary`;
      return { ok: false, error: { code: 'invalid-tokenizer', file, message } };
    }
    tok.setPostProcessor(templateProcessing(`${bos}:0 $A:0`, `${bos}:0 $A:0 ${bos}:1 $B:1`, [[bos, id]]));
  }
  return { ok: true, value: tok };
}

function pickTemplate(
  files: TokenizerFiles,
  config: ResolvedConfig,
  opts: BuildOptions,
): Result<ChatTemplate | undefined, LoadIssue> {
  const file = join(
    files.dir,
    files.chatTemplateFile !== undefined ? TOKENIZER_FILES.chatTemplate : TOKENIZER_FILES.config,
  );
  const names = [...config.chatTemplates.keys()];
  const name = opts.templateName ?? names[0];
  if (name === undefined) return { ok: true, value: undefined };
  const source = config.chatTemplates.get(name);
  if (source === undefined) {
    const message = `${file}: no chat template named '${name}' (have: ${names.join(', ')})`;
    return { ok: false, error: { code: 'invalid-field', file, field: 'chat_template', message } };
  }
  const compiled = compileTemplate(source);
  if (!compiled.ok)
    return {
      ok: false,
      error: {
        code: 'invalid-template',
        file,
        message: `${file}: chat template '${name}': ${compiled.error}`,
      },
    };
  return compiled;
}

async function encode(tok: RustTokenizer, text: string, addSpecialTokens: boolean): Promise<number[]> {
  return (await tok.encode(text, null, { addSpecialTokens })).getIds();
}

export function buildTokenizer(files: TokenizerFiles, opts: BuildOptions = {}): Result<Tokenizer, LoadIssue> {
  const config = resolveConfig(files.config, files.specialTokensMap, files.chatTemplateFile);
  const rust = buildRust(files, config);
  if (!rust.ok) return rust;
  const template = pickTemplate(files, config, opts);
  if (!template.ok) return template;
  const tok = rust.value;
  const chatTemplate = template.value;

  const encodeChat: Tokenizer['encodeChat'] = async (messages, chatOpts = {}) => {
    if (chatTemplate === undefined) {
      const message = `the model has no chat template (${TOKENIZER_FILES.config} chat_template, ${TOKENIZER_FILES.chatTemplate})`;
      return { ok: false, error: { code: 'no-chat-template', message } };
    }
    const prepared = prepareMessages(messages, chatTemplate.format);
    if (!prepared.ok) return prepared;
    const text = chatTemplate.render(prepared.value, { ...config.specialTokens, ...chatOpts.templateKwargs });
    if (!text.ok) return text;
    return { ok: true, value: await encode(tok, text.value, false) };
  };

  return {
    ok: true,
    value: { encodeText: (text) => encode(tok, text, true), encodeChat, chatTemplate },
  };
}
