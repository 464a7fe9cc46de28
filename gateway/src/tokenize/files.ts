// Reads a model's tokenizer files from a directory (the shell of the loader):
// tokenizer.json and tokenizer_config.json are required; chat_template.jinja
// and special_tokens_map.json are read when present, as transformers does.
// Every failure names the file, and the field when a field is wrong.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { z } from 'zod';
import { SpecialTokensMapFile, TokenizerConfigFile, TokenizerJsonFile } from './config.ts';
import type { LoadIssue, Result } from './issues.ts';

export const TOKENIZER_FILES = {
  tokenizer: 'tokenizer.json',
  config: 'tokenizer_config.json',
  chatTemplate: 'chat_template.jinja',
  specialTokensMap: 'special_tokens_map.json',
} as const;

export interface TokenizerFiles {
  readonly dir: string;
  /** tokenizer.json as text: the Rust tokenizer parses it itself. */
  readonly tokenizerJson: string;
  readonly config: TokenizerConfigFile;
  readonly specialTokensMap: Readonly<Record<string, unknown>> | undefined;
  readonly chatTemplateFile: string | undefined;
}

async function readText(dir: string, name: string): Promise<Result<string | undefined, LoadIssue>> {
  const file = join(dir, name);
  try {
    return { ok: true, value: await readFile(file, 'utf8') };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { ok: true, value: undefined };
    return {
      ok: false,
      error: { code: 'unreadable-file', file, message: `${file}: ${(err as Error).message}` },
    };
  }
}

async function readRequired(dir: string, name: string): Promise<Result<string, LoadIssue>> {
  const r = await readText(dir, name);
  if (!r.ok) return r;
  if (r.value !== undefined) return { ok: true, value: r.value };
  const file = join(dir, name);
  return { ok: false, error: { code: 'missing-file', file, message: `${file} does not exist` } };
}

function parseJson<S extends z.ZodType>(
  file: string,
  text: string,
  schema: S,
): Result<z.infer<S>, LoadIssue> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return {
      ok: false,
      error: { code: 'invalid-json', file, message: `${file}: ${(err as Error).message}` },
    };
  }
  const r = schema.safeParse(raw);
  if (r.success) return { ok: true, value: r.data };
  const issue = r.error.issues[0];
  const field = issue?.path.length ? issue.path.join('.') : '(root)';
  return {
    ok: false,
    error: {
      code: 'invalid-field',
      file,
      field,
      message: `${file}: ${field}: ${issue?.message ?? 'invalid'}`,
    },
  };
}

export async function readTokenizerFiles(dir: string): Promise<Result<TokenizerFiles, LoadIssue>> {
  const [tok, cfg, tpl, stm] = await Promise.all([
    readRequired(dir, TOKENIZER_FILES.tokenizer),
    readRequired(dir, TOKENIZER_FILES.config),
    readText(dir, TOKENIZER_FILES.chatTemplate),
    readText(dir, TOKENIZER_FILES.specialTokensMap),
  ]);
  if (!tok.ok) return tok;
  if (!cfg.ok) return cfg;
  if (!tpl.ok) return tpl;
  if (!stm.ok) return stm;

  const tokenizerShape = parseJson(join(dir, TOKENIZER_FILES.tokenizer), tok.value, TokenizerJsonFile);
  if (!tokenizerShape.ok) return tokenizerShape;
  const config = parseJson(join(dir, TOKENIZER_FILES.config), cfg.value, TokenizerConfigFile);
  if (!config.ok) return config;
  let specialTokensMap: Record<string, unknown> | undefined;
  if (stm.value !== undefined) {
    const parsed = parseJson(join(dir, TOKENIZER_FILES.specialTokensMap), stm.value, SpecialTokensMapFile);
    if (!parsed.ok) return parsed;
    specialTokensMap = parsed.value;
  }
  return {
    ok: true,
    value: {
      dir,
      tokenizerJson: tok.value,
      config: config.value,
      specialTokensMap,
      chatTemplateFile: tpl.value,
    },
  };
}
