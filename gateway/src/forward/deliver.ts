// Handing a started answer to the client: whole (the answer's text, its usage
// read for the cache report and the tenant's token count), or streamed (piped
// chunk by chunk, the usage event the gateway asked for kept from a client
// that did not). Each reports the endpoint's progress to the caller's `done`.

import type { CacheReport } from '../policies/index.ts';
import type { RateLimiter } from '../tenancy/limiter.ts';
import type { Tenant } from '../tenancy/tenant.ts';
import type { BufferedResponse, StreamedResponse } from '../upstream/answer.ts';
import { headerString, pipeStream } from '../upstream/relay.ts';
import { extractAnswerUsage } from '../upstream/report.ts';
import { UsageEventFilter } from '../upstream/strip-usage.ts';
import { ENDPOINT_HEADER, type Buffered, type Served } from './served.ts';
import type { Deliver, RequestContext } from './types.ts';

/** The cache report with the answer's output length, which the policy learns its decode prediction from. */
function withOutput(
  report: CacheReport | undefined,
  completionTokens: number | undefined,
): CacheReport | undefined {
  return report && completionTokens !== undefined ? { ...report, completionTokens } : report;
}

export function deliverBuffered(
  limiter: RateLimiter,
  tenant: Tenant | undefined,
): Deliver<Buffered, BufferedResponse> {
  return (endpoint, res, done) => {
    const text = res.text;
    const usage = res.statusCode < 300 ? extractAnswerUsage(text) : undefined;
    const report = usage?.report;
    if (tenant && usage?.completionTokens) limiter.charge(tenant, usage.completionTokens);
    done({ kind: 'completed', report: withOutput(report, usage?.completionTokens) });
    const contentType = headerString(res.headers['content-type']) ?? 'application/json';
    return Promise.resolve({ status: res.statusCode, contentType, body: text, endpoint, report });
  };
}

export function deliverStream(
  limiter: RateLimiter,
  ctx: RequestContext,
  stripUsage: boolean,
  /** Sequences the request asked for (prompts x n): a streamed batch's completion tokens are summed. */
  sequences: number,
): Deliver<Served, StreamedResponse> {
  return async (endpoint, res, done) => {
    const piped = await pipeStream(
      ctx.openSink,
      res,
      { [ENDPOINT_HEADER]: endpoint.id },
      ctx.signal,
      () => done({ kind: 'first-byte' }),
      stripUsage ? new UsageEventFilter() : undefined,
      sequences,
      (tokens) => done({ kind: 'decoding', tokens }),
    );
    const tenant = ctx.tenant;
    if (tenant && piped.completionTokens) limiter.charge(tenant, piped.completionTokens);
    // Even an interrupted stream was prefilled: the endpoint holds the prompt.
    done({ kind: 'completed', report: withOutput(piped.report, piped.completionTokens) });
    return { kind: 'streamed' };
  };
}
