import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { replaceFile } from './replace-file.ts';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('replaceFile', () => {
  it('replaces the file whole, with the mode asked, and leaves nothing else beside it', () => {
    dir = mkdtempSync(join(tmpdir(), 'replace-file-'));
    const file = join(dir, 'endpoints.json');
    writeFileSync(file, 'a much longer old text than the new one', { mode: 0o644 });
    replaceFile(file, '{}', 0o600);
    expect(readFileSync(file, 'utf8')).toBe('{}');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(['endpoints.json']);
  });
});
