// Talking to one runtime endpoint: send, read whole, pipe a stream through,
// map failures to our error codes (never the runtime's own text).

import { buildErrorBody, GatewayError } from '../errors/index.ts';
import type { UpstreamFailureReason } from '../metrics/index.ts';
import type { CacheReport } from '../policies/index.ts';
import { extractCacheReport, SseReportSniffer } from './report.ts';
import type { ResponseSink } from './sink.ts';
import type { UsageEventFilter } from './strip-usage.ts';
import { AnswerInterruptedError, type BufferedResponse, type StreamedResponse } from './answer.ts';

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
/**
 * An answer that is the runtime's failure, not the client's: a 5xx, or a 401/403. Clients
 * authenticate with the gateway, never with a runtime, so a runtime refusing credentials
 * refused the gateway's runtime key (stale, or not yet known): the client's request is
 * fine, another runtime may take it, and the client must not read it as its own key failing.
 */
export function isFailedAnswer(statusCode: number): boolean {
  return statusCode >= 500 || statusCode === 401 || statusCode === 403;
}

export function mapUpstreamFailure(res: unknown, timeoutMs: number): GatewayError {
  const reason = classifyUpstreamFailure(res);
  if (reason === 'status') {
    const status = Number((res as { statusCode: unknown }).statusCode);
    return new GatewayError('GW_UPSTREAM_ERROR', {
      reason:
        status === 401 || status === 403
          ? `the runtime refused the gateway's runtime API key (status ${status})`
          : `status ${status}`,
    });
  }
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
  readonly completionTokens: number | undefined;
}

/**
 * Passes an upstream SSE response to the client chunk by chunk (no buffering;
 * backpressure through `drain`). The response is committed: an upstream
 * failure from here on ends the client stream with an error event.
 */
export async function pipeStream(
  openSink: () => ResponseSink,
  res: StreamedResponse,
  headers: Readonly<Record<string, string>>,
  signal: AbortSignal,
  onFirstChunk: () => void = () => undefined,
  /** Takes the usage event the gateway asked for (and the client did not) out of the stream. */
  usageFilter?: UsageEventFilter,
  /** Sequences the request asked for (prompts x n): a streamed /generate batch's items are counted each. */
  sequences = 1,
  /** Every PROGRESS_EVENTS data events: how many so far (each carries one output token or more). */
  onProgress: (tokens: number) => void = () => undefined,
): Promise<PipeResult> {
  const sniffer = new SseReportSniffer(sequences);
  const sink = openSink();
  sink.open(res.statusCode, {
    'content-type': headerString(res.headers['content-type']) ?? 'text/event-stream',
    'cache-control': 'no-cache',
    ...headers,
  });
  try {
    let first = true;
    for (let chunk = await res.read(); chunk !== null; chunk = await res.read()) {
      if (first) {
        first = false;
        onFirstChunk();
      }
      sniffer.pushCountingProgress(chunk, onProgress);
      const out = usageFilter ? usageFilter.push(chunk) : chunk;
      if (out.length > 0) await sink.write(out, signal);
    }
    sink.end(usageFilter?.flush());
    return { complete: true, ...sniffer.usage() };
  } catch {
    if (signal.aborted || sink.closed) sink.destroy();
    else {
      const err = new GatewayError('GW_UPSTREAM_ERROR', { reason: 'the stream was interrupted' });
      sink.end(`data: ${JSON.stringify(buildErrorBody(err))}\n\n`);
    }
    res.cancel();
    return { complete: false, ...sniffer.usage() };
  }
}
