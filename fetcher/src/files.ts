// The manifest of files on disk (ADR 0013): a walk that counts what `find -L DIR -type f`
// finds, less hidden paths, and a hash of each file streamed through sha256 (never a whole
// file in memory: weights are tens of GB).
import { createHash } from 'node:crypto';
import { open, readdir, realpath, stat } from 'node:fs/promises';
import { join } from 'node:path';
import {
  firstMismatch,
  isCountedPath,
  manifestFromEntries,
  type Manifest,
  type ManifestEntry,
  type Mismatch,
} from './manifest.ts';

export interface FileHash {
  readonly size: number;
  readonly sha256: string;
  /** git's blob id, sha1 of `blob <size>\0<content>`: what the hub lists for files kept in git. */
  readonly gitBlobSha1?: string;
}

const CHUNK = 1 << 20;

export async function hashFile(file: string, opts: { gitBlobSha1?: boolean } = {}): Promise<FileHash> {
  const handle = await open(file, 'r');
  try {
    const { size } = await handle.stat();
    const sha256 = createHash('sha256');
    const sha1 = opts.gitBlobSha1 ? createHash('sha1').update(`blob ${size}\0`) : undefined;
    let read = 0;
    for await (const chunk of handle.createReadStream({ highWaterMark: CHUNK, autoClose: false })) {
      const bytes = chunk as Buffer;
      sha256.update(bytes);
      sha1?.update(bytes);
      read += bytes.length;
    }
    // The git header carries the size read before the content: a file that grew or shrank meanwhile has no one hash.
    if (read !== size) throw new Error(`${file}: changed while it was read (${size} bytes, then ${read})`);
    return { size, sha256: sha256.digest('hex'), ...(sha1 ? { gitBlobSha1: sha1.digest('hex') } : {}) };
  } finally {
    await handle.close();
  }
}

export interface ListedFile {
  readonly path: string;
  readonly size: number;
}

export interface WalkOptions {
  /** Narrows the counted files, e.g. to `isTokenizerFile`; hidden paths never count. */
  readonly select?: (path: string) => boolean;
}

/**
 * The counted files below `dir` with their sizes. Symbolic links are followed (a hub cache
 * snapshot is links into blobs/); a link that loops back to a directory above it is an
 * error, a dangling link and anything not a regular file are passed over, as with find -L.
 */
export async function listDirectory(dir: string, opts: WalkOptions = {}): Promise<ListedFile[]> {
  const root = await stat(dir);
  if (!root.isDirectory()) throw new Error(`${dir}: not a directory`);
  const out: ListedFile[] = [];
  const walk = async (rel: string, ancestors: readonly string[]): Promise<void> => {
    const abs = rel === '' ? dir : join(dir, rel);
    const real = await realpath(abs);
    if (ancestors.includes(real)) throw new Error(`${abs}: a symbolic link loops back to ${real}`);
    const names = (await readdir(abs)).sort();
    for (const name of names) {
      const path = rel === '' ? name : `${rel}/${name}`;
      if (!isCountedPath(path)) continue;
      const info = await stat(join(dir, path)).catch((e: unknown) => {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw e;
      });
      if (info?.isDirectory()) await walk(path, [...ancestors, real]);
      else if (info?.isFile() && (opts.select?.(path) ?? true)) out.push({ path, size: info.size });
    }
  };
  await walk('', []);
  return out;
}

export async function manifestOfDirectory(dir: string, opts: WalkOptions = {}): Promise<Manifest> {
  const entries: ManifestEntry[] = [];
  for (const f of await listDirectory(dir, opts)) {
    const { size, sha256 } = await hashFile(join(dir, f.path));
    entries.push({ path: f.path, size, sha256 });
  }
  const manifest = manifestFromEntries(entries);
  if (!manifest.ok) throw new Error(`${dir}: ${manifest.error.message}`);
  return manifest.value;
}

/**
 * The first file of `dir` that differs from `manifest`, or undefined. Names and sizes of all
 * files are compared before any content is hashed, so a missing or truncated file is
 * reported without reading the rest; then contents in path order, stopping at the first bad one.
 */
export async function verifyDirectory(
  dir: string,
  manifest: Manifest,
  opts: WalkOptions = {},
): Promise<Mismatch | undefined> {
  const listed = await listDirectory(dir, opts);
  const structural = firstMismatch(manifest, listed);
  if (structural) return structural;
  for (const expected of manifest.files) {
    const { size, sha256 } = await hashFile(join(dir, expected.path));
    const bad = firstMismatch({ files: [expected] }, [{ path: expected.path, size, sha256 }]);
    if (bad) return bad;
  }
  return undefined;
}
