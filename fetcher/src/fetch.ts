// Fetches a model once into a directory and proves it is the pinned one (ADR 0013): the fetch
// Job's work, from the hub or an object store's prefix (ADR 0020). In order:
//   1. a marker of an earlier verified fetch whose manifest gives both digests, and files with
//      its names and sizes: done, without the network;
//   2. the listing (all pages) and the plan: the hub's LFS lines known, the rest to fetch;
//   3. the files the listing gives no sha256 for (the hub's git files, small; every object of
//      a bucket), each checked against what the listing says and hashed: the manifest is whole,
//      and both digests are compared with the spec (for the hub: before any weight);
//   4. the hub's LFS files, each checked against its size and sha256 while it streams;
//   5. the directory verified against the manifest, then the marker written.
// Files already in place and matching their line are not fetched again; partial files resume.
import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import {
  downloadFile,
  PARTIAL_DIR,
  type DownloadContext,
  type ExpectedFile,
  type FileOrigin,
} from './download.ts';
import { checkDigests, type ModelDigests } from './fetch-digests.ts';
import {
  manifestFromMarker,
  readMarker,
  removeMarker,
  writeMarker,
  type FetchMarker,
} from './fetch-marker.ts';
import { ProgressTracker, type FetchProgress } from '#api/model-fetch-progress.ts';
import { FetchFailure, type FetchReason } from './fetch-reasons.ts';
import { manifestFromPlan, type FetchPlan } from './fetch-plan.ts';
import {
  checkFetchRequest,
  checkStoreFetchRequest,
  type FetchRequest,
  type FetchRequestIssue,
  type StoreFetchRequest,
} from './fetch-request.ts';
import { hashFile, listDirectory, verifyDirectory, type FileHash } from './files.ts';
import { buildDispatcher, buildHubClient, buildHubOrigin, type ProxyConfig } from './hub-client.ts';
import { listHubTree } from './hub-listing.ts';
import { planFromHubListing } from './hub.ts';
import { firstMismatch, type Manifest, type Result } from './manifest.ts';
import {
  buildStoreClient,
  buildStoreOrigin,
  listStoreObjects,
  parseStoreUrl,
  planFromStoreListing,
} from './object-store.ts';
import { forEachLimited } from './limit.ts';
import type { RetryPolicy } from './retry.ts';

export interface FetchOptions {
  /** A hub commit, or an object store's prefix (`url`). */
  readonly request: FetchRequest | StoreFetchRequest;
  /** The hub's: sent only to the endpoint's origin, never written anywhere. */
  readonly token?: string | undefined;
  readonly proxy?: ProxyConfig | undefined;
  /** Files fetched at once (default 4). */
  readonly concurrency?: number;
  /** Retries per request after the first attempt (default 5), backoff from `backoffMs` (default 1 s). */
  readonly retries?: number;
  readonly backoffMs?: number;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly now?: () => Date;
  readonly onProgress?: (p: FetchProgress) => void;
}

export type FetchOutcome =
  | {
      readonly ok: true;
      readonly digest: string;
      readonly tokenizerDigest: string;
      readonly files: number;
      readonly bytes: number;
      /** Bytes received from the network in this run. */
      readonly downloadedBytes: number;
      /** True when an earlier run's marker and the files' names and sizes sufficed. */
      readonly fromMarker: boolean;
    }
  | { readonly ok: false; readonly reason: FetchReason; readonly message: string; readonly path?: string };

/** Where the files come from: how to list them, how to read one, what the marker records. */
interface Source {
  readonly origin: FileOrigin;
  readonly plan: (retry: RetryPolicy) => Promise<FetchPlan>;
  readonly from: Pick<FetchMarker, 'repo' | 'revision' | 'url'>;
  /** What a digest mismatch blames, in words. */
  readonly files: { readonly what: string; readonly hint: string };
  readonly close: () => Promise<void>;
}

interface Run {
  readonly request: FetchRequest | StoreFetchRequest;
  readonly source: Source;
  readonly retry: RetryPolicy;
  readonly concurrency: number;
  readonly progress: ProgressTracker;
  readonly now: () => Date;
  received: number;
}

