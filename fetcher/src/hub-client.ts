// HTTP to a Hugging Face hub (or a mirror): GETs that follow redirects themselves, so that
// the token goes to the hub's own origin only. The hub answers LFS downloads with a redirect
// to a CDN, and relative redirects for its own files (`/api/resolve-cache/...`); the CDN's
// signed URL needs no token and must not see one. Status codes become the fetch's reasons,
// saying what to check; messages name URLs without their query (a CDN URL's is a signature).
import { Agent, EnvHttpProxyAgent, request, type Dispatcher } from 'undici';
import type { FileOrigin } from './download.ts';
import { FetchFailure, TransientFailure } from './fetch-reasons.ts';

export interface ProxyConfig {
  readonly httpProxy?: string | undefined;
  readonly httpsProxy?: string | undefined;
  readonly noProxy?: string | undefined;
}

const TIMEOUTS = { headersTimeout: 60_000, bodyTimeout: 60_000 } as const;

export function buildDispatcher(proxy?: ProxyConfig): Dispatcher {
  if (!proxy?.httpProxy && !proxy?.httpsProxy) return new Agent(TIMEOUTS);
  // Empty strings, not undefined: undici would read the process environment for those itself,
  // and the caller has already decided what the environment says.
  return new EnvHttpProxyAgent({
    ...TIMEOUTS,
    httpProxy: proxy.httpProxy ?? '',
    httpsProxy: proxy.httpsProxy ?? '',
    noProxy: proxy.noProxy ?? '',
  });
}

export interface HubClient {
  readonly endpoint: string;
  readonly dispatcher: Dispatcher;
  readonly hasToken: boolean;
  /** Authorization for `url`: only on the endpoint's own origin. */
  readonly authFor: (url: URL) => Record<string, string>;
}

export function buildHubClient(
  endpoint: string,
  token: string | undefined,
  dispatcher: Dispatcher,
): HubClient {
  const origin = new URL(endpoint).origin;
  // The token lives only in this closure and in the header it makes, never in a message.
  const header = token ? { authorization: `Bearer ${token}` } : {};
  return {
    endpoint,
    dispatcher,
    hasToken: token !== undefined,
    authFor: (url) => (url.origin === origin ? header : {}),
  };
}

