// Why a model fetch failed: the `reason` of the fetcher's last progress line, stable for the
// operator to put in a condition. Each one is documented in docs/operations.md (a test checks).
export const FETCH_REASONS = {
  InvalidArguments: 'an argument is missing or malformed (exit code 2); nothing was fetched',
  HubUnauthorized: 'the hub answered 401 or 403: no token, a wrong token, or no access to a gated model',
  HubNotFound: 'the hub answered 404: the repository, the revision or a listed file does not exist there',
  HubInvalidListing:
    'the tree listing is not what the hub API answers, or names a path with no manifest line',
  StoreUnauthorized:
    'the object store refused the credentials (401, 403, AccessDenied, a bad key or signature), or none were found',
  StoreNotFound: 'the object store answered 404: no such bucket, or an object listed is gone',
  StoreInvalidListing: 'the bucket listing is cut without a way on, or names a path no manifest can hold',
  UnexpectedFiles: 'the destination holds files that are not in the model: they would change its digest',
  ModelDigestMismatch: 'the files of the commit are not the pinned ones: a digest or a file differs',
  DownloadFailed: 'a request or a write kept failing (after retries for 5xx and connection errors)',
  FilesUnreadable: 'staged files (--verify-only) could not be read: no such directory, or no permission',
} as const;
export type FetchReason = keyof typeof FETCH_REASONS;

/** A failure with its reason; `path` is the model file concerned, when one is. */
export class FetchFailure extends Error {
  readonly reason: FetchReason;
  readonly path: string | undefined;
  constructor(reason: FetchReason, message: string, opts: { path?: string; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'FetchFailure';
    this.reason = reason;
    this.path = opts.path;
  }
}

/** A failure worth another attempt (5xx, 429, a dropped connection, a short body). */
export class TransientFailure extends Error {
  constructor(message: string, opts: { cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'TransientFailure';
  }
}
