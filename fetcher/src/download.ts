// One file from its origin (the hub's `{endpoint}/{repo}/resolve/{revision}/{path}`, an object
// store's `s3://bucket/prefix/{path}`) into the model directory: streamed into a partial file under `.cacheroute-partial/` (hidden: outside the manifest),
// its size and hashes checked while it streams, then renamed into place, so a file at its
// final path is always a verified one. A partial file left by a dropped connection or an
// earlier run is resumed with a Range request; its bytes are hashed again from disk first.
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { FetchFailure, TransientFailure } from './fetch-reasons.ts';
import { withRetries, type RetryPolicy } from './retry.ts';

export const PARTIAL_DIR = '.cacheroute-partial';

/** What the file must be: its size and a sha256 (LFS) or a git blob id (files kept in git). */
export interface ExpectedFile {
  readonly path: string;
  readonly size: number;
  readonly sha256?: string;
  readonly gitBlobSha1?: string;
  /** The origin's name for this content where it lists no hash (an object's ETag). */
  readonly version?: string;
}

/**
 * Where files' bytes come from. `open` answers with the bytes from `offset` (`start` equal to
 * it), the whole file (`start` 0), or `refused` when the origin will not resume there.
 */
export interface FileOrigin {
  /** What the sizes and hashes come from, in messages: "the listing of commit <id>". */
  readonly listing: string;
  readonly open: (file: ExpectedFile, offset: number, signal: AbortSignal | undefined) => Promise<OpenedFile>;
}

export interface OpenedFile {
  readonly start: number | 'refused';
  /** Bytes in this answer, when the origin says. */
  readonly length: number | undefined;
  readonly body: AsyncIterable<Uint8Array>;
  /** Drops an answer not read. */
  readonly discard: () => Promise<void>;
}

export interface DownloadedFile {
  readonly size: number;
  readonly sha256: string;
  readonly gitBlobSha1?: string;
}

export interface DownloadContext {
  readonly origin: FileOrigin;
  readonly dir: string;
  readonly retry: RetryPolicy;
  /** Bytes of this file held so far (absolute, may go down when a partial file is dropped). */
  readonly onBytes: (path: string, held: number) => void;
  /** Bytes received from the network. */
  readonly onReceived: (bytes: number) => void;
}

export function partialPathFor(dir: string, file: ExpectedFile): string {
  // Named by path and content: stable across runs (to resume), distinct for two paths with one content.
  const id = createHash('sha256')
    .update(`${file.path}\0${file.sha256 ?? file.gitBlobSha1 ?? file.version ?? ''}`)
    .digest('hex');
  return join(dir, PARTIAL_DIR, `${id}.part`);
}

interface Hashes {
  readonly sha256: Hash;
  readonly sha1: Hash | undefined;
}

function startHashes(file: ExpectedFile): Hashes {
  return {
    sha256: createHash('sha256'),
    // git's blob id hashes a header with the size first; a file of another size fails on size.
    sha1: file.gitBlobSha1 ? createHash('sha1').update(`blob ${file.size}\0`) : undefined,
  };
}

async function sizeOnDisk(path: string): Promise<number> {
  const info = await stat(path).catch(() => undefined);
  return info?.isFile() ? info.size : 0;
}

async function hashPrefix(path: string, hashes: Hashes): Promise<void> {
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
    hashes.sha256.update(chunk as Buffer);
    hashes.sha1?.update(chunk as Buffer);
  }
}

function checkHashes(
  file: ExpectedFile,
  hashes: Hashes,
  listing: string,
): { got: DownloadedFile; bad?: string } {
  const sha256 = hashes.sha256.digest('hex');
  const sha1 = hashes.sha1?.digest('hex');
  const got = { size: file.size, sha256, ...(sha1 ? { gitBlobSha1: sha1 } : {}) };
  if (file.sha256 !== undefined && sha256 !== file.sha256)
    return {
      got,
      bad: `${file.path}: sha256 ${sha256}, ${listing} says ${file.sha256}`,
    };
  if (file.gitBlobSha1 !== undefined && sha1 !== file.gitBlobSha1)
    return {
      got,
      bad: `${file.path}: git blob ${sha1 ?? '?'}, ${listing} says ${file.gitBlobSha1}`,
    };
  return { got };
}

