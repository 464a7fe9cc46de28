import type { z } from 'zod';
import { ModelInfo, ServerInfo } from './identity.ts';
import { buildRuntimeAuthHeaders } from '#api/runtime-key.ts';
import { BodyTooLargeError, readCappedText as readCappedBody } from '#sglang/capped-text.ts';

export type FetchResult<T> = { ok: true; value: T } | { ok: false; error: string; status?: number };

export interface ClientOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
  /** The runtime's API key (--api-key), sent as a bearer token; never put in an error. */
  apiKey?: string | undefined;
}

const DEFAULT_TIMEOUT_MS = 5_000;
// A runtime image is the namespace user's: an answer past these caps is an error, not a heap.
/** /server_info and /model_info are tens of KiB. */
export const MAX_INFO_BYTES = 4 * 1024 * 1024;
/** /metrics is tens of KiB a data-parallel rank. */
export const MAX_METRICS_BYTES = 8 * 1024 * 1024;

/** The body as text, or an error once it passes `maxBytes` (the rest is not read). */
async function readCappedText(res: Response, url: string, maxBytes: number): Promise<FetchResult<string>> {
  if (!res.body) return { ok: true, value: '' };
  try {
    return { ok: true, value: await readCappedBody(res.body, maxBytes, url) };
  } catch (err) {
    if (err instanceof BodyTooLargeError) return { ok: false, error: `GET ${err.message}` };
    throw err;
  }
}

async function get(url: string, opts: ClientOptions): Promise<FetchResult<Response>> {
  const signals = [AbortSignal.timeout(opts.timeoutMs ?? DEFAULT_TIMEOUT_MS)];
  if (opts.signal) signals.push(opts.signal);
  let res: Response;
  try {
    res = await fetch(url, {
      headers: buildRuntimeAuthHeaders(opts.apiKey),
      signal: AbortSignal.any(signals),
    });
  } catch (err) {
    // fetch says only "fetch failed"; the cause says what happened (ECONNREFUSED, a timeout).
    const cause = (err as { cause?: { message?: unknown } }).cause?.message;
    const detail = typeof cause === 'string' && cause !== '' ? `: ${cause}` : '';
    return { ok: false, error: `GET ${url}: ${(err as Error).message}${detail}` };
  }
  if (!res.ok) {
    await res.body?.cancel();
    return { ok: false, error: `GET ${url}: HTTP ${res.status}`, status: res.status };
  }
  return { ok: true, value: res };
}

/** GET `url` and parse its JSON with `schema`; every failure is an error that names the URL. */
export async function getJson<S extends z.ZodType>(
  url: string,
  schema: S,
  opts: ClientOptions,
): Promise<FetchResult<z.infer<S>> & { status?: number }> {
  const sent = await get(url, opts);
  if (!sent.ok) return sent;
  let text: FetchResult<string>;
  try {
    text = await readCappedText(sent.value, url, MAX_INFO_BYTES);
  } catch (err) {
    return { ok: false, error: `GET ${url}: ${(err as Error).message}` };
  }
  if (!text.ok) return text;
  let body: unknown;
  try {
    body = JSON.parse(text.value);
  } catch {
    return { ok: false, error: `GET ${url}: response is not JSON` };
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      ok: false,
      error: `GET ${url}: unexpected shape at ${issue?.path.join('.') ?? ''}: ${issue?.message ?? ''}`,
    };
  }
  return { ok: true, value: parsed.data };
}

/** Tries the current path, then the legacy `/get_*` form that older 0.5.x releases serve, on 404 only. */
async function getWithLegacyFallback<S extends z.ZodType>(
  baseUrl: string,
  path: string,
  schema: S,
  opts: ClientOptions,
): Promise<FetchResult<z.infer<S>>> {
  const first = await getJson(`${baseUrl}/${path}`, schema, opts);
  if (first.ok || first.status !== 404) return first;
  return getJson(`${baseUrl}/get_${path}`, schema, opts);
}

export function fetchServerInfo(baseUrl: string, opts: ClientOptions = {}): Promise<FetchResult<ServerInfo>> {
  return getWithLegacyFallback(baseUrl, 'server_info', ServerInfo, opts);
}

export function fetchModelInfo(baseUrl: string, opts: ClientOptions = {}): Promise<FetchResult<ModelInfo>> {
  return getWithLegacyFallback(baseUrl, 'model_info', ModelInfo, opts);
}

/** The runtime's /metrics text (SGLang with --enable-metrics; its --api-key leaves /metrics open). */
export async function fetchMetricsText(baseUrl: string, opts: ClientOptions): Promise<FetchResult<string>> {
  const sent = await get(`${baseUrl}/metrics`, opts);
  if (!sent.ok) return sent;
  try {
    return await readCappedText(sent.value, `${baseUrl}/metrics`, MAX_METRICS_BYTES);
  } catch (err) {
    return { ok: false, error: `GET ${baseUrl}/metrics: ${(err as Error).message}` };
  }
}