export interface HubResponse {
  readonly statusCode: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Dispatcher.ResponseData['body'];
  /** Where the answer came from, after redirects. */
  readonly url: URL;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const MAX_REDIRECTS = 10;

export function headerValue(headers: HubResponse['headers'], name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export function describeUrl(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

async function send(client: HubClient, url: URL, headers: Record<string, string>, signal?: AbortSignal) {
  try {
    return await request(url, {
      dispatcher: client.dispatcher,
      method: 'GET',
      headers: { ...headers, ...client.authFor(url) },
      ...(signal ? { signal } : {}),
    });
  } catch (e) {
    if (signal?.aborted) throw e;
    const code = (e as { code?: unknown }).code;
    const why = typeof code === 'string' ? code : (e as Error).message;
    throw new TransientFailure(`${describeUrl(url)}: ${why}`, { cause: e });
  }
}

/** A GET that follows up to 10 redirects; connection errors are transient. */
export async function getFollowingRedirects(
  client: HubClient,
  url: URL,
  opts: { headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<HubResponse> {
  let current = url;
  for (let hop = 0; ; hop++) {
    const res = await send(client, current, opts.headers ?? {}, opts.signal);
    if (!REDIRECTS.has(res.statusCode)) return { ...res, url: current };
    await res.body.dump();
    const location = headerValue(res.headers, 'location');
    if (!location)
      throw new FetchFailure('DownloadFailed', `${describeUrl(current)}: a redirect without a Location`);
    if (hop >= MAX_REDIRECTS)
      throw new FetchFailure('DownloadFailed', `${describeUrl(url)}: more than ${MAX_REDIRECTS} redirects`);
    const next = new URL(location, current);
    if (next.protocol !== 'https:' && next.protocol !== 'http:')
      throw new FetchFailure('DownloadFailed', `${describeUrl(current)}: a redirect to ${next.protocol}`);
    current = next;
  }
}

/** What a request was for, to say what to check when it is refused. */
export type HubTarget =
  | { readonly kind: 'listing'; readonly repo: string; readonly revision: string }
  | { readonly kind: 'file'; readonly repo: string; readonly revision: string; readonly path: string };

function describeTarget(t: HubTarget): string {
  return t.kind === 'listing'
    ? `the file listing of ${t.repo} at ${t.revision}`
    : `${t.path} of ${t.repo} at ${t.revision}`;
}

/** The failure an answer other than 2xx stands for; the body is consumed. */
export async function failureForStatus(
  client: HubClient,
  res: HubResponse,
  target: HubTarget,
): Promise<FetchFailure | TransientFailure> {
  await res.body.dump().catch(() => undefined);
  const status = res.statusCode;
  const hubCode = headerValue(res.headers, 'x-error-code');
  // The hub's own error code (RepoNotFound, GatedRepo, RevisionNotFound) is short and safe to show.
  const code = hubCode && /^[A-Za-z]{1,40}$/.test(hubCode) ? ` (${hubCode})` : '';
  const what = describeTarget(target);
  const path = target.kind === 'file' ? { path: target.path } : {};
  if (status === 401)
    return new FetchFailure(
      'HubUnauthorized',
      `the hub answered 401${code} for ${what}: check the token (--token-file or HF_TOKEN; ` +
        `${client.hasToken ? 'the one given was refused' : 'none was given'}) and the repository id ` +
        '(the hub answers 401, not 404, for a private repository it does not show you)',
      path,
    );
  if (status === 403)
    return new FetchFailure(
      'HubUnauthorized',
      `the hub answered 403${code} for ${what}: the token has no access to ${target.repo}; ` +
        "for a gated model, accept its terms on the hub with the token's account, " +
        'and a fine-grained token needs read access to the repository',
      path,
    );
  if (status === 404)
    return new FetchFailure(
      'HubNotFound',
      target.kind === 'listing'
        ? `the hub answered 404${code} for ${what}: check the repository id and that the revision is a commit of it`
        : `the hub answered 404${code} for ${what}, though the listing names it: check the endpoint (a mirror may lack it)`,
      path,
    );
  if (status === 429 || status >= 500) return new TransientFailure(`${what}: HTTP ${status}`);
  return new FetchFailure(
    'DownloadFailed',
    `${what}: unexpected HTTP ${status} from ${describeUrl(res.url)}`,
    path,
  );
}

/** Each segment encoded; `/` kept, as the hub's URLs have it. */
export function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

/** The offset a 206 answer starts at, from `Content-Range: bytes <start>-<end>/<size>`. */
function rangeStart(res: HubResponse): number | undefined {
  const m = /^bytes (\d+)-\d+\/(?:\d+|\*)$/.exec(headerValue(res.headers, 'content-range') ?? '');
  return m ? Number(m[1]) : undefined;
}

/** A commit's files at `{endpoint}/{repo}/resolve/{revision}/{path}`, resumed with Range. */
export function buildHubOrigin(client: HubClient, repo: string, revision: string): FileOrigin {
  return {
    listing: `the listing of commit ${revision}`,
    open: async (file, offset, signal) => {
      const url = new URL(`${client.endpoint}/${repo}/resolve/${revision}/${encodePath(file.path)}`);
      const res = await getFollowingRedirects(client, url, {
        headers: offset > 0 ? { range: `bytes=${offset}-` } : {},
        ...(signal ? { signal } : {}),
      });
      const discard = () => res.body.dump();
      if (res.statusCode === 416) return { start: 'refused', length: undefined, body: res.body, discard };
      if (res.statusCode !== 200 && res.statusCode !== 206)
        throw await failureForStatus(client, res, { kind: 'file', repo, revision, path: file.path });
      const length = headerValue(res.headers, 'content-length');
      const start = res.statusCode === 206 ? (rangeStart(res) ?? 'refused') : 0;
      return { start, length: length === undefined ? undefined : Number(length), body: res.body, discard };
    },
  };
}
