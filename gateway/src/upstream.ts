// Talking to one runtime endpoint: send, read whole, pipe a stream through,
// map failures to our error codes (never the runtime's own text).

import { once } from 'node:events';
import type { FastifyReply } from 'fastify';
import { request, type Agent, type Dispatcher } from 'undici';
import { buildErrorBody, GatewayError } from './errors.ts';
import type { CacheReport } from './policies/index.ts';
import { extractCacheReport, SseReportSniffer } from './upstream-report.ts';

export interface SendOptions {
  readonly agent: Agent;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
}

export function sendUpstream(
  opts: SendOptions,
  baseUrl: string,
  path: string,
  body: Record<string, unknown>,
  signal: AbortSignal,
): Promise<Dispatcher.ResponseData> {
  return request(new URL(path, baseUrl), {
    dispatcher: opts.agent,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal,
    headersTimeout: opts.headersTimeoutMs,
    bodyTimeout: opts.bodyTimeoutMs,
  });
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

/** Upstream failure → 502/504, naming only our side of it. */
export function mapUpstreamFailure(res: unknown, timeoutMs: number): GatewayError {
  if (res !== null && typeof res === 'object' && 'statusCode' in res && !(res instanceof Error))
    return new GatewayError('GW_UPSTREAM_ERROR', { reason: `status ${String(res.statusCode)}` });
  const code = (res as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && TIMEOUT_CODES.has(code))
    return new GatewayError('GW_UPSTREAM_TIMEOUT', { timeoutMs }, { cause: res });
  return new GatewayError(
    'GW_UPSTREAM_ERROR',
    { reason: typeof code === 'string' ? code : 'connection failed' },
    { cause: res },
  );
}

export function headerString(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** Reads a response we do not pass on (a prefill's answer) for its cache report. */
export async function drainForReport(res: Dispatcher.ResponseData): Promise<CacheReport | undefined> {
  const contentType = headerString(res.headers['content-type']) ?? '';
  if (!contentType.includes('event-stream')) return extractCacheReport(await res.body.text());
  const sniffer = new SseReportSniffer();
  for await (const chunk of res.body as AsyncIterable<Buffer>) sniffer.push(chunk);
  return sniffer.report();
}

export interface PipeResult {
  /** The upstream stream ended normally. */
  readonly complete: boolean;
  readonly report: CacheReport | undefined;
}

/**
 * Passes an upstream SSE response to the client chunk by chunk (no buffering;
 * backpressure through `drain`). The response is committed: an upstream
 * failure from here on ends the client stream with an error event.
 */
export async function pipeStream(
  reply: FastifyReply,
  res: Dispatcher.ResponseData,
  headers: Readonly<Record<string, string>>,
  signal: AbortSignal,
): Promise<PipeResult> {
  const sniffer = new SseReportSniffer();
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(res.statusCode, {
    'content-type': headerString(res.headers['content-type']) ?? 'text/event-stream',
    'cache-control': 'no-cache',
    ...headers,
  });
  raw.flushHeaders();
  try {
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      sniffer.push(chunk);
      if (!raw.write(chunk)) await once(raw, 'drain', { signal });
    }
    raw.end();
    return { complete: true, report: sniffer.report() };
  } catch {
    if (signal.aborted || raw.destroyed) raw.destroy();
    else {
      const err = new GatewayError('GW_UPSTREAM_ERROR', { reason: 'the stream was interrupted' });
      raw.end(`data: ${JSON.stringify(buildErrorBody(err))}\n\n`);
    }
    res.body.destroy();
    return { complete: false, report: sniffer.report() };
  }
}
