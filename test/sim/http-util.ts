// Small helpers of the HTTP shell (node:http, no framework).

import type http from 'node:http';

export const MAX_BODY_BYTES = 64 * 1024 * 1024;

/**
 * How SGLang words a refused request, by the layer that refuses it:
 * - `validation`: FastAPI's parse of the body (malformed JSON, a wrong type),
 *   which SGLang's RequestValidationError handler turns into a 400 ErrorResponse;
 * - `contract`: the proto contract gate of /generate (`{"error": "<serde text>"}`);
 * - `handler`: the endpoint itself (a ValueError or HTTPException).
 */
export type HttpErrorKind = 'validation' | 'contract' | 'handler';

export class HttpError extends Error {
  readonly status: number;
  readonly kind: HttpErrorKind;
  constructor(status: number, message: string, kind: HttpErrorKind = 'handler') {
    super(message);
    this.status = status;
    this.kind = kind;
  }
}

export function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        reject(new HttpError(413, 'request body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export async function readJson(req: http.IncomingMessage): Promise<unknown> {
  const text = await readBody(req);
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new HttpError(400, `Invalid JSON body: ${(e as Error).message}`, 'validation');
  }
}

export function sendJson(
  res: http.ServerResponse,
  status: number,
  body: unknown,
  headers: http.OutgoingHttpHeaders = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

export function sendText(
  res: http.ServerResponse,
  status: number,
  text: string,
  contentType = 'text/plain; charset=utf-8',
): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** A FastAPI `Response(content=..., status_code=...)` without a media type: no content-type header. */
export function sendBare(res: http.ServerResponse, status: number, text = ''): void {
  res.writeHead(status, { 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function startSse(res: http.ServerResponse, headers: http.OutgoingHttpHeaders): void {
  res.writeHead(200, {
    ...headers,
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
}

export function writeSse(res: http.ServerResponse, data: unknown): void {
  res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
}

/** /generate's refusal of a ValueError (http_server._create_error_response): the message alone. */
export function nativeError(message: string): { error: { message: string } } {
  return { error: { message } };
}

/**
 * An HTTPException raised under a native route (a non-stream abort with a
 * status other than 400): SGLang's handler answers an ErrorResponse whose type
 * is the status code as text.
 */
export function httpExceptionError(message: string, status: number): Record<string, unknown> {
  return { object: 'error', message, type: String(status), param: null, code: status };
}

/** SGLang's OpenAI-layer error body (entrypoints/openai/protocol.py ErrorResponse). */
export function openAiError(message: string, status: number): Record<string, unknown> {
  const type = status === 400 ? 'BadRequestError' : status === 404 ? 'NotFoundError' : 'InternalServerError';
  return { object: 'error', message, type, param: null, code: status };
}

/** The RequestValidationError handler's body (http_server.validation_exception_handler): always 400. */
export function validationError(message: string): Record<string, unknown> {
  return { object: 'error', message, type: 'Bad Request', param: null, code: 400 };
}

/** The body SGLang answers for an error raised while serving `path`. */
export function errorBody(e: HttpError, path: string): unknown {
  if (e.kind === 'validation') return validationError(e.message);
  if (e.kind === 'contract') return { error: e.message };
  if (path.startsWith('/v1/')) return openAiError(e.message, e.status);
  return e.status === 400 ? nativeError(e.message) : httpExceptionError(e.message, e.status);
}