// Each chunk is written (and awaited) before the next is read: whatever arrived before a
// dropped connection is on disk, so the next attempt resumes from there.
async function streamInto(
  ctx: DownloadContext,
  file: ExpectedFile,
  res: OpenedFile,
  partial: string,
  offset: number,
  hashes: Hashes,
  signal: AbortSignal | undefined,
): Promise<number> {
  let held = offset;
  const sink = await open(partial, offset > 0 ? 'a' : 'w');
  try {
    for await (const data of res.body) {
      const chunk = data as Buffer;
      if (held + chunk.length > file.size) {
        await sink.close();
        await rm(partial, { force: true });
        const message = `${file.path}: more than the ${file.size} bytes listed`;
        throw new FetchFailure('ModelDigestMismatch', message, { path: file.path });
      }
      await writeAll(sink, chunk, file.path, partial);
      held += chunk.length;
      hashes.sha256.update(chunk);
      hashes.sha1?.update(chunk);
      ctx.onReceived(chunk.length);
      ctx.onBytes(file.path, held);
    }
  } catch (e) {
    if (e instanceof FetchFailure || signal?.aborted) throw e;
    throw new TransientFailure(`${file.path}: the download broke off: ${(e as Error).message}`, { cause: e });
  } finally {
    await sink.close().catch(() => undefined);
  }
  return held;
}

async function writeAll(sink: FileHandle, chunk: Buffer, path: string, partial: string): Promise<void> {
  try {
    for (let done = 0; done < chunk.length;) done += (await sink.write(chunk, done)).bytesWritten;
  } catch (e) {
    // A full or read-only disk does not get better with another request.
    throw new FetchFailure('DownloadFailed', `${path}: cannot write ${partial}: ${(e as Error).message}`, {
      path,
      cause: e,
    });
  }
}

/** The partial file's size and its bytes hashed, or 0 and fresh hashes without a usable one. */
async function resumeFrom(partial: string, file: ExpectedFile): Promise<{ offset: number; hashes: Hashes }> {
  const hashes = startHashes(file);
  const offset = await sizeOnDisk(partial);
  if (offset > file.size) await rm(partial, { force: true });
  else if (offset > 0) await hashPrefix(partial, hashes);
  return { offset: offset > file.size ? 0 : offset, hashes };
}

/** The origin's answer from `offset`, checked to continue the partial file or replace it. */
async function requestFrom(
  ctx: DownloadContext,
  file: ExpectedFile,
  partial: string,
  offset: number,
  signal: AbortSignal | undefined,
): Promise<OpenedFile> {
  const res = await ctx.origin.open(file, offset, signal);
  if (res.start === 'refused' || (res.start !== 0 && res.start !== offset)) {
    await res.discard();
    await rm(partial, { force: true });
    throw new TransientFailure(`${file.path}: the server did not resume at byte ${offset}`);
  }
  const total = res.start + (res.length ?? 0);
  if (res.length !== undefined && total !== file.size) {
    await res.discard();
    await rm(partial, { force: true });
    throw new FetchFailure(
      'ModelDigestMismatch',
      `${file.path}: the server sends ${total} bytes, ${ctx.origin.listing} says ${file.size}`,
      { path: file.path },
    );
  }
  return res;
}

async function attempt(
  ctx: DownloadContext,
  file: ExpectedFile,
  state: { restarted: boolean },
  signal: AbortSignal | undefined,
): Promise<DownloadedFile> {
  const partial = partialPathFor(ctx.dir, file);
  await mkdir(dirname(partial), { recursive: true });
  let { offset, hashes } = await resumeFrom(partial, file);
  const resumed = offset > 0;
  ctx.onBytes(file.path, offset);
  if (offset < file.size) {
    const res = await requestFrom(ctx, file, partial, offset, signal);
    if (res.start === 0 && offset > 0) {
      // The server sent the whole file instead: start over with it.
      hashes = startHashes(file);
      offset = 0;
    }
    const held = await streamInto(ctx, file, res, partial, offset, hashes, signal);
    if (held < file.size)
      throw new TransientFailure(`${file.path}: the download ended after ${held} of ${file.size} bytes`);
  }
  const { got, bad } = checkHashes(file, hashes, ctx.origin.listing);
  if (bad !== undefined) {
    await rm(partial, { force: true });
    ctx.onBytes(file.path, 0);
    // Bytes resumed from an earlier attempt may be what is wrong: one fresh try before blaming the hub.
    if (resumed && !state.restarted) {
      state.restarted = true;
      throw new TransientFailure(`${bad}; fetching it again from the start`);
    }
    throw new FetchFailure('ModelDigestMismatch', `${bad}: the bytes served are not the listed ones`, {
      path: file.path,
    });
  }
  const final = join(ctx.dir, file.path);
  await mkdir(dirname(final), { recursive: true });
  await rename(partial, final);
  return got;
}

export async function downloadFile(
  ctx: DownloadContext,
  file: ExpectedFile,
  signal?: AbortSignal,
): Promise<DownloadedFile> {
  const state = { restarted: false };
  return withRetries(file.path, ctx.retry, () => attempt(ctx, file, state, signal), signal);
}
