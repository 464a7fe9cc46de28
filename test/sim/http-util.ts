// Small helpers of the HTTP shell (node:http, no framework).

import type http from 'node:http';

export const MAX_BODY_BYTES = 64 * 1024 * 1024;

export class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
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
    throw new HttpError(400, `Invalid JSON body: ${(e as Error).message}`);
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

/** SGLang's error body of the native endpoints. */
export function nativeError(message: string, status: number): { error: { message: string; code: number } } {
  return { error: { message, code: status } };
}

/** SGLang's OpenAI-layer error body (entrypoints/openai/protocol.py ErrorResponse). */
export function openAiError(message: string, status: number): Record<string, unknown> {
  const type = status === 400 ? 'BadRequestError' : status === 404 ? 'NotFoundError' : 'InternalServerError';
  return { object: 'error', message, type, param: null, code: status };
}
