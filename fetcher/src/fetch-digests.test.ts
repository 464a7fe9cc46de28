import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkDigests, computeDigests, tokenizerManifestAt } from './fetch-digests.ts';
import { manifestOfDirectory } from './files.ts';
import { digestOfManifest, isTokenizerFile, manifestFromEntries, type Manifest } from './manifest.ts';

const H = (c: string): string => c.repeat(64);

function manifest(...paths: string[]): Manifest {
  const m = manifestFromEntries(paths.map((path, i) => ({ path, size: i, sha256: H(String(i % 10)) })));
  if (!m.ok) throw new Error(m.error.message);
  return m.value;
}

const MODEL = manifest(
  'config.json',
  'model.safetensors',
  'tokenizer.json',
  'tok/tokenizer.json',
  'tok/tokenizer_config.json',
  'tok/additional_chat_templates/tool.jinja',
  'tok/deeper/vocab.json',
  'tokx/merges.txt',
);

describe('tokenizerManifestAt', () => {
  it('is the tokenizer files at the top of the model without a subpath', () => {
    expect(tokenizerManifestAt(MODEL).files.map((f) => f.path)).toEqual(['tokenizer.json']);
  });

  it('is the tokenizer files at the top of the subpath, with paths relative to it', () => {
    expect(tokenizerManifestAt(MODEL, 'tok').files).toEqual([
      { path: 'additional_chat_templates/tool.jinja', size: 5, sha256: H('5') },
      { path: 'tokenizer.json', size: 3, sha256: H('3') },
      { path: 'tokenizer_config.json', size: 4, sha256: H('4') },
    ]);
  });

  it('gives the digest make model-digest --tokenizer-dir gives for that directory on disk', async () => {
    const root = mkdtempSync(join(tmpdir(), 'fetch-digests-'));
    try {
      for (const path of [
        'config.json',
        'tok/tokenizer.json',
        'tok/vocab.json',
        'tok/deeper/merges.txt',
        'tok/x.bin',
      ]) {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), `content of ${path}`);
      }
      const whole = await manifestOfDirectory(root);
      const tokDir = await manifestOfDirectory(join(root, 'tok'), { select: isTokenizerFile });
      expect(computeDigests(whole, 'tok').tokenizerDigest).toBe(digestOfManifest(tokDir));
      expect(tokDir.files.map((f) => f.path)).toEqual(['tokenizer.json', 'vocab.json']);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('checkDigests', () => {
  const digests = computeDigests(MODEL);

  it('passes the digests of the manifest', () => {
    expect(checkDigests(MODEL, digests)).toEqual({ ok: true, value: digests });
  });

  it.each(['digest', 'tokenizerDigest'] as const)('names the expected and the computed %s', (field) => {
    const r = checkDigests(MODEL, { ...digests, [field]: `sha256:${H('f')}` });
    expect(r).toMatchObject({
      ok: false,
      error: { field, expected: `sha256:${H('f')}`, computed: digests[field] },
    });
    expect(!r.ok && r.error.message).toContain(digests[field]);
    expect(!r.ok && r.error.message).toContain(`sha256:${H('f')}`);
  });
});
