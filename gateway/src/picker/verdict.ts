// A refusal as data and back: the picker's steps refuse by throwing a
// GatewayError (the registry's code, status and Retry-After); the picker hands
// the front end a plain Refusal, and the proxy throws it again for fastify's
// error handler, so the client's answer is the one it always was.

import { buildErrorBody, GatewayError } from '../errors/index.ts';
import type { Refusal } from './types.ts';

/** `shed` when the client may retry later (a Retry-After), `refuse` otherwise. */
export function toRefusal(err: GatewayError): Refusal {
  const retry = err.retryAfterSeconds;
  return {
    kind: retry === undefined ? 'refuse' : 'shed',
    status: err.statusCode,
    ...(retry === undefined ? {} : { retryAfterSeconds: retry }),
    code: err.code,
    params: err.params,
    body: buildErrorBody(err),
  };
}

export function toGatewayError(r: Refusal): GatewayError {
  return new GatewayError(
    r.code,
    r.params,
    r.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: r.retryAfterSeconds },
  );
}
