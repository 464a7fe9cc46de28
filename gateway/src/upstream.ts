// Talking to one runtime endpoint: send, read whole, pipe a stream through,
// map failures to our error codes (never the runtime's own text).

import { once } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { Agent, Dispatcher } from 'undici';
import { buildErrorBody, GatewayError } from './errors.ts';
import type { UpstreamFailureReason } from './metrics.ts';
import type { CacheReport } from './policies/index.ts';
import { extractCacheReport, SseReportSniffer } from './upstream-report.ts';
import type { StreamedResponse } from './upstream-stream.ts';

export interface SendOptions {
  readonly agent: Agent;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
}

export interface BufferedResponse {
  readonly statusCode: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
}

/**
 * A whole answer read into one string, on undici's dispatch API directly.
 * request() wraps every answer in a body stream, an abort listener and promise
 * chains that outlive a young-generation GC at a few hundred requests/s; their
 * promotion made scavenges take 5-10 ms, the gateway's whole p99 (make bench,
 * overhead). Non-streaming answers arrive at the end of generation anyway.
 */
export function sendBuffered(
  opts: SendOptions,
  baseUrl: string,
  path: string,
  body: Record<string, unknown>,
  signal: AbortSignal,
): Promise<BufferedResponse> {
  if (signal.aborted) return Promise.reject(toError(signal.reason));
  const url = new URL(path, baseUrl);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let statusCode = 0;
    let headers: IncomingHttpHeaders = {};
    let controller: Dispatcher.DispatchController | undefined;
    let started = false;
    const onAbort = (): void => controller?.abort(toError(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        if (signal.aborted) c.abort(toError(signal.reason));
      },
      onResponseStart(_c, status, h) {
        started = true;
        statusCode = status;
        headers = h;
      },
      onResponseData(_c, chunk) {
        chunks.push(chunk);
      },
      onResponseEnd() {
        signal.removeEventListener('abort', onAbort);
        resolve({ statusCode, headers, text: Buffer.concat(chunks).toString('utf8') });
      },
      onResponseError(_c, err) {
        signal.removeEventListener('abort', onAbort);
        reject(started ? new AnswerInterruptedError(err) : err);
      },
    };
    opts.agent.dispatch(
      {
        origin: url.origin,
        path: url.pathname + url.search,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        headersTimeout: opts.headersTimeoutMs,
        bodyTimeout: opts.bodyTimeoutMs,
      },
      handler,
    );
  });
}

/** The answer had begun when it failed: not retried, the runtime already did the work. */
export class AnswerInterruptedError extends Error {
  constructor(cause: unknown) {
    super('the upstream answer was interrupted', { cause });
  }
}

export function toError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error('aborted');
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

/** The metrics' reason for a failed attempt: an error, or an answer with a 5xx status. */
export function classifyUpstreamFailure(failure: unknown): UpstreamFailureReason {
  if (failure instanceof AnswerInterruptedError) {
    const code = (failure.cause as { code?: unknown } | undefined)?.code;
    return typeof code === 'string' && TIMEOUT_CODES.has(code) ? 'timeout' : 'interrupted';
  }
  if (
    failure !== null &&
    typeof failure === 'object' &&
    'statusCode' in failure &&
    !(failure instanceof Error)
  )
    return 'status';
  const code = (failure as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && TIMEOUT_CODES.has(code) ? 'timeout' : 'connect';
}

/** Upstream failure → 502/504, naming only our side of it. */
export function mapUpstreamFailure(res: unknown, timeoutMs: number): GatewayError {
  const reason = classifyUpstreamFailure(res);
  if (reason === 'status')
    return new GatewayError('GW_UPSTREAM_ERROR', {
      reason: `status ${String((res as { statusCode: unknown }).statusCode)}`,
    });
  if (reason === 'timeout') return new GatewayError('GW_UPSTREAM_TIMEOUT', { timeoutMs }, { cause: res });
  if (reason === 'interrupted')
    return new GatewayError('GW_UPSTREAM_ERROR', { reason: 'the answer was interrupted' }, { cause: res });
  const code = (res as { code?: unknown } | undefined)?.code;
  return new GatewayError(
    'GW_UPSTREAM_ERROR',
    { reason: typeof code === 'string' ? code : 'connection failed' },
    { cause: res },
  );
}

export function headerString(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** The cache report in an answer we do not pass on (a prefill's), streamed or not. */
export function computeBufferedReport(res: BufferedResponse): CacheReport | undefined {
  const contentType = headerString(res.headers['content-type']) ?? '';
  if (!contentType.includes('event-stream')) return extractCacheReport(res.text);
  const sniffer = new SseReportSniffer();
  sniffer.push(Buffer.from(res.text));
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
  res: StreamedResponse,
  headers: Readonly<Record<string, string>>,
  signal: AbortSignal,
  onFirstChunk: () => void = () => undefined,
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
    let first = true;
    for (let chunk = await res.read(); chunk !== null; chunk = await res.read()) {
      if (first) {
        first = false;
        onFirstChunk();
      }
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
    res.cancel();
    return { complete: false, report: sniffer.report() };
  }
}
