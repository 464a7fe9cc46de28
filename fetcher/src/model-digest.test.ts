import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const CLI = fileURLToPath(new URL('./model-digest.ts', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'model-digest-cli-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
    });
  });
}

function dir(name: string, files: Record<string, string>): string {
  const d = join(root, name);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(d, path, '..'), { recursive: true });
    writeFileSync(join(d, path), content);
  }
  mkdirSync(d, { recursive: true });
  return d;
}

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
const line = (content: string, path: string): string =>
  `${sha256(content)} ${Buffer.byteLength(content)} ${path}\n`;

const model = dir('model', {
  'config.json': '{"a":1}',
  'model.safetensors': 'weights',
  'tokenizer.json': '{"t":1}',
  '.git/HEAD': 'ref',
});

describe('model-digest', () => {
  it('prints the digest and the tokenizer digest, ready for spec.model', async () => {
    const modelText =
      line('{"a":1}', 'config.json') +
      line('weights', 'model.safetensors') +
      line('{"t":1}', 'tokenizer.json');
    const tokenizerText = line('{"t":1}', 'tokenizer.json');
    expect(await run(model)).toEqual({
      code: 0,
      stdout: `digest: sha256:${sha256(modelText)}\ntokenizerDigest: sha256:${sha256(tokenizerText)}\n`,
      stderr: '',
    });
  });

  it('prints a manifest whose sha256 is the digest with --manifest', async () => {
    const [digests, manifest, tokenizer] = await Promise.all([
      run(model),
      run(model, '--manifest', 'model'),
      run(model, '--manifest=tokenizer'),
    ]);
    expect(digests.stdout).toContain(`digest: sha256:${sha256(manifest.stdout)}\n`);
    expect(digests.stdout).toContain(`tokenizerDigest: sha256:${sha256(tokenizer.stdout)}\n`);
    expect(tokenizer.stdout).toBe(line('{"t":1}', 'tokenizer.json'));
  });

  it('takes the tokenizer from --tokenizer-dir', async () => {
    const weightsOnly = dir('weights-only', { 'model.safetensors': 'weights' });
    const tok = dir('tok', { 'tokenizer.json': '{"t":2}', 'tokenizer_config.json': '{}' });
    const r = await run(weightsOnly, '--tokenizer-dir', tok);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      `tokenizerDigest: sha256:${sha256(line('{"t":2}', 'tokenizer.json') + line('{}', 'tokenizer_config.json'))}\n`,
    );
  });

  it.each([
    ['a missing directory', [join(root, 'nope')], 1, /^model-digest: .*nope: no such directory\n$/],
    ['a file for a directory', [join(model, 'config.json')], 1, /config\.json: not a directory/],
    [
      'a directory with only hidden files',
      [dir('hidden', { '.git/HEAD': 'x', '.gitattributes': 'y' })],
      1,
      /no model files \(hidden files/,
    ],
    [
      'no tokenizer files',
      [dir('no-tok', { 'model.safetensors': 'w' })],
      1,
      /no tokenizer files .*pass --tokenizer-dir/,
    ],
    ['no directory', [], 2, /give exactly one model directory\nusage: model-digest/],
    ['two directories', [model, model], 2, /give exactly one model directory/],
    ['an unknown flag', [model, '--digest'], 2, /Unknown option '--digest'/],
    [
      'a bad --manifest',
      [model, '--manifest', 'weights'],
      2,
      /--manifest takes model or tokenizer, not "weights"/,
    ],
  ])('exits non-zero with a clear message and prints nothing for %s', async (_name, args, code, message) => {
    const r = await run(...args);
    expect(r).toMatchObject({ code, stdout: '' });
    expect(r.stderr).toMatch(message);
  });
});
