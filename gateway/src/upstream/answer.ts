// Reading an answer from a runtime endpoint, on undici's dispatch API: the
// status and headers first, then the body chunk by chunk as the caller asks
// for it (streamed, SSE passed through), or all of it at its end (sendBuffered).
// request() wraps every answer in a body stream, an abort listener and
// promise chains that outlived young-generation GCs at a few hundred
// requests/s; their promotion made scavenges take 5-10 ms, the gateway's whole
// p99 (make bench, overhead). Backpressure: the socket is paused while unread
// chunks pile up and resumed as they are read.

import type { IncomingHttpHeaders } from 'node:http';
import type { Agent, Dispatcher } from 'undici';
import { GatewayError } from '../errors/index.ts';

export interface SendOptions {
  readonly agent: Agent;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  /** A body larger once encoded is not sent (413): the runtime would refuse it, or choke. */
  readonly maxBodyBytes?: number;
  /**
   * A buffered answer larger than this is cut (AnswerInterruptedError): the runtime image is
   * the namespace user's, and one answer of gigabytes would hold the gateway's heap.
   */
  readonly maxAnswerBytes?: number;
  /** The Authorization header the runtime at a base URL takes (its --api-key), if any (runtime-auth.ts). */
  readonly authorizationFor?: (baseUrl: string) => string | undefined;
  /** More request headers: a traced attempt's traceparent (tracing/request-trace.ts). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** The answer had begun when it failed: not retried, the runtime already did the work. */
export class AnswerInterruptedError extends Error {
  constructor(cause: unknown) {
    super('the upstream answer was interrupted', { cause });
  }
}

/** A buffered answer grew past SendOptions.maxAnswerBytes: cut, as the cause of AnswerInterruptedError. */
export class AnswerTooLargeError extends Error {
  constructor(limitBytes: number) {
    super(`the upstream answer is larger than ${limitBytes} bytes`);
  }
}

/**
 * The request was not sent: it could not be encoded (nesting past the stack), or grew past
 * the body limit when it was. The request is at fault, not the runtime, and no other runtime
 * would fare better: `refusal` is the client's answer.
 */
export class RequestEncodingError extends Error {
  readonly refusal: GatewayError;
  constructor(refusal: GatewayError, cause?: unknown) {
    super(`the request was not sent: ${refusal.message}`, { cause });
    this.refusal = refusal;
  }
}

/** Unread chunks held before the upstream socket is paused. */
const HIGH_WATER_CHUNKS = 16;

export interface StreamedResponse {
  readonly statusCode: number;
  readonly headers: IncomingHttpHeaders;
  /** The next body chunk; null at the end. Rejects with AnswerInterruptedError when the answer breaks. */
  read(): Promise<Buffer | null>;
  /** Stops the answer and closes its connection (nothing more is read). */
  cancel(): void;
  /** Reads the rest and drops it (keeps the connection for reuse). */
  discard(): Promise<void>;
}

export function sendStreamed(
  opts: SendOptions,
  baseUrl: string,
  path: string,
  body: Record<string, unknown>,
  signal: AbortSignal,
): Promise<StreamedResponse> {
  const request = prepareRequest(opts, baseUrl, path, body, signal);
  if (request instanceof Error) return Promise.reject(request);
  return new Promise((resolve, reject) => {
    const answer = new StreamedAnswer(signal);
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        answer.attach(c);
      },
      onResponseStart(_c, status, headers) {
        answer.start(status, headers);
        resolve(answer);
      },
      onResponseData(_c, chunk) {
        answer.push(chunk);
      },
      onResponseEnd() {
        answer.end();
      },
      onResponseError(_c, err) {
        if (answer.started) answer.fail(new AnswerInterruptedError(err));
        else {
          answer.detach();
          reject(err);
        }
      },
    };
    opts.agent.dispatch(request, handler);
  });
}

export interface BufferedResponse {
  readonly statusCode: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
}

/**
 * The whole answer in one string (non-streaming answers arrive at the end of generation
 * anyway): chunks gathered as they come, one promise for the request, none per chunk.
 */
export function sendBuffered(
  opts: SendOptions,
  baseUrl: string,
  path: string,
  body: Record<string, unknown>,
  signal: AbortSignal,
): Promise<BufferedResponse> {
  const request = prepareRequest(opts, baseUrl, path, body, signal);
  if (request instanceof Error) return Promise.reject(request);
  return new Promise((resolve, reject) => {
    const link = new AbortLink(signal);
    let statusCode = 0;
    let headers: IncomingHttpHeaders = {};
    let started = false;
    const chunks: Buffer[] = [];
    let bytes = 0;
    const maxBytes = opts.maxAnswerBytes ?? Infinity;
    opts.agent.dispatch(request, {
      onRequestStart(c) {
        link.attach(c);
      },
      onResponseStart(_c, status, h) {
        started = true;
        statusCode = status;
        headers = h;
      },
      onResponseData(c, chunk) {
        bytes += chunk.length;
        if (bytes > maxBytes) {
          chunks.length = 0;
          c.abort(new AnswerTooLargeError(maxBytes));
          return;
        }
        chunks.push(chunk);
      },
      onResponseEnd() {
        link.detach();
        const whole = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
        resolve({ statusCode, headers, text: whole.toString('utf8') });
      },
      onResponseError(_c, err) {
        link.detach();
        reject(started ? new AnswerInterruptedError(err) : err);
      },
    });
  });
}