const sleepFor = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function hubSource(request: FetchRequest, opts: FetchOptions): Source {
  const dispatcher = buildDispatcher(opts.proxy);
  const client = buildHubClient(request.endpoint, opts.token, dispatcher);
  return {
    origin: buildHubOrigin(client, request.repo, request.revision),
    plan: async (retry) => {
      const plan = planFromHubListing(await listHubTree(client, request, retry));
      if (!plan.ok) throw new FetchFailure('HubInvalidListing', `the file listing: ${plan.error.message}`);
      return plan.value;
    },
    from: { repo: request.repo, revision: request.revision },
    files: { what: "the commit's files", hint: 'the revision is not the commit those digests were taken of' },
    close: () => dispatcher.destroy(),
  };
}

function storeSource(request: StoreFetchRequest, opts: FetchOptions): Source {
  const at = parseStoreUrl(request.url);
  if (!at.ok) throw new FetchFailure('InvalidArguments', `url ${at.error}`);
  const client = buildStoreClient({ ...request, proxy: opts.proxy });
  return {
    origin: buildStoreOrigin(client, at.value),
    plan: async (retry) => {
      const plan = planFromStoreListing(await listStoreObjects(client, at.value, retry), at.value);
      if (!plan.ok) throw new FetchFailure('StoreInvalidListing', plan.error.message);
      return plan.value;
    },
    from: { url: request.url },
    files: {
      what: `the files under ${request.url}`,
      hint: 'the prefix holds other files than those the digests were taken of',
    },
    close: () => {
      client.destroy();
      return Promise.resolve();
    },
  };
}

function checkRequest(
  request: FetchRequest | StoreFetchRequest,
): Result<FetchRequest | StoreFetchRequest, FetchRequestIssue> {
  return 'url' in request ? checkStoreFetchRequest(request) : checkFetchRequest(request);
}

export async function fetchModel(opts: FetchOptions): Promise<FetchOutcome> {
  // Checked again here, for callers that built the request themselves: no request for a branch.
  const checked = checkRequest(opts.request);
  if (!checked.ok)
    return {
      ok: false,
      reason: 'InvalidArguments',
      message: `${checked.error.field} ${checked.error.message}`,
    };
  const request = checked.value;
  let source: Source;
  try {
    source = 'url' in request ? storeSource(request, opts) : hubSource(request, opts);
  } catch (e) {
    if (e instanceof FetchFailure) return { ok: false, reason: e.reason, message: e.message };
    throw e;
  }
  const run: Run = {
    request,
    source,
    retry: { retries: opts.retries ?? 5, backoffMs: opts.backoffMs ?? 1000, sleep: opts.sleep ?? sleepFor },
    concurrency: opts.concurrency ?? 4,
    progress: new ProgressTracker(opts.onProgress ?? (() => undefined)),
    now: opts.now ?? (() => new Date()),
    received: 0,
  };
  try {
    return await fetchInto(run);
  } catch (e) {
    if (e instanceof FetchFailure)
      return { ok: false, reason: e.reason, message: e.message, ...(e.path ? { path: e.path } : {}) };
    return { ok: false, reason: 'DownloadFailed', message: (e as Error).message };
  } finally {
    await source.close();
  }
}

async function fetchInto(run: Run): Promise<FetchOutcome> {
  const { dest } = run.request;
  await mkdir(dest, { recursive: true });
  const earlier = await checkMarker(run);
  if (earlier) return earlier;
  // From here the directory is being changed: a marker left in place would vouch for it.
  await removeMarker(dest);
  const plan = await listAndPlan(run);
  await refuseUnexpectedFiles(dest, plan);
  const manifest = await fetchSmallFiles(run, plan);
  const digests = checkDigestsOrFail(run, manifest);
  await fetchWeights(run, plan);
  await verifyOrFail(run, manifest);
  await writeMarker(dest, buildMarker(run, manifest, digests));
  await rm(join(dest, PARTIAL_DIR), { recursive: true, force: true });
  return outcome(run, manifest, digests, false);
}

function outcome(run: Run, manifest: Manifest, digests: ModelDigests, fromMarker: boolean): FetchOutcome {
  return {
    ok: true,
    ...digests,
    files: manifest.files.length,
    bytes: totalBytes(manifest),
    downloadedBytes: run.received,
    fromMarker,
  };
}

const totalBytes = (m: Manifest): number => m.files.reduce((n, f) => n + f.size, 0);

async function checkMarker(run: Run): Promise<FetchOutcome | undefined> {
  run.progress.enter('checking');
  const marker = await readMarker(run.request.dest);
  const manifest = marker && manifestFromMarker(marker, run.request);
  if (!manifest) return undefined;
  // Names and sizes only: rehashing 100 GB on every start is what the marker saves.
  if (firstMismatch(manifest, await listDirectory(run.request.dest))) return undefined;
  run.progress.setTotals(manifest.files.length, totalBytes(manifest));
  run.progress.allDone(manifest.files);
  const { digest, tokenizerDigest } = run.request;
  return outcome(run, manifest, { digest, tokenizerDigest }, true);
}

