// The record a verification of staged files leaves outside them (`--marker-dir`, a directory of
// the node's own: the files themselves are mounted read-only), so the next pod start on that
// node need not read every byte again (ADR 0019). It holds the digests it proved and each
// file's size, mtime and inode: a later run that finds the same files with the same stats
// trusts it, and anything changed, added or removed sends it through the full hash again.
// Like the fetch marker, it trusts the node's disk: a file rewritten in place with its old
// mtime restored is not noticed.
import { rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import type { ListedFile } from './files.ts';
import { readJsonRecord, writeJsonRecord } from './json-record.ts';

export const STAGED_MARKER_FILE = 'verified.json';

const FileStat = z.object({
  path: z.string(),
  size: z.number().int().nonnegative(),
  mtimeMs: z.number(),
  ino: z.number(),
});
export type FileStat = z.infer<typeof FileStat>;

export const StagedMarker = z.object({
  version: z.literal(1),
  digest: z.string(),
  tokenizerDigest: z.string(),
  tokenizerSubpath: z.string().optional(),
  verifiedAt: z.string(),
  files: z.array(FileStat),
});
export type StagedMarker = z.infer<typeof StagedMarker>;

/** Each listed file's stats (links followed, as the listing and the hash do). */
export async function statFiles(dir: string, files: readonly ListedFile[]): Promise<FileStat[]> {
  return Promise.all(
    files.map(async (f) => {
      const s = await stat(join(dir, f.path));
      return { path: f.path, size: s.size, mtimeMs: s.mtimeMs, ino: s.ino };
    }),
  );
}

/** Pure: the marker vouches for these files and digests. */
export function markerCovers(
  marker: StagedMarker,
  expected: { digest: string; tokenizerDigest: string; tokenizerSubpath?: string | undefined },
  files: readonly FileStat[],
): boolean {
  if (
    marker.digest !== expected.digest ||
    marker.tokenizerDigest !== expected.tokenizerDigest ||
    marker.tokenizerSubpath !== expected.tokenizerSubpath ||
    marker.files.length !== files.length
  )
    return false;
  const byPath = new Map(marker.files.map((f) => [f.path, f]));
  return files.every((f) => {
    const m = byPath.get(f.path);
    return m !== undefined && m.size === f.size && m.mtimeMs === f.mtimeMs && m.ino === f.ino;
  });
}

export function readStagedMarker(dir: string): Promise<StagedMarker | undefined> {
  return readJsonRecord(join(dir, STAGED_MARKER_FILE), StagedMarker);
}

export async function writeStagedMarker(dir: string, marker: StagedMarker): Promise<void> {
  await writeJsonRecord(join(dir, STAGED_MARKER_FILE), `${JSON.stringify(marker)}\n`);
}

export async function removeStagedMarker(dir: string): Promise<void> {
  await rm(join(dir, STAGED_MARKER_FILE), { force: true });
}
