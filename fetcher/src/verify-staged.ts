// Verifies model files someone else put in place (a `pvc` source) against the pinned digests
// (ADR 0013, ADR 0016): every counted file is hashed and the manifest's two digests compared
// with the spec's. Staged files come with no per-file listing to hold them to, so a mismatch
// names the digests (and the counts), not a file; `make model-digest` on a good copy and a
// diff of the two manifests finds it. Read-only: nothing is written next to the files; with
// `markerDir`, a record of what was proved goes there (staged-marker.ts), and a later run on
// the same, unchanged files trusts it instead of reading every byte.
import { join } from 'node:path';
import { computeDigests } from './fetch-digests.ts';
import { ProgressTracker, type FetchProgress } from '#api/model-fetch-progress.ts';
import type { FetchOutcome } from './fetch.ts';
import { hashFile, listDirectory } from './files.ts';
import { manifestFromEntries, type ManifestEntry } from './manifest.ts';
import {
  markerCovers,
  readStagedMarker,
  type FileStat,
  removeStagedMarker,
  statFiles,
  writeStagedMarker,
} from './staged-marker.ts';

export interface VerifyStagedOptions {
  readonly dir: string;
  readonly digest: string;
  readonly tokenizerDigest: string;
  /** The directory the tokenizer digest is over, relative to `dir` (default: its top). */
  readonly tokenizerSubpath?: string | undefined;
  /** A writable directory for the verification record (the node's, beside the read-only files). */
  readonly markerDir?: string | undefined;
  readonly onProgress?: (p: FetchProgress) => void;
}

const unreadable = (where: string, e: unknown, path?: string): FetchOutcome => ({
  ok: false,
  reason: 'FilesUnreadable',
  // Node's message already names the code and the path (EACCES: permission denied, open '…').
  message: `${where}: ${(e as Error).message}`,
  ...(path !== undefined ? { path } : {}),
});

export async function verifyStagedModel(opts: VerifyStagedOptions): Promise<FetchOutcome> {
  const { dir } = opts;
  const progress = new ProgressTracker(opts.onProgress ?? (() => undefined));
  progress.enter('listing');
  let files;
  try {
    files = await listDirectory(dir);
  } catch (e) {
    return unreadable(dir, e);
  }
  const bytes = files.reduce((n, f) => n + f.size, 0);
  if (files.length === 0)
    return {
      ok: false,
      reason: 'ModelDigestMismatch',
      message: `${dir} holds no model files (hidden files and directories do not count): is the claim's subPath right?`,
    };
  progress.setTotals(files.length, bytes);
  let stats: FileStat[] | undefined;
  try {
    stats = opts.markerDir !== undefined ? await statFiles(dir, files) : undefined;
  } catch (e) {
    return unreadable(dir, e);
  }
  if (opts.markerDir !== undefined && stats) {
    const marker = await readStagedMarker(opts.markerDir);
    if (marker && markerCovers(marker, opts, stats)) {
      progress.allDone(files);
      return {
        ok: true,
        digest: marker.digest,
        tokenizerDigest: marker.tokenizerDigest,
        files: files.length,
        bytes,
        downloadedBytes: 0,
        fromMarker: true,
      };
    }
    // Whatever it said is not of these files: gone before the full check, so a failure leaves none.
    await removeStagedMarker(opts.markerDir);
  }
  progress.enter('verifying');
  const entries: ManifestEntry[] = [];
  for (const f of files) {
    try {
      const { size, sha256 } = await hashFile(join(dir, f.path));
      entries.push({ path: f.path, size, sha256 });
      progress.fileDone(f.path, size);
    } catch (e) {
      return unreadable(dir, e, f.path);
    }
  }
  const manifest = manifestFromEntries(entries);
  if (!manifest.ok)
    return {
      ok: false,
      reason: 'ModelDigestMismatch',
      message: manifest.error.message,
      path: manifest.error.path,
    };
  const computed = computeDigests(manifest.value, opts.tokenizerSubpath);
  for (const [field, what] of [
    ['digest', 'model digest'],
    ['tokenizerDigest', 'tokenizer digest'],
  ] as const)
    if (computed[field] !== opts[field])
      return {
        ok: false,
        reason: 'ModelDigestMismatch',
        message:
          `the ${files.length} files (${bytes} bytes) in ${dir} have ${what} ${computed[field]}, the spec pins ${opts[field]}: ` +
          'they are not the pinned files (compare `make model-digest DIR=… ARGS=--manifest model` of a good copy with these)',
      };
  if (opts.markerDir !== undefined && stats)
    await writeStagedMarker(opts.markerDir, {
      version: 1,
      ...computed,
      ...(opts.tokenizerSubpath !== undefined ? { tokenizerSubpath: opts.tokenizerSubpath } : {}),
      verifiedAt: new Date().toISOString(),
      files: stats,
    });
  return {
    ok: true,
    ...computed,
    files: files.length,
    bytes,
    downloadedBytes: 0,
    fromMarker: false,
  };
}
