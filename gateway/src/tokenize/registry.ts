// The tokenizers the gateway holds, by served model name, from one directory
// (`--tokenizers DIR`): every folder under it that holds a tokenizer.json is a
// model, named by its path below DIR (so "meta-llama/Llama-3.1-8B" lives in
// DIR/meta-llama/Llama-3.1-8B). A folder that fails to load is reported and
// skipped: the others still load, and its model routes by approximate tokens.

import { readdir } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { TOKENIZER_FILES } from './files.ts';
import { loadTokenizer } from './index.ts';
import type { LoadIssue } from './issues.ts';
import type { Tokenizer } from './tokenizer.ts';

export interface LoadedTokenizers {
  readonly tokenizers: ReadonlyMap<string, Tokenizer>;
  readonly issues: readonly { readonly model: string; readonly issue: LoadIssue }[];
}

const MAX_DEPTH = 4;

export async function loadTokenizerDirectory(root: string): Promise<LoadedTokenizers> {
  const tokenizers = new Map<string, Tokenizer>();
  const issues: { model: string; issue: LoadIssue }[] = [];
  for (const dir of await findModelDirs(root, 0)) {
    const model = relative(root, dir).split(sep).join('/');
    const loaded = await loadTokenizer(dir);
    if (loaded.ok) tokenizers.set(model, loaded.value);
    else issues.push({ model, issue: loaded.error });
  }
  return { tokenizers, issues };
}

async function findModelDirs(dir: string, depth: number): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  if (entries.some((e) => e.isFile() && e.name === TOKENIZER_FILES.tokenizer)) return [dir];
  if (depth >= MAX_DEPTH) return [];
  const nested = await Promise.all(
    entries
      .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
      .map((e) => findModelDirs(join(dir, e.name), depth + 1)),
  );
  return nested.flat();
}
