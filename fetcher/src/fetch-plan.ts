// What a fetch fetches, from a source's listing (the hub's tree, an object store's keys), and
// the manifest once the files the listing gives no sha256 for are fetched and hashed. Pure.
import {
  manifestFromEntries,
  type Manifest,
  type ManifestEntry,
  type ManifestIssue,
  type Mismatch,
  type Result,
} from './manifest.ts';

/** A file the listing gives no sha256 for: fetched, checked against what it does give, hashed. */
export interface PendingFile {
  readonly path: string;
  readonly size: number;
  /** The hub's id of a file kept in git. */
  readonly gitBlobSha1?: string;
  /** An object store's ETag: the content a resumed download must continue. */
  readonly version?: string;
}

export interface FetchPlan {
  /** Files whose manifest lines the listing gives (the hub's LFS files). */
  readonly known: readonly ManifestEntry[];
  /** Files to fetch and hash first: with them the manifest, and its digests, are whole. */
  readonly pending: readonly PendingFile[];
}

/**
 * The whole manifest once the pending files are fetched and hashed (`hashed`, by path). A
 * pending file that is absent, of another size or another git blob id than listed is a
 * mismatch: the bytes fetched are not the listed ones.
 */
export function manifestFromPlan(
  plan: FetchPlan,
  hashed: ReadonlyMap<string, { size: number; sha256: string; gitBlobSha1?: string | undefined }>,
): Result<Manifest, Mismatch | ManifestIssue> {
  const resolved: ManifestEntry[] = [];
  for (const p of plan.pending) {
    const h = hashed.get(p.path);
    if (!h)
      return {
        ok: false,
        error: { code: 'missing', path: p.path, message: `${p.path}: listed, not fetched` },
      };
    if (h.size !== p.size)
      return {
        ok: false,
        error: {
          code: 'size',
          path: p.path,
          message: `${p.path}: ${h.size} bytes, the listing says ${p.size}`,
        },
      };
    if (p.gitBlobSha1 !== undefined && h.gitBlobSha1 !== p.gitBlobSha1)
      return {
        ok: false,
        error: {
          code: 'git_blob_sha1',
          path: p.path,
          message: `${p.path}: git blob ${h.gitBlobSha1 ?? '(not computed)'}, the listing says ${p.gitBlobSha1}`,
        },
      };
    resolved.push({ path: p.path, size: h.size, sha256: h.sha256 });
  }
  return manifestFromEntries([...plan.known, ...resolved]);
}