async function listAndPlan(run: Run): Promise<FetchPlan> {
  run.progress.enter('listing');
  const plan = await run.source.plan(run.retry);
  const files = [...plan.known, ...plan.pending];
  run.progress.setTotals(
    files.length,
    files.reduce((n, f) => n + f.size, 0),
  );
  return plan;
}

async function refuseUnexpectedFiles(dest: string, plan: FetchPlan): Promise<void> {
  const listed = new Set([...plan.known, ...plan.pending].map((f) => f.path));
  const extra = (await listDirectory(dest)).filter((f) => !listed.has(f.path));
  if (extra.length > 0)
    throw new FetchFailure(
      'UnexpectedFiles',
      `${dest} holds ${extra.length} file(s) not in the source's listing, e.g. ${extra[0]?.path}: they would change the model's digest; ` +
        'fetch into an empty directory or remove them',
      { path: extra[0]?.path ?? '' },
    );
}

/** The file at its final path when it is already the expected one, with its hashes. */
async function alreadyThere(dest: string, file: ExpectedFile): Promise<FileHash | undefined> {
  const info = await stat(join(dest, file.path)).catch(() => undefined);
  if (!info?.isFile() || info.size !== file.size) return undefined;
  const h = await hashFile(join(dest, file.path), { gitBlobSha1: file.gitBlobSha1 !== undefined });
  if (file.sha256 !== undefined && h.sha256 !== file.sha256) return undefined;
  if (file.gitBlobSha1 !== undefined && h.gitBlobSha1 !== file.gitBlobSha1) return undefined;
  return h;
}

async function fetchAll(
  run: Run,
  files: readonly ExpectedFile[],
  done: (file: ExpectedFile, h: FileHash) => void,
): Promise<void> {
  const ctx: DownloadContext = {
    origin: run.source.origin,
    dir: run.request.dest,
    retry: run.retry,
    onBytes: (path, held) => run.progress.setBytes(path, held),
    onReceived: (n) => (run.received += n),
  };
  await forEachLimited(files, run.concurrency, async (file, signal) => {
    const h = (await alreadyThere(run.request.dest, file)) ?? (await downloadFile(ctx, file, signal));
    run.progress.fileDone(file.path, file.size);
    done(file, h);
  });
}

async function fetchSmallFiles(run: Run, plan: FetchPlan): Promise<Manifest> {
  // With no line known from the listing (an object store), every file is fetched here.
  run.progress.enter(plan.known.length > 0 ? 'small-files' : 'weights');
  const hashed = new Map<string, FileHash>();
  await fetchAll(run, plan.pending, (file, h) => hashed.set(file.path, h));
  const manifest = manifestFromPlan(plan, hashed);
  if (!manifest.ok)
    throw new FetchFailure('ModelDigestMismatch', manifest.error.message, { path: manifest.error.path });
  return manifest.value;
}

function checkDigestsOrFail(run: Run, manifest: Manifest): ModelDigests {
  const r = checkDigests(manifest, run.request, run.request.tokenizerSubpath, run.source.files);
  if (!r.ok) throw new FetchFailure('ModelDigestMismatch', r.error.message);
  return r.value;
}

async function fetchWeights(run: Run, plan: FetchPlan): Promise<void> {
  if (plan.known.length === 0) return;
  run.progress.enter('weights');
  await fetchAll(run, plan.known, () => undefined);
}

async function verifyOrFail(run: Run, manifest: Manifest): Promise<void> {
  run.progress.enter('verifying');
  const bad = await verifyDirectory(run.request.dest, manifest);
  if (bad) throw new FetchFailure('ModelDigestMismatch', bad.message, { path: bad.path });
}

function buildMarker(run: Run, manifest: Manifest, digests: ModelDigests): FetchMarker {
  const { tokenizerSubpath } = run.request;
  return {
    version: 1,
    ...run.source.from,
    ...digests,
    ...(tokenizerSubpath !== undefined ? { tokenizerSubpath } : {}),
    files: manifest.files.length,
    bytes: totalBytes(manifest),
    verifiedAt: run.now().toISOString(),
    manifest: manifest.files.map(({ path, size, sha256 }) => ({ path, size, sha256 })),
  };
}
