// The manifest of a Hugging Face hub repository at a commit, from its file listing, before
// the weights are downloaded (ADR 0013).
//
// `GET /api/models/{repo}/tree/{commit}?recursive=true` answers a JSON array (more pages
// behind a `Link: <…>; rel="next"` header) of entries `{type, path, size, oid}`; `oid` is
// the git object id (sha1). Files kept in LFS also carry `lfs: {oid, size, pointerSize}`,
// where `lfs.oid` is the sha256 of the content: their manifest lines are known from the
// listing alone. Files kept in git (config, tokenizer files: small) have only their git
// blob sha1, so they are fetched first, checked against that id and hashed; with their
// sha256 the manifest, and its digest, is complete before any weight is fetched.
import { z } from 'zod';
import type { FetchPlan, PendingFile } from './fetch-plan.ts';
import { checkPath, isCountedPath, type ManifestEntry, type ManifestIssue, type Result } from './manifest.ts';

const GitObjectId = z.string().regex(/^[a-f0-9]{40}$/);

export const HubTreeEntry = z
  .object({
    type: z.enum(['file', 'directory', 'unknown']),
    path: z.string().min(1),
    size: z.number().int().nonnegative(),
    oid: GitObjectId,
    lfs: z
      .object({
        oid: z.string().regex(/^[a-f0-9]{64}$/),
        size: z.number().int().nonnegative(),
        pointerSize: z.number().int().nonnegative(),
      })
      .optional(),
    xetHash: z.string().optional(),
  })
  .meta({
    description: 'One entry of the hub tree listing; unknown fields (lastCommit, security) are dropped.',
  });
export type HubTreeEntry = z.infer<typeof HubTreeEntry>;

export const HubTreeListing = z.array(HubTreeEntry);
export type HubTreeListing = z.infer<typeof HubTreeListing>;

export function planFromHubListing(
  listing: HubTreeListing,
  select: (path: string) => boolean = () => true,
): Result<FetchPlan, ManifestIssue> {
  const known: ManifestEntry[] = [];
  const pending: PendingFile[] = [];
  for (const e of listing) {
    if (e.type !== 'file') continue;
    // Before the hidden-path filter: `../x` starts with a dot too, and must be refused, not skipped.
    const bad = checkPath(e.path);
    if (bad)
      return { ok: false, error: { code: 'invalid_path', path: e.path, message: `${e.path}: ${bad}` } };
    if (!isCountedPath(e.path) || !select(e.path)) continue;
    if (e.lfs) known.push({ path: e.path, size: e.lfs.size, sha256: e.lfs.oid });
    else pending.push({ path: e.path, size: e.size, gitBlobSha1: e.oid });
  }
  return { ok: true, value: { known, pending } };
}
