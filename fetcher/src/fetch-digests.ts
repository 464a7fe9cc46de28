// The two digests of a model's manifest, as the spec pins them (ADR 0013), and their
// comparison with what was asked for. Pure.
import { digestOfManifest, isTokenizerFile, type Manifest, type Result } from './manifest.ts';

export interface ModelDigests {
  readonly digest: string;
  readonly tokenizerDigest: string;
}

/**
 * The tokenizer's files at the top of `subpath` (a directory of the repository), with paths
 * relative to it, as `make model-digest --tokenizer-dir` sees that directory; the model's
 * top level without it.
 */
export function tokenizerManifestAt(manifest: Manifest, subpath?: string): Manifest {
  if (subpath === undefined) return { files: manifest.files.filter((f) => isTokenizerFile(f.path)) };
  const prefix = `${subpath}/`;
  // Stripping one common prefix keeps the byte order and the uniqueness of the paths.
  return {
    files: manifest.files
      .filter((f) => f.path.startsWith(prefix))
      .map((f) => ({ ...f, path: f.path.slice(prefix.length) }))
      .filter((f) => isTokenizerFile(f.path)),
  };
}

export function computeDigests(manifest: Manifest, tokenizerSubpath?: string): ModelDigests {
  return {
    digest: digestOfManifest(manifest),
    tokenizerDigest: digestOfManifest(tokenizerManifestAt(manifest, tokenizerSubpath)),
  };
}

export interface DigestMismatch {
  readonly field: 'digest' | 'tokenizerDigest';
  readonly expected: string;
  readonly computed: string;
  readonly message: string;
}

/** Whose files a mismatch is about, and the likely cause, in words. */
export interface DigestBlame {
  readonly what: string;
  readonly hint: string;
}

const COMMIT_BLAME: DigestBlame = {
  what: "the commit's files",
  hint: 'the revision is not the commit those digests were taken of',
};

export function checkDigests(
  manifest: Manifest,
  expected: ModelDigests,
  tokenizerSubpath?: string,
  blame: DigestBlame = COMMIT_BLAME,
): Result<ModelDigests, DigestMismatch> {
  const computed = computeDigests(manifest, tokenizerSubpath);
  for (const field of ['digest', 'tokenizerDigest'] as const) {
    if (computed[field] !== expected[field])
      return {
        ok: false,
        error: {
          field,
          expected: expected[field],
          computed: computed[field],
          message:
            `${blame.what} have ${field === 'digest' ? 'model digest' : 'tokenizer digest'} ${computed[field]}, ` +
            `the spec pins ${expected[field]}: ${blame.hint}, ` +
            `or the digests are of other files (${field === 'digest' ? 'all files but hidden ones count' : 'tokenizer files only'}; ADR 0013)`,
        },
      };
  }
  return { ok: true, value: computed };
}
