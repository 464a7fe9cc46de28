// Requests refused before any route sees them get the gateway's JSON error
// body like every other refusal, where fastify's defaults answer
// {"error": "<status text>"} or nothing: those Node's HTTP parser refuses (a
// broken request line or header, bad framing, a request line and headers past
// --max-http-header-size), CONNECT, and those fastify's router cannot decode.

import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { buildErrorBody, GatewayError } from '../errors/index.ts';

/** fastify's frameworkErrors: a URL whose %-escapes do not decode, refused before routing. */
export function answerFrameworkError(err: FastifyError, _req: FastifyRequest, reply: FastifyReply): void {
  const detail = err.code === 'FST_ERR_BAD_URL' ? 'URL: a %-escape does not decode' : 'URL: cannot be routed';
  const refusal = new GatewayError('GW_BAD_REQUEST', { detail });
  void reply.code(refusal.statusCode).send(buildErrorBody(refusal));
}

/** fastify's clientErrorHandler: one answer, then the connection closes (its framing is lost). */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  // A reset connection has nobody to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  answerAndClose(
    socket,
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new GatewayError('GW_HEADERS_TOO_LARGE', { limitBytes: http.maxHeaderSize })
      : new GatewayError('GW_BAD_REQUEST', { detail: `HTTP: ${describeParseError(err.code)}` }),
  );
}

/**
 * The server's 'connect' listener: the gateway is no proxy. Without a listener Node closes a
 * CONNECT request's connection without a word; this says so, as for any other unknown route.
 */
export function answerConnect(req: http.IncomingMessage, socket: Duplex): void {
  answerAndClose(socket, new GatewayError('GW_NOT_FOUND', { method: 'CONNECT', url: req.url ?? '' }));
}

function answerAndClose(socket: Duplex, refusal: GatewayError): void {
  const body = JSON.stringify(buildErrorBody(refusal));
  const status = refusal.statusCode;
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
  socket.destroy();
}

function describeParseError(code: string | undefined): string {
  switch (code) {
    case 'HPE_INVALID_METHOD':
      return 'unknown method';
    case 'HPE_INVALID_URL':
      return 'malformed request target';
    case 'HPE_INVALID_VERSION':
      return 'unsupported HTTP version';
    case 'HPE_INVALID_HEADER_TOKEN':
      return 'malformed header';
    case 'HPE_INVALID_CONTENT_LENGTH':
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
      return 'invalid Content-Length';
    case 'HPE_INVALID_TRANSFER_ENCODING':
    case 'HPE_INVALID_CHUNK_SIZE':
      return 'invalid Transfer-Encoding or chunk';
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return 'the request did not arrive in time';
    default:
      return 'malformed request';
  }
}
