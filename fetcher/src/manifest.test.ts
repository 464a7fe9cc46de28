import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ModelSpec } from '#api/model-source.ts';
import {
  digestOfManifest,
  firstMismatch,
  isCountedPath,
  isTokenizerFile,
  manifestFromEntries,
  serializeManifest,
  TOKENIZER_FILE_NAMES,
  tokenizerFiles,
  type Manifest,
  type ManifestEntry,
} from './manifest.ts';

const H = (c: string): string => c.repeat(64);

function manifestOf(entries: ManifestEntry[]): Manifest {
  const m = manifestFromEntries(entries);
  if (!m.ok) throw new Error(m.error.message);
  return m.value;
}

describe('the canonical manifest', () => {
  it('is one line `<sha256> <size> <path>` per file, sorted by path, and the digest is its sha256', () => {
    const m = manifestOf([
      { path: 'tokenizer.json', size: 17, sha256: H('c') },
      { path: 'model-00001-of-00002.safetensors', size: 4_000_000_000, sha256: H('a') },
      { path: 'config.json', size: 0, sha256: H('b') },
    ]);
    const text =
      `${H('b')} 0 config.json\n` +
      `${H('a')} 4000000000 model-00001-of-00002.safetensors\n` +
      `${H('c')} 17 tokenizer.json\n`;
    expect(serializeManifest(m)).toBe(text);
    expect(digestOfManifest(m)).toBe(
      `sha256:${createHash('sha256').update(Buffer.from(text)).digest('hex')}`,
    );
  });

  it('has a fixed digest for a fixed file set (a change of format is a change of every digest)', () => {
    const m = manifestOf([{ path: 'config.json', size: 3, sha256: H('0') }]);
    expect(digestOfManifest(m)).toBe(
      'sha256:099ac610ad791328fca9f6fd556cd7f15f6d874c67c289873e9a3191f151e6f7',
    );
  });

  it('orders paths by their UTF-8 bytes, as `LC_ALL=C sort` does, not by UTF-16 units', () => {
    // U+FF5E is EF BD 9E in UTF-8, before U+1F600 (F0 …); in UTF-16 the emoji's surrogate D83D comes first.
    const m = manifestOf([
      { path: '\u{1F600}.txt', size: 1, sha256: H('1') },
      { path: '\uFF5E.txt', size: 1, sha256: H('2') },
      { path: 'b', size: 1, sha256: H('3') },
      { path: 'a/b', size: 1, sha256: H('4') },
      { path: 'B', size: 1, sha256: H('5') },
      { path: 'a-b', size: 1, sha256: H('6') },
    ]);
    expect(m.files.map((f) => f.path)).toEqual(['B', 'a-b', 'a/b', 'b', '\uFF5E.txt', '\u{1F600}.txt']);
  });

  it('does not depend on the order the files were found in', () => {
    const files = [
      { path: 'a', size: 1, sha256: H('1') },
      { path: 'b/c', size: 2, sha256: H('2') },
    ];
    expect(digestOfManifest(manifestOf(files))).toBe(digestOfManifest(manifestOf([...files].reverse())));
  });

  it.each([
    ['an empty path', '', 'invalid_path'],
    ['an absolute path', '/etc/passwd', 'invalid_path'],
    ['a `..` component', 'a/../b', 'invalid_path'],
    ['a `.` component', './a', 'invalid_path'],
    ['an empty component', 'a//b', 'invalid_path'],
    ['a line break', 'a\nb', 'invalid_path'],
  ])('refuses %s', (_name, path, code) => {
    expect(manifestFromEntries([{ path, size: 1, sha256: H('a') }])).toMatchObject({
      ok: false,
      error: { code, path },
    });
  });

  it.each([
    [
      'a path listed twice',
      [
        { path: 'a', size: 1, sha256: H('a') },
        { path: 'a', size: 1, sha256: H('b') },
      ],
      'duplicate_path',
    ],
    ['a negative size', [{ path: 'a', size: -1, sha256: H('a') }], 'invalid_size'],
    ['a fractional size', [{ path: 'a', size: 1.5, sha256: H('a') }], 'invalid_size'],
    ['an upper-case sha256', [{ path: 'a', size: 1, sha256: H('A') }], 'invalid_sha256'],
    ['a prefixed sha256', [{ path: 'a', size: 1, sha256: `sha256:${H('a')}` }], 'invalid_sha256'],
  ])('refuses %s', (_name, entries, code) => {
    expect(manifestFromEntries(entries)).toMatchObject({ ok: false, error: { code, path: 'a' } });
  });
});

