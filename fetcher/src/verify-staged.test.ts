// Staged files against the pinned digests, on real files: the same files pass, one changed
// byte, one more file or a tokenizer elsewhere do not; unreadable files say so.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FetchProgress } from '#api/model-fetch-progress.ts';
import { manifestOfDirectory } from './files.ts';
import { digestOfManifest, isTokenizerFile } from './manifest.ts';
import { verifyStagedModel } from './verify-staged.ts';

const root = mkdtempSync(join(tmpdir(), 'verify-staged-'));
let n = 0;
let pinned = { digest: '', tokenizerDigest: '' };

function stage(weights: Buffer): string {
  const dir = join(root, `m${n++}`);
  mkdirSync(dir);
  writeFileSync(join(dir, 'config.json'), '{"hidden_size":64}');
  writeFileSync(join(dir, 'tokenizer.json'), '{"model":{"type":"BPE"}}');
  writeFileSync(join(dir, 'model.safetensors'), weights);
  return dir;
}

const WEIGHTS = randomBytes(256 * 1024);

beforeAll(async () => {
  const dir = stage(WEIGHTS);
  pinned = {
    digest: digestOfManifest(await manifestOfDirectory(dir)),
    tokenizerDigest: digestOfManifest(await manifestOfDirectory(dir, { select: isTokenizerFile })),
  };
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('verifyStagedModel', () => {
  it('passes the pinned files, reading every one, with progress to the last byte', async () => {
    const events: FetchProgress[] = [];
    const r = await verifyStagedModel({ dir: stage(WEIGHTS), ...pinned, onProgress: (p) => events.push(p) });
    expect(r).toEqual({
      ok: true,
      ...pinned,
      files: 3,
      bytes: WEIGHTS.length + 18 + 24,
      downloadedBytes: 0,
      fromMarker: false,
    });
    expect(events.at(-1)).toMatchObject({ phase: 'verifying', filesDone: 3, bytesDone: WEIGHTS.length + 42 });
  });

  it('refuses one changed byte of the same size, naming both digests', async () => {
    const changed = Buffer.from(WEIGHTS);
    changed[1000] = (changed[1000] ?? 0) ^ 1;
    const r = await verifyStagedModel({ dir: stage(changed), ...pinned });
    expect(r).toMatchObject({ ok: false, reason: 'ModelDigestMismatch' });
    if (r.ok) return;
    expect(r.message).toContain(`the spec pins ${pinned.digest}`);
    expect(r.message).toMatch(/the 3 files \(\d+ bytes\) in .* have model digest sha256:[0-9a-f]{64}/);
  });

  it('refuses a file more, and the tokenizer digest of another directory', async () => {
    const extra = stage(WEIGHTS);
    writeFileSync(join(extra, 'notes.txt'), 'x');
    expect(await verifyStagedModel({ dir: extra, ...pinned })).toMatchObject({
      reason: 'ModelDigestMismatch',
    });
    const r = await verifyStagedModel({ dir: stage(WEIGHTS), ...pinned, tokenizerSubpath: 'tok' });
    expect(r).toMatchObject({ ok: false, reason: 'ModelDigestMismatch' });
    if (!r.ok) expect(r.message).toContain('tokenizer digest');
  });

  it('with a marker directory, trusts its record for the same files, and reads every byte again for changed ones', async () => {
    const dir = stage(WEIGHTS);
    const markers = join(root, `markers-${n++}`);
    mkdirSync(markers);
    const first = await verifyStagedModel({ dir, ...pinned, markerDir: markers });
    expect(first).toMatchObject({ ok: true, fromMarker: false });
    expect(await verifyStagedModel({ dir, ...pinned, markerDir: markers })).toMatchObject({
      ok: true,
      fromMarker: true,
    });
    // Another pin: the record is not of it, and the files are not its files.
    expect(
      await verifyStagedModel({ dir, ...pinned, digest: `sha256:${'0'.repeat(64)}`, markerDir: markers }),
    ).toMatchObject({ ok: false, reason: 'ModelDigestMismatch' });
    // That failure took the record with it: the pinned run reads everything again, and passes.
    expect(await verifyStagedModel({ dir, ...pinned, markerDir: markers })).toMatchObject({
      fromMarker: false,
    });
    // A byte changed (same size, a new mtime): caught, not trusted.
    const changed = Buffer.from(WEIGHTS);
    changed[7] = (changed[7] ?? 0) ^ 1;
    writeFileSync(join(dir, 'model.safetensors'), changed);
    utimesSync(join(dir, 'model.safetensors'), new Date(), new Date(Date.now() + 5_000));
    expect(await verifyStagedModel({ dir, ...pinned, markerDir: markers })).toMatchObject({
      ok: false,
      reason: 'ModelDigestMismatch',
    });
  });

  it('says when there is nothing to verify or it cannot be read', async () => {
    const empty = join(root, 'empty');
    mkdirSync(empty);
    const none = await verifyStagedModel({ dir: empty, ...pinned });
    expect(none).toMatchObject({ ok: false, reason: 'ModelDigestMismatch' });
    if (!none.ok) expect(none.message).toContain('no model files');
    expect(await verifyStagedModel({ dir: join(root, 'nope'), ...pinned })).toMatchObject({
      ok: false,
      reason: 'FilesUnreadable',
    });
    // Root reads any file: the permission case only holds for another user.
    if (process.getuid?.() === 0) return;
    const locked = stage(WEIGHTS);
    chmodSync(join(locked, 'model.safetensors'), 0o000);
    expect(await verifyStagedModel({ dir: locked, ...pinned })).toMatchObject({
      reason: 'FilesUnreadable',
      path: 'model.safetensors',
    });
  });
});
