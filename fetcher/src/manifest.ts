// What `spec.model.digest` and `spec.model.tokenizerDigest` are a digest of (ADR 0013):
// the sha256 of a canonical manifest of files, one line per file, sorted by path in byte
// order:
//
//   <sha256 of the content, 64 lower-case hex> <size in bytes, decimal> <relative POSIX path>\n
//
// The digest is `sha256:` + the sha256 of those bytes (UTF-8), so a user can reproduce it
// with find, sort, sha256sum and stat (docs in ADR 0013). Files under a path component that
// starts with `.` do not count: `.git/`, the hub's `.cache/huggingface/` download metadata,
// `.gitattributes`, editor and OS litter. The tokenizer digest is the same manifest over the
// tokenizer's files only (`isTokenizerFile`).
//
// Pure: data in, data out. Reading files is files.ts; the hub's listing is hub.ts.
import { createHash } from 'node:crypto';

export interface ManifestEntry {
  /** Relative POSIX path, no `.`/`..` components, no line breaks. */
  readonly path: string;
  readonly size: number;
  /** 64 lower-case hex digits. */
  readonly sha256: string;
}

/** Entries sorted by path in byte order, paths unique: only `manifestFromEntries` makes one. */
export interface Manifest {
  readonly files: readonly ManifestEntry[];
}

export type Result<T, E> = { ok: true; value: T } | { ok: false; error: E };

export const MANIFEST_ISSUE_CODES = [
  'invalid_path',
  'duplicate_path',
  'invalid_size',
  'invalid_sha256',
] as const;
export interface ManifestIssue {
  readonly code: (typeof MANIFEST_ISSUE_CODES)[number];
  readonly path: string;
  readonly message: string;
}

/** Why files differ from a manifest; `git_blob_sha1` only for hub files listed without a sha256. */
export const MISMATCH_CODES = ['missing', 'unexpected', 'size', 'sha256', 'git_blob_sha1'] as const;
export interface Mismatch {
  readonly code: (typeof MISMATCH_CODES)[number];
  readonly path: string;
  readonly message: string;
}

const SHA256_RE = /^[a-f0-9]{64}$/;

/** Why a path cannot stand in a manifest, or undefined when it can. */
export function checkPath(path: string): string | undefined {
  if (path.length === 0) return 'empty path';
  // A line break would split the line; NUL cannot be in a file name anyway.
  if (/[\n\r\0]/.test(path)) return 'a path with a line break or NUL has no line in a manifest';
  if (path.startsWith('/')) return 'absolute path; paths are relative to the model directory';
  if (path.split('/').some((c) => c === '' || c === '.' || c === '..'))
    return 'empty, `.` or `..` path component';
  return undefined;
}

/** Hidden files and directories (any component starting with `.`) are not model content. */
export function isCountedPath(path: string): boolean {
  return !path.split('/').some((c) => c.startsWith('.'));
}