describe('which files count', () => {
  it.each([
    ['config.json', true],
    ['sub/dir/weights.bin', true],
    ['.gitattributes', false],
    ['.git/HEAD', false],
    ['.cache/huggingface/download/config.json.metadata', false],
    ['sub/.DS_Store', false],
    ['sub/.hidden/x', false],
    ['a.b/c', true],
  ])('%s counts: %s', (path, counted) => {
    expect(isCountedPath(path)).toBe(counted);
  });

  it.each<[string, boolean]>([
    ...TOKENIZER_FILE_NAMES.map((n): [string, boolean] => [n, true]),
    ['qwen.tiktoken', true],
    ['tokenization_kimi.py', true],
    ['additional_chat_templates/tool_use.jinja', true],
    ['config.json', false],
    ['generation_config.json', false],
    ['model.safetensors', false],
    ['sub/tokenizer.json', false],
    ['additional_chat_templates/deeper/x.jinja', false],
    ['modeling_kimi.py', false],
  ])('%s is a tokenizer file: %s', (path, isTokenizer) => {
    expect(isTokenizerFile(path)).toBe(isTokenizer);
  });

  it('the tokenizer manifest keeps the tokenizer files of the model manifest, nothing else', () => {
    const m = manifestOf([
      { path: 'config.json', size: 1, sha256: H('1') },
      { path: 'tokenizer.json', size: 2, sha256: H('2') },
      { path: 'model.safetensors', size: 3, sha256: H('3') },
      { path: 'tokenizer_config.json', size: 4, sha256: H('4') },
    ]);
    expect(tokenizerFiles(m).files.map((f) => f.path)).toEqual(['tokenizer.json', 'tokenizer_config.json']);
  });

  it('the API reference names every tokenizer file (the CRD cannot import this module)', () => {
    const description = ModelSpec.shape.tokenizerDigest.meta()?.description ?? '';
    for (const name of [
      ...TOKENIZER_FILE_NAMES,
      '*.tiktoken',
      'tokenization_*.py',
      'additional_chat_templates/*.jinja',
    ])
      expect(description).toContain(name);
  });
});

describe('firstMismatch', () => {
  const expected = manifestOf([
    { path: 'a.json', size: 10, sha256: H('a') },
    { path: 'b.safetensors', size: 20, sha256: H('b') },
    { path: 'c.json', size: 30, sha256: H('c') },
  ]);
  const same = expected.files.map((f) => ({ ...f }));

  it('agrees when the files are the manifest', () => {
    expect(firstMismatch(expected, same)).toBeUndefined();
  });

  it.each([
    [
      'missing',
      same.filter((f) => f.path !== 'b.safetensors'),
      'b.safetensors',
      'b.safetensors: in the manifest, not found',
    ],
    [
      'unexpected',
      [...same, { path: 'b.txt', size: 1, sha256: H('d') }],
      'b.txt',
      'b.txt: found, not in the manifest',
    ],
    [
      'size',
      same.map((f) => (f.path === 'c.json' ? { ...f, size: 31 } : f)),
      'c.json',
      'c.json: 31 bytes, the manifest says 30',
    ],
    [
      'sha256',
      same.map((f) => (f.path === 'b.safetensors' ? { ...f, sha256: H('e') } : f)),
      'b.safetensors',
      `b.safetensors: sha256 ${H('e')}, the manifest says ${H('b')}`,
    ],
  ])('reports %s with the file and the reason', (code, observed, path, message) => {
    expect(firstMismatch(expected, observed)).toEqual({ code, path, message });
  });

  it('reports the first bad file in path order, whatever the order observed', () => {
    const observed = [
      { path: 'c.json', size: 1, sha256: H('c') },
      { path: 'b.safetensors', size: 20, sha256: H('f') },
      { path: 'a.json', size: 10, sha256: H('a') },
    ];
    expect(firstMismatch(expected, observed)).toMatchObject({ code: 'sha256', path: 'b.safetensors' });
  });

  it('compares names and sizes only when the observation carries no sha256', () => {
    expect(
      firstMismatch(
        expected,
        same.map(({ path, size }) => ({ path, size })),
      ),
    ).toBeUndefined();
  });
});
