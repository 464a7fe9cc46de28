import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadTokenizerDirectory } from './registry.ts';
import { CONFIG, id, TOKENIZER_JSON } from '../../../test/support/gateway/tiny-bpe.ts';

let root: string | undefined;
afterEach(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

function writeModel(dir: string, files: Record<string, unknown>): void {
  mkdirSync(dir, { recursive: true });
  for (const [name, content] of Object.entries(files))
    writeFileSync(join(dir, name), JSON.stringify(content));
}

describe('loadTokenizerDirectory', () => {
  it('names each model by its folder below the root, nested names included, and reports a broken one', async () => {
    root = mkdtempSync(join(tmpdir(), 'tokenizers-'));
    const good = { 'tokenizer.json': TOKENIZER_JSON, 'tokenizer_config.json': CONFIG };
    writeModel(join(root, 'tiny'), good);
    writeModel(join(root, 'org', 'tiny-2'), good);
    writeModel(join(root, 'broken'), { 'tokenizer.json': TOKENIZER_JSON });
    const { tokenizers, issues } = await loadTokenizerDirectory(root);
    expect([...tokenizers.keys()].sort()).toEqual(['org/tiny-2', 'tiny']);
    expect(await tokenizers.get('org/tiny-2')?.encodeText('hello')).toEqual([id('hello')]);
    expect(issues).toEqual([
      {
        model: 'broken',
        issue: expect.objectContaining({
          code: 'missing-file',
          file: join(root, 'broken', 'tokenizer_config.json'),
        }),
      },
    ]);
  });
});
