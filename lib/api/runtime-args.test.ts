// runtime-args.ts is the API's one reader of the pinned SGLang flag table (118 KB of JSON):
// the other modules take the flag choices from it, so a program that needs only part of the
// API, such as the fetcher (model-source.ts), does not load the table.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const FLAG_TABLE = new Set(['#sglang/catalogue.ts', '#sglang/flags.ts']);
const DIR = import.meta.dirname;

function importsOf(file: string): string[] {
  const source = readFileSync(join(DIR, file), 'utf8');
  return ts.preProcessFile(source, true, false).importedFiles.map((f) => f.fileName);
}

/** Every specifier `file` reaches through this folder's own modules, itself included. */
function reachedFrom(file: string): Set<string> {
  const seen = new Set<string>();
  const pending = [`./${file}`];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (seen.has(next)) continue;
    seen.add(next);
    if (next.startsWith('./')) pending.push(...importsOf(next.slice(2)));
  }
  return seen;
}

describe('the SGLang flag table in the API', () => {
  const modules = readdirSync(DIR).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));

  it('is imported by runtime-args.ts alone', () => {
    const importers = modules.filter((m) => importsOf(m).some((i) => FLAG_TABLE.has(i)));
    expect(importers).toEqual(['runtime-args.ts']);
  });

  it('is not reached from the model source, which the fetcher imports', () => {
    const reached = [...reachedFrom('model-source.ts')];
    expect(reached.filter((s) => FLAG_TABLE.has(s) || s === './runtime-args.ts')).toEqual([]);
  });
});
