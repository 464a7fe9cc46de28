// The model's own tokenizer and chat template, applied as the SGLang runtime
// applies them: the request's token ids the runtime will compute.

import { readTokenizerFiles } from './files.ts';
import type { LoadIssue, Result } from './issues.ts';
import { buildTokenizer, type BuildOptions, type Tokenizer } from './tokenizer.ts';

export { ContentFormat } from './content-format.ts';
export { readTokenizerFiles, TOKENIZER_FILES, type TokenizerFiles } from './files.ts';
export type { ChatIssue, LoadIssue, Result } from './issues.ts';
export { ChatMessage } from './messages.ts';
export { buildTokenizer, type BuildOptions, type EncodeChatOptions, type Tokenizer } from './tokenizer.ts';

/** Reads tokenizer.json, tokenizer_config.json (and chat_template.jinja, special_tokens_map.json) from `dir`. */
export async function loadTokenizer(
  dir: string,
  opts: BuildOptions = {},
): Promise<Result<Tokenizer, LoadIssue>> {
  const files = await readTokenizerFiles(dir);
  return files.ok ? buildTokenizer(files.value, opts) : files;
}