/** The dispatch options of a request to a runtime, or why it cannot be sent (the client's 4xx). */
function prepareRequest(
  opts: SendOptions,
  baseUrl: string,
  path: string,
  body: Record<string, unknown>,
  signal: AbortSignal,
): Dispatcher.DispatchOptions | Error {
  if (signal.aborted) return toError(signal.reason);
  let payload: string;
  try {
    payload = JSON.stringify(body);
  } catch (err) {
    const refusal = new GatewayError('GW_BAD_REQUEST', {
      detail: 'body: it cannot be encoded for the runtime',
    });
    return new RequestEncodingError(refusal, err);
  }
  const limit = opts.maxBodyBytes;
  // A UTF-16 unit is at most 3 bytes in UTF-8: count bytes only when that bound is past the limit.
  if (limit !== undefined && payload.length * 3 > limit && Buffer.byteLength(payload) > limit)
    return new RequestEncodingError(new GatewayError('GW_PAYLOAD_TOO_LARGE', { limitBytes: limit }));
  const target = resolveTarget(baseUrl, path);
  return {
    origin: target.origin,
    path: target.path,
    method: 'POST',
    headers: buildHeaders(opts, baseUrl),
    body: payload,
    headersTimeout: opts.headersTimeoutMs,
    bodyTimeout: opts.bodyTimeoutMs,
  };
}

interface Target {
  readonly origin: string;
  readonly path: string;
}

/** Parsed once per endpoint and route, not per request (a URL parse is among a request's dearer steps). */
const targets = new Map<string, Map<string, Target>>();
const MAX_TARGET_BASES = 4096;

function resolveTarget(baseUrl: string, path: string): Target {
  let byPath = targets.get(baseUrl);
  if (!byPath) {
    // Endpoints come and go with pods: start over rather than grow without bound.
    if (targets.size >= MAX_TARGET_BASES) targets.clear();
    byPath = new Map();
    targets.set(baseUrl, byPath);
  }
  let target = byPath.get(path);
  if (!target) {
    const url = new URL(path, baseUrl);
    target = { origin: url.origin, path: url.pathname + url.search };
    byPath.set(path, target);
  }
  return target;
}

const JSON_HEADERS: Readonly<Record<string, string>> = { 'content-type': 'application/json' };

function buildHeaders(opts: SendOptions, baseUrl: string): Readonly<Record<string, string>> {
  const authorization = opts.authorizationFor?.(baseUrl);
  // undici only reads the headers: the shared object serves every request that adds none.
  if (!authorization && !opts.headers) return JSON_HEADERS;
  const headers = authorization ? { ...JSON_HEADERS, authorization } : { ...JSON_HEADERS };
  return opts.headers ? Object.assign(headers, opts.headers) : headers;
}

/** The client's abort, passed to the upstream request once it has started; undone at the answer's end. */
class AbortLink {
  controller: Dispatcher.DispatchController | undefined;
  readonly #signal: AbortSignal;
  readonly #onAbort = (): void => this.controller?.abort(toError(this.#signal.reason));

  constructor(signal: AbortSignal) {
    this.#signal = signal;
    signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  attach(c: Dispatcher.DispatchController): void {
    this.controller = c;
    if (this.#signal.aborted) c.abort(toError(this.#signal.reason));
  }

  detach(): void {
    this.#signal.removeEventListener('abort', this.#onAbort);
  }
}

class StreamedAnswer implements StreamedResponse {
  statusCode = 0;
  headers: IncomingHttpHeaders = {};
  started = false;
  readonly #link: AbortLink;
  readonly #chunks: Buffer[] = [];
  #done = false;
  #error: Error | undefined;
  #waiter: { resolve: (c: Buffer | null) => void; reject: (e: Error) => void } | undefined;

  constructor(signal: AbortSignal) {
    this.#link = new AbortLink(signal);
  }

  attach(c: Dispatcher.DispatchController): void {
    this.#link.attach(c);
  }

  detach(): void {
    this.#link.detach();
  }

  start(status: number, headers: IncomingHttpHeaders): void {
    this.started = true;
    this.statusCode = status;
    this.headers = headers;
  }

  push(chunk: Buffer): void {
    if (this.#waiter) {
      const w = this.#waiter;
      this.#waiter = undefined;
      w.resolve(chunk);
      return;
    }
    this.#chunks.push(chunk);
    if (this.#chunks.length >= HIGH_WATER_CHUNKS) this.#link.controller?.pause();
  }

  end(): void {
    this.#done = true;
    this.detach();
    this.#waiter?.resolve(null);
    this.#waiter = undefined;
  }

  fail(err: Error): void {
    this.#error = err;
    this.detach();
    this.#waiter?.reject(err);
    this.#waiter = undefined;
  }

  read(): Promise<Buffer | null> {
    const chunk = this.#chunks.shift();
    if (chunk) {
      if (this.#link.controller?.paused && this.#chunks.length < HIGH_WATER_CHUNKS / 2)
        this.#link.controller.resume();
      return Promise.resolve(chunk);
    }
    if (this.#error) return Promise.reject(this.#error);
    if (this.#done) return Promise.resolve(null);
    if (this.#link.controller?.paused) this.#link.controller.resume();
    return new Promise((resolve, reject) => (this.#waiter = { resolve, reject }));
  }

  cancel(): void {
    if (this.#done || this.#error) return;
    this.#link.controller?.abort(new Error('cancelled by the gateway'));
  }

  async discard(): Promise<void> {
    try {
      while ((await this.read()) !== null);
    } catch {
      // Nothing to keep from a broken answer we were dropping anyway.
    }
  }
}

function toError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error('aborted');
}
