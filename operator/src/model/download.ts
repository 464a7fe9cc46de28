// One file from `{endpoint}/{repo}/resolve/{revision}/{path}` into the model directory:
// streamed into a partial file under `.cacheroute-partial/` (hidden: outside the manifest),
// its size and hashes checked while it streams, then renamed into place, so a file at its
// final path is always a verified one. A partial file left by a dropped connection or an
// earlier run is resumed with a Range request; its bytes are hashed again from disk first.
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { FetchFailure, TransientFailure } from './fetch-reasons.ts';
import {
  encodePath,
  failureForStatus,
  getFollowingRedirects,
  headerValue,
  type HubClient,
  type HubResponse,
} from './hub-client.ts';
import { withRetries, type RetryPolicy } from './retry.ts';

export const PARTIAL_DIR = '.cacheroute-partial';

/** What the file must be: its size and a sha256 (LFS) or a git blob id (files kept in git). */
export interface ExpectedFile {
  readonly path: string;
  readonly size: number;
  readonly sha256?: string;
  readonly gitBlobSha1?: string;
}

export interface DownloadedFile {
  readonly size: number;
  readonly sha256: string;
  readonly gitBlobSha1?: string;
}

export interface DownloadContext {
  readonly client: HubClient;
  readonly repo: string;
  readonly revision: string;
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
    .update(`${file.path}\0${file.sha256 ?? file.gitBlobSha1 ?? ''}`)
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

/** The offset a 206 answer starts at, from `Content-Range: bytes <start>-<end>/<size>`. */
function rangeStart(res: HubResponse): number | undefined {
  const m = /^bytes (\d+)-\d+\/(?:\d+|\*)$/.exec(headerValue(res.headers, 'content-range') ?? '');
  return m ? Number(m[1]) : undefined;
}

function checkHashes(
  file: ExpectedFile,
  hashes: Hashes,
  revision: string,
): { got: DownloadedFile; bad?: string } {
  const sha256 = hashes.sha256.digest('hex');
  const sha1 = hashes.sha1?.digest('hex');
  const got = { size: file.size, sha256, ...(sha1 ? { gitBlobSha1: sha1 } : {}) };
  if (file.sha256 !== undefined && sha256 !== file.sha256)
    return {
      got,
      bad: `${file.path}: sha256 ${sha256}, the listing of commit ${revision} says ${file.sha256}`,
    };
  if (file.gitBlobSha1 !== undefined && sha1 !== file.gitBlobSha1)
    return {
      got,
      bad: `${file.path}: git blob ${sha1 ?? '?'}, the listing of commit ${revision} says ${file.gitBlobSha1}`,
    };
  return { got };
}

// Each chunk is written (and awaited) before the next is read: whatever arrived before a
// dropped connection is on disk, so the next attempt resumes from there.
async function streamInto(
  ctx: DownloadContext,
  file: ExpectedFile,
  res: HubResponse,
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

/** The answer to a GET of the file from `offset`, checked to continue it (206) or replace it (200). */
async function requestFrom(
  ctx: DownloadContext,
  file: ExpectedFile,
  partial: string,
  offset: number,
  signal: AbortSignal | undefined,
): Promise<HubResponse> {
  const url = new URL(`${ctx.client.endpoint}/${ctx.repo}/resolve/${ctx.revision}/${encodePath(file.path)}`);
  const res = await getFollowingRedirects(ctx.client, url, {
    headers: offset > 0 ? { range: `bytes=${offset}-` } : {},
    ...(signal ? { signal } : {}),
  });
  if (res.statusCode === 416 || (res.statusCode === 206 && rangeStart(res) !== offset)) {
    await res.body.dump();
    await rm(partial, { force: true });
    throw new TransientFailure(`${file.path}: the server did not resume at byte ${offset}`);
  }
  if (res.statusCode !== 200 && res.statusCode !== 206)
    throw await failureForStatus(ctx.client, res, {
      kind: 'file',
      repo: ctx.repo,
      revision: ctx.revision,
      path: file.path,
    });
  const length = headerValue(res.headers, 'content-length');
  const total = (res.statusCode === 206 ? offset : 0) + Number(length);
  if (length !== undefined && total !== file.size) {
    await res.body.dump();
    await rm(partial, { force: true });
    throw new FetchFailure(
      'ModelDigestMismatch',
      `${file.path}: the server sends ${total} bytes, the listing of commit ${ctx.revision} says ${file.size}`,
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
    if (res.statusCode === 200 && offset > 0) {
      // The server sent the whole file instead: start over with it.
      hashes = startHashes(file);
      offset = 0;
    }
    const held = await streamInto(ctx, file, res, partial, offset, hashes, signal);
    if (held < file.size)
      throw new TransientFailure(`${file.path}: the download ended after ${held} of ${file.size} bytes`);
  }
  const { got, bad } = checkHashes(file, hashes, ctx.revision);
  if (bad !== undefined) {
    await rm(partial, { force: true });
    ctx.onBytes(file.path, 0);
    // Bytes resumed from an earlier attempt may be what is wrong: one fresh try before blaming the hub.
    if (resumed && !state.restarted) {
      state.restarted = true;
      throw new TransientFailure(`${bad}; fetching it again from the start`);
    }
    throw new FetchFailure('ModelDigestMismatch', `${bad}: the bytes served are not the commit's`, {
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
