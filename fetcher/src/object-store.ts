// A bucket prefix of an S3 (or S3-compatible) object store as a model source, `s3://bucket/prefix`:
// listed with ListObjectsV2 (every page), each object read with GetObject, a Range to resume and
// If-Match its listed ETag so a resumed file continues the same content. Credentials come from
// the SDK's default chain: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (a Secret's keys as env), a
// web identity token (IRSA), EKS pod identity, instance metadata. A listing gives no sha256, so
// the manifest and its digests are known once the files are fetched and hashed (ADR 0020).
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { Readable } from 'node:stream';
import { GetObjectCommand, ListObjectsV2Command, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { OBJECT_STORE_URL_RE } from '#api/model-source.ts';
import type { FileOrigin } from './download.ts';
import type { FetchPlan, PendingFile } from './fetch-plan.ts';
import { FetchFailure, TransientFailure } from './fetch-reasons.ts';
import type { ProxyConfig } from './hub-client.ts';
import { checkPath, isCountedPath, type ManifestIssue, type Result } from './manifest.ts';
import { withRetries, type RetryPolicy } from './retry.ts';

export interface StoreLocation {
  readonly bucket: string;
  /** The key prefix, '' or ending in '/': `s3://b/models/x` holds `models/x/...`, not `models/x2/...`. */
  readonly prefix: string;
  readonly url: string;
}

export function parseStoreUrl(url: string): Result<StoreLocation, string> {
  if (!new RegExp(OBJECT_STORE_URL_RE).test(url))
    return { ok: false, error: 'must be s3://<bucket>/<prefix>, like s3://models/llama-3.1-8b' };
  const rest = url.slice('s3://'.length);
  const slash = rest.indexOf('/');
  const bucket = slash < 0 ? rest : rest.slice(0, slash);
  const path = slash < 0 ? '' : rest.slice(slash + 1).replace(/\/+$/, '');
  if (path !== '' && checkPath(path) !== undefined)
    return { ok: false, error: 'the prefix must have no empty, `.` or `..` component' };
  return { ok: true, value: { bucket, prefix: path === '' ? '' : `${path}/`, url } };
}

export interface StoreClientOptions {
  /** An S3-compatible endpoint (default: AWS's for the region). */
  readonly endpoint?: string | undefined;
  readonly region?: string | undefined;
  /** `endpoint/bucket/key` instead of `bucket.endpoint/key`: most S3-compatible stores want it. */
  readonly pathStyle: boolean;
  readonly proxy?: ProxyConfig | undefined;
}

const TIMEOUT_MS = 60_000;

export function buildStoreClient(opts: StoreClientOptions): S3Client {
  // Node's own agents honour a proxy given this way (Node 24), with NO_PROXY's exceptions.
  const proxyEnv = opts.proxy
    ? {
        HTTP_PROXY: opts.proxy.httpProxy ?? '',
        HTTPS_PROXY: opts.proxy.httpsProxy ?? '',
        NO_PROXY: opts.proxy.noProxy ?? '',
      }
    : undefined;
  return new S3Client({
    region: opts.region ?? process.env['AWS_REGION'] ?? 'us-east-1',
    ...(opts.endpoint !== undefined ? { endpoint: opts.endpoint } : {}),
    forcePathStyle: opts.pathStyle,
    // One attempt per call: withRetries counts and backs off, as for the hub.
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler({
      connectionTimeout: TIMEOUT_MS,
      requestTimeout: TIMEOUT_MS,
      httpAgent: new HttpAgent({ keepAlive: true, ...(proxyEnv ? { proxyEnv } : {}) }),
      httpsAgent: new HttpsAgent({ keepAlive: true, ...(proxyEnv ? { proxyEnv } : {}) }),
    }),
  });
}

export interface ListedObject {
  readonly key: string;
  readonly size: number;
  readonly etag: string | undefined;
}

const MAX_PAGES = 10_000;

/** Every object under the prefix, every page (`pageSize` keys, the store's default 1,000), each page retried on its own. */
export async function listStoreObjects(
  client: S3Client,
  at: StoreLocation,
  retry: RetryPolicy,
  pageSize?: number,
): Promise<ListedObject[]> {
  const objects: ListedObject[] = [];
  let token: string | undefined;
  for (let page = 0; ; page++) {
    if (page >= MAX_PAGES)
      throw new FetchFailure('StoreInvalidListing', `the listing of ${at.url} pages without end`);
    const answer = await withRetries(`the listing of ${at.url}`, retry, async () => {
      try {
        return await client.send(
          new ListObjectsV2Command({
            Bucket: at.bucket,
            Prefix: at.prefix,
            ...(pageSize !== undefined ? { MaxKeys: pageSize } : {}),
            ...(token !== undefined ? { ContinuationToken: token } : {}),
          }),
        );
      } catch (e) {
        throw failureForStoreError(e, `the listing of ${at.url}`);
      }
    });
    for (const o of answer.Contents ?? [])
      if (o.Key !== undefined) objects.push({ key: o.Key, size: o.Size ?? 0, etag: o.ETag });
    if (!answer.IsTruncated) return objects;
    if (!answer.NextContinuationToken)
      throw new FetchFailure(
        'StoreInvalidListing',
        `the listing of ${at.url} is cut without a continuation token`,
      );
    token = answer.NextContinuationToken;
  }
}

/**
 * The files under the prefix, all pending (no listing gives their sha256): keys relative to the
 * prefix; folder markers (`…/`) and hidden paths (outside any manifest) left out.
 */
export function planFromStoreListing(
  objects: readonly ListedObject[],
  at: StoreLocation,
): Result<FetchPlan, ManifestIssue> {
  const pending: PendingFile[] = [];
  for (const o of objects) {
    if (!o.key.startsWith(at.prefix) || o.key.endsWith('/')) continue;
    const path = o.key.slice(at.prefix.length);
    // Before the hidden-path filter: `../x` starts with a dot too, and must be refused, not skipped.
    const bad = checkPath(path);
    if (bad) return { ok: false, error: { code: 'invalid_path', path, message: `${o.key}: ${bad}` } };
    if (!isCountedPath(path)) continue;
    pending.push({ path, size: o.size, ...(o.etag !== undefined ? { version: o.etag } : {}) });
  }
  if (pending.length === 0)
    return {
      ok: false,
      error: {
        code: 'invalid_path',
        path: at.prefix,
        message: `no objects under ${at.url}: check the bucket and prefix`,
      },
    };
  return { ok: true, value: { known: [], pending } };
}

/** The offset a ranged answer starts at, from `Content-Range: bytes <start>-<end>/<size>`. */
function rangeStart(contentRange: string | undefined): number | undefined {
  const m = /^bytes (\d+)-\d+\/(?:\d+|\*)$/.exec(contentRange ?? '');
  return m ? Number(m[1]) : undefined;
}

export function buildStoreOrigin(client: S3Client, at: StoreLocation): FileOrigin {
  return {
    listing: `the listing of ${at.url}`,
    open: async (file, offset, signal) => {
      const what = `${at.url.replace(/\/+$/, '')}/${file.path}`;
      let answer;
      try {
        answer = await client.send(
          new GetObjectCommand({
            Bucket: at.bucket,
            Key: `${at.prefix}${file.path}`,
            ...(offset > 0 ? { Range: `bytes=${offset}-` } : {}),
            ...(file.version !== undefined ? { IfMatch: file.version } : {}),
          }),
          signal ? { abortSignal: signal } : {},
        );
      } catch (e) {
        if (e instanceof S3ServiceException && e.$metadata.httpStatusCode === 416)
          return {
            start: 'refused',
            length: undefined,
            body: Readable.from([]),
            discard: () => Promise.resolve(),
          };
        throw failureForStoreError(e, what, file.path);
      }
      const body = answer.Body;
      if (!(body instanceof Readable))
        throw new FetchFailure('DownloadFailed', `${what}: the SDK answered no Node stream`);
      const start =
        offset > 0 && answer.ContentRange !== undefined ? (rangeStart(answer.ContentRange) ?? 'refused') : 0;
      return {
        start,
        length: answer.ContentLength,
        body,
        discard: () => {
          body.destroy();
          return Promise.resolve();
        },
      };
    },
  };
}

const UNAUTHORIZED = new Set([
  'AccessDenied',
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'InvalidToken',
  'TokenRefreshRequired',
]);

/** The failure an SDK error stands for, saying what to check; never a credential. */
export function failureForStoreError(
  e: unknown,
  what: string,
  path?: string,
): FetchFailure | TransientFailure {
  const at = path !== undefined ? { path } : {};
  if (e instanceof S3ServiceException) {
    const status = e.$metadata.httpStatusCode ?? 0;
    const code = /^[A-Za-z]{1,64}$/.test(e.name) ? e.name : 'error';
    if (UNAUTHORIZED.has(e.name) || status === 401 || status === 403)
      return new FetchFailure(
        'StoreUnauthorized',
        `the object store answered ${status} (${code}) for ${what}: check the credentials (the Secret of credentialsSecretRef, ` +
          "or the fetcher's service account for IRSA or pod identity) and that they may read the bucket",
        at,
      );
    if (e.name === 'NoSuchBucket' || e.name === 'NoSuchKey' || status === 404)
      return new FetchFailure(
        'StoreNotFound',
        `the object store answered ${status} (${code}) for ${what}: check the bucket, the prefix and the endpoint`,
        at,
      );
    if (e.name === 'PreconditionFailed' || status === 412)
      return new FetchFailure(
        'DownloadFailed',
        `${what} changed after it was listed (its ETag differs): the next attempt lists the prefix again`,
        at,
      );
    if (status === 429 || status >= 500 || e.$retryable !== undefined)
      return new TransientFailure(`${what}: HTTP ${status} (${code})`, { cause: e });
    return new FetchFailure('DownloadFailed', `${what}: unexpected HTTP ${status} (${code})`, at);
  }
  const name = (e as { name?: unknown }).name;
  if (name === 'CredentialsProviderError')
    return new FetchFailure(
      'StoreUnauthorized',
      `no credentials for ${what}: set model.source.objectStore.credentialsSecretRef, or run the fetcher under a service account with IRSA or pod identity`,
      at,
    );
  const code = (e as { code?: unknown }).code;
  const why = typeof code === 'string' ? code : (e as Error).message;
  return new TransientFailure(`${what}: ${why}`, { cause: e });
}
