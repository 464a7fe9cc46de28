import { execFileSync } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hashFile, listDirectory, manifestOfDirectory, verifyDirectory } from './files.ts';
import { digestOfManifest, isTokenizerFile, serializeManifest } from './manifest.ts';

// The recipe ADR 0013 gives users: the digest with find, sort, sha256sum and stat only.
const SHELL_RECIPE = `cd "$DIR" && find -L . -type f ! -path '*/.*' -printf '%P\\n' | LC_ALL=C sort |
  while IFS= read -r f; do
    printf '%s %s %s\\n' "$(sha256sum < "$f" | cut -c1-64)" "$(stat -L -c %s "$f")" "$f"
  done | sha256sum | cut -c1-64`;

const roots: string[] = [];
afterAll(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'model-files-'));
  roots.push(d);
  return d;
}

function write(root: string, files: Record<string, string>): void {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), content);
  }
}

/** A model directory as a hub download leaves it, with the litter that must not count. */
function makeModel(): string {
  const root = tempDir();
  const dir = join(root, 'model');
  write(dir, {
    'config.json': '{"architectures":["LlamaForCausalLM"]}',
    'model-00001-of-00002.safetensors': 'weights one',
    'model-00002-of-00002.safetensors': 'weights two!',
    'tokenizer.json': '{"version":"1.0"}',
    'tokenizer_config.json': '{}',
    'empty.txt': '',
    'name with spaces.txt': 'spaces',
    'sub/dir/part.bin': 'nested',
    '.gitattributes': '*.safetensors filter=lfs',
    '.git/HEAD': 'ref: refs/heads/main',
    '.cache/huggingface/download/config.json.metadata': 'abc',
    'sub/.hidden': 'no',
  });
  write(root, { 'blobs/special_tokens_map.json': '{"bos_token":"<s>"}' });
  symlinkSync(join(root, 'blobs/special_tokens_map.json'), join(dir, 'special_tokens_map.json'));
  symlinkSync(join(root, 'blobs/gone'), join(dir, 'dangling'));
  execFileSync('mkfifo', [join(dir, 'fifo')]);
  return dir;
}

const MODEL_FILES = [
  'config.json',
  'empty.txt',
  'model-00001-of-00002.safetensors',
  'model-00002-of-00002.safetensors',
  'name with spaces.txt',
  'special_tokens_map.json',
  'sub/dir/part.bin',
  'tokenizer.json',
  'tokenizer_config.json',
];

describe('manifestOfDirectory', () => {
  it('counts regular files and followed links, not hidden paths, dangling links or fifos', async () => {
    const dir = makeModel();
    expect((await listDirectory(dir)).map((f) => f.path).sort()).toEqual(MODEL_FILES);
    expect((await manifestOfDirectory(dir)).files.map((f) => f.path)).toEqual(MODEL_FILES);
  });

  it("gives the digest the ADR's shell recipe gives (find, sort, sha256sum, stat)", async () => {
    const dir = makeModel();
    const byShell = execFileSync('bash', ['-c', SHELL_RECIPE], { env: { ...process.env, DIR: dir } })
      .toString()
      .trim();
    expect(digestOfManifest(await manifestOfDirectory(dir))).toBe(`sha256:${byShell}`);
  });

  it('with select, keeps only the tokenizer files', async () => {
    const dir = makeModel();
    const m = await manifestOfDirectory(dir, { select: isTokenizerFile });
    expect(m.files.map((f) => f.path)).toEqual([
      'special_tokens_map.json',
      'tokenizer.json',
      'tokenizer_config.json',
    ]);
    expect(serializeManifest(m)).toBe(
      execFileSync(
        'bash',
        [
          '-c',
          `cd "$DIR" && for f in special_tokens_map.json tokenizer.json tokenizer_config.json; do printf '%s %s %s\\n' "$(sha256sum < "$f" | cut -c1-64)" "$(stat -L -c %s "$f")" "$f"; done`,
        ],
        { env: { ...process.env, DIR: dir } },
      ).toString(),
    );
  });

  it('refuses a link that loops back to a directory above it', async () => {
    const dir = makeModel();
    symlinkSync(dir, join(dir, 'sub', 'loop'));
    await expect(manifestOfDirectory(dir)).rejects.toThrow(/loops back/);
  });

  it('refuses a path that is not a directory', async () => {
    const dir = makeModel();
    await expect(manifestOfDirectory(join(dir, 'config.json'))).rejects.toThrow(/not a directory/);
  });
});

describe('hashFile', () => {
  it('streams a file of several MB to the sha256 sha256sum gives and the blob id git gives', async () => {
    const file = join(tempDir(), 'big.bin');
    const fd = openSync(file, 'w');
    const block = Buffer.alloc(1 << 16);
    // 8 MiB and an odd tail, so chunk boundaries fall mid-pattern.
    for (let i = 0; i < 128; i++) writeSync(fd, block.fill(i));
    writeSync(fd, Buffer.from('tail of 19 bytes...'));
    closeSync(fd);
    const h = await hashFile(file, { gitBlobSha1: true });
    expect(h.size).toBe(8 * 1024 * 1024 + 19);
    expect(h.sha256).toBe(execFileSync('sha256sum', [file]).toString().slice(0, 64));
    expect(h.gitBlobSha1).toBe(execFileSync('git', ['hash-object', file]).toString().trim());
  });
});

describe('verifyDirectory', () => {
  it('finds nothing wrong with the files the manifest was made from, hidden litter aside', async () => {
    const dir = makeModel();
    const m = await manifestOfDirectory(dir);
    write(dir, { '.cache/huggingface/new': 'x', '.DS_Store': 'y' });
    expect(await verifyDirectory(dir, m)).toBeUndefined();
  });

  it.each([
    ['missing', (d: string) => unlinkSync(join(d, 'sub/dir/part.bin')), 'sub/dir/part.bin'],
    ['unexpected', (d: string) => write(d, { 'extra.bin': 'x' }), 'extra.bin'],
    ['size', (d: string) => write(d, { 'tokenizer.json': '{"version":"1.01"}' }), 'tokenizer.json'],
    [
      'sha256',
      (d: string) => write(d, { 'model-00002-of-00002.safetensors': 'weights TWO!' }),
      'model-00002-of-00002.safetensors',
    ],
  ])('reports a %s file', async (code, spoil, path) => {
    const dir = makeModel();
    const m = await manifestOfDirectory(dir);
    spoil(dir);
    expect(await verifyDirectory(dir, m)).toMatchObject({ code, path });
  });

  it('reports the first bad content in path order', async () => {
    const dir = makeModel();
    const m = await manifestOfDirectory(dir);
    write(dir, {
      'tokenizer.json': '{"version":"2.0"}',
      'config.json': '{"architectures":["LlamaForCausalLX"]}',
    });
    expect(await verifyDirectory(dir, m)).toMatchObject({ code: 'sha256', path: 'config.json' });
  });

  it('reports a missing file before hashing any content', async () => {
    const dir = makeModel();
    const m = await manifestOfDirectory(dir);
    write(dir, { 'config.json': '{"architectures":["LlamaForCausalLX"]}' });
    unlinkSync(join(dir, 'tokenizer_config.json'));
    expect(await verifyDirectory(dir, m)).toMatchObject({ code: 'missing', path: 'tokenizer_config.json' });
  });
});