// JS string order is UTF-16 code units; `LC_ALL=C sort` and other tools order UTF-8 bytes,
// which differ above the BMP. The manifest follows the bytes.
export function comparePaths(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function sortByPath<T extends { readonly path: string }>(items: readonly T[]): T[] {
  return items
    .map((item) => ({ item, key: Buffer.from(item.path, 'utf8') }))
    .sort((x, y) => Buffer.compare(x.key, y.key))
    .map((x) => x.item);
}

export function manifestFromEntries(entries: readonly ManifestEntry[]): Result<Manifest, ManifestIssue> {
  const seen = new Set<string>();
  for (const e of entries) {
    const bad = checkPath(e.path);
    if (bad)
      return { ok: false, error: { code: 'invalid_path', path: e.path, message: `${e.path}: ${bad}` } };
    if (seen.has(e.path))
      return {
        ok: false,
        error: { code: 'duplicate_path', path: e.path, message: `${e.path}: listed twice` },
      };
    seen.add(e.path);
    if (!Number.isSafeInteger(e.size) || e.size < 0)
      return {
        ok: false,
        error: {
          code: 'invalid_size',
          path: e.path,
          message: `${e.path}: size ${e.size} is not a byte count`,
        },
      };
    if (!SHA256_RE.test(e.sha256))
      return {
        ok: false,
        error: {
          code: 'invalid_sha256',
          path: e.path,
          message: `${e.path}: sha256 must be 64 lower-case hex digits`,
        },
      };
  }
  return {
    ok: true,
    value: { files: sortByPath(entries).map(({ path, size, sha256 }) => ({ path, size, sha256 })) },
  };
}

/** The exact bytes the digest is taken over (as a string; UTF-8 encoded when hashed). */
export function serializeManifest(manifest: Manifest): string {
  return manifest.files.map((f) => `${f.sha256} ${f.size} ${f.path}\n`).join('');
}

export function digestOfManifest(manifest: Manifest): string {
  return `sha256:${createHash('sha256').update(serializeManifest(manifest), 'utf8').digest('hex')}`;
}

export function selectFiles(manifest: Manifest, select: (path: string) => boolean): Manifest {
  return { files: manifest.files.filter((f) => select(f.path)) };
}

/**
 * The files a tokenizer is loaded from (transformers' AutoTokenizer and SGLang's chat
 * templates), at the top of the tokenizer directory: that is the model directory unless
 * `tokenizerPath` names another. Custom tokenizer code counts: with trust_remote_code it
 * decides the tokens.
 */
export const TOKENIZER_FILE_NAMES = [
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'added_tokens.json',
  'tokenizer.model',
  'spiece.model',
  'sentencepiece.bpe.model',
  'tiktoken.model',
  'vocab.json',
  'vocab.txt',
  'merges.txt',
  'chat_template.jinja',
  'chat_template.json',
] as const;
const TOKENIZER_NAMES = new Set<string>(TOKENIZER_FILE_NAMES);
const TOKENIZER_PATTERNS = [
  /^[^/]+\.tiktoken$/,
  /^tokenization_[^/]+\.py$/,
  /^additional_chat_templates\/[^/]+\.jinja$/,
];

export function isTokenizerFile(path: string): boolean {
  return TOKENIZER_NAMES.has(path) || TOKENIZER_PATTERNS.some((re) => re.test(path));
}

export function tokenizerFiles(manifest: Manifest): Manifest {
  return selectFiles(manifest, isTokenizerFile);
}

/** A file as seen without (yet) its content hash: the structural half of a comparison. */
export interface ObservedFile {
  readonly path: string;
  readonly size: number;
  readonly sha256?: string | undefined;
}

/**
 * The first difference between what a manifest lists and what was observed, in path byte
 * order: a listed file absent (missing), an observed file not listed (unexpected), a size,
 * then a sha256 where the observation has one. Undefined when they agree.
 */
export function firstMismatch(expected: Manifest, observed: readonly ObservedFile[]): Mismatch | undefined {
  const want = expected.files;
  const have = sortByPath(observed);
  let i = 0;
  let j = 0;
  while (i < want.length || j < have.length) {
    const w = want[i];
    const h = have[j];
    const order = w && h ? comparePaths(w.path, h.path) : w ? -1 : 1;
    if (order < 0 && w)
      return { code: 'missing', path: w.path, message: `${w.path}: in the manifest, not found` };
    if (order > 0 && h)
      return { code: 'unexpected', path: h.path, message: `${h.path}: found, not in the manifest` };
    if (w && h) {
      if (w.size !== h.size)
        return {
          code: 'size',
          path: w.path,
          message: `${w.path}: ${h.size} bytes, the manifest says ${w.size}`,
        };
      if (h.sha256 !== undefined && h.sha256 !== w.sha256)
        return {
          code: 'sha256',
          path: w.path,
          message: `${w.path}: sha256 ${h.sha256}, the manifest says ${w.sha256}`,
        };
    }
    i++;
    j++;
  }
  return undefined;
}
