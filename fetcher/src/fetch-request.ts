// What to fetch, checked before any request: a commit id, not a branch (the digests pin the
// files of one commit, ADR 0013), digests in the API's form, a hub URL, a repository id; or an
// object store's s3:// prefix, with its endpoint.
import { z } from 'zod';
import { checkPath, isCountedPath, type Result } from './manifest.ts';
import { OBJECT_STORE_URL_RE } from '#api/model-source.ts';

const DIGEST_MESSAGE = 'must be sha256: and 64 lower-case hex digits, as `make model-digest` prints it';

const HttpEndpoint = z
  .string()
  .refine((s) => URL.canParse(s) && /^https?:$/.test(new URL(s).protocol), {
    message: 'must be an http(s) URL, like https://huggingface.co or a mirror',
  })
  .refine((s) => !URL.canParse(s) || (new URL(s).search === '' && new URL(s).hash === ''), {
    message: 'must have no query or fragment',
  })
  // The API paths are appended to the endpoint's own path (a mirror may live under one).
  .transform((s) => s.replace(/\/+$/, ''));

export const FetchRequest = z.object({
  endpoint: HttpEndpoint,
  repo: z
    .string()
    .regex(/^(?:[A-Za-z0-9][\w.-]*\/)?[A-Za-z0-9][\w.-]*$/, {
      message: 'must be a hub repository id, like meta-llama/Llama-3.1-8B-Instruct',
    })
    .refine((s) => !s.includes('..'), { message: 'must not contain ..' }),
  revision: z.string().regex(/^[0-9a-f]{40}$/, {
    message:
      "must be the 40-hex commit id to fetch, not a branch or tag like 'main' (they move; the digests pin one commit's files)",
  }),
  digest: z.string().regex(/^sha256:[0-9a-f]{64}$/, { message: DIGEST_MESSAGE }),
  tokenizerDigest: z.string().regex(/^sha256:[0-9a-f]{64}$/, { message: DIGEST_MESSAGE }),
  tokenizerSubpath: z
    .string()
    .transform((s) => s.replace(/\/+$/, ''))
    .refine((s) => checkPath(s) === undefined && isCountedPath(s), {
      message: 'must be a relative directory of the repository, without . or .. components',
    })
    .optional(),
  dest: z.string().min(1, { message: 'must name the directory to fetch into' }),
});
export type FetchRequest = z.infer<typeof FetchRequest>;
export type FetchRequestInput = z.input<typeof FetchRequest>;

/** A fetch from an object store's prefix: no commit, the digests are the pin. */
export const StoreFetchRequest = FetchRequest.pick({
  digest: true,
  tokenizerDigest: true,
  tokenizerSubpath: true,
  dest: true,
}).extend({
  url: z.string().regex(new RegExp(OBJECT_STORE_URL_RE), {
    message: 'must be s3://<bucket>/<prefix>, like s3://models/llama-3.1-8b',
  }),
  /** An S3-compatible endpoint; AWS's own for the region without one. */
  endpoint: HttpEndpoint.optional(),
  region: z
    .string()
    .regex(/^[a-z0-9-]{1,64}$/, { message: 'must be a region name, like us-east-1' })
    .optional(),
  pathStyle: z.boolean(),
});
export type StoreFetchRequest = z.infer<typeof StoreFetchRequest>;

type AnyRequestField = keyof FetchRequest | keyof StoreFetchRequest;

export interface FetchRequestIssue {
  readonly field: AnyRequestField;
  readonly message: string;
}

/** What `--verify-only` needs: staged files and the digests they must have (no hub). */
export const VerifyRequest = FetchRequest.pick({
  digest: true,
  tokenizerDigest: true,
  tokenizerSubpath: true,
  dest: true,
});
export type VerifyRequest = z.infer<typeof VerifyRequest>;

export function checkFetchRequest(
  input: Partial<Record<keyof FetchRequest, unknown>>,
): Result<FetchRequest, FetchRequestIssue> {
  return checkWith(FetchRequest, input);
}

export function checkStoreFetchRequest(
  input: Partial<Record<keyof StoreFetchRequest, unknown>>,
): Result<StoreFetchRequest, FetchRequestIssue> {
  return checkWith(StoreFetchRequest, input);
}

export function checkVerifyRequest(
  input: Partial<Record<keyof VerifyRequest, unknown>>,
): Result<VerifyRequest, FetchRequestIssue> {
  return checkWith(VerifyRequest, input);
}

function checkWith<T>(
  schema: z.ZodType<T>,
  input: Partial<Record<AnyRequestField, unknown>>,
): Result<T, FetchRequestIssue> {
  const r = schema.safeParse(input);
  if (r.success) return { ok: true, value: r.data };
  const issue = r.error.issues[0];
  const field = (issue?.path[0] ?? 'dest') as AnyRequestField;
  const message =
    issue?.code === 'invalid_type' && input[field] === undefined ? 'is required' : issue?.message;
  return { ok: false, error: { field, message: message ?? 'is invalid' } };
}
