// Where a streamed answer goes: the client's response, as the relay needs it
// (commit status and headers, write with backpressure, end, cut). The shell
// (app.ts) makes one over node's ServerResponse; the request path never holds
// the web framework's reply.

import { once } from 'node:events';
import type { ServerResponse } from 'node:http';

export interface ResponseSink {
  /** Send the status and headers now: the response is committed. */
  open(status: number, headers: Readonly<Record<string, string>>): void;
  /** Write a chunk; resolves when the client can take more (or rejects when `signal` aborts). */
  write(chunk: Uint8Array, signal: AbortSignal): Promise<void>;
  end(last?: Uint8Array | string): void;
  /** The client's connection is gone. */
  readonly closed: boolean;
  destroy(): void;
}

/** A sink over node's response (the caller has taken it from the framework: fastify's hijack). */
export function buildNodeSink(raw: ServerResponse): ResponseSink {
  return {
    open(status, headers) {
      // Set one by one, not passed to writeHead, so getHeader() reads them after the head is sent.
      for (const name in headers) raw.setHeader(name, headers[name] ?? '');
      raw.writeHead(status);
      raw.flushHeaders();
    },
    async write(chunk, signal) {
      if (!raw.write(chunk)) await once(raw, 'drain', { signal });
    },
    end(last) {
      if (last === undefined) raw.end();
      else raw.end(last);
    },
    get closed() {
      return raw.destroyed;
    },
    destroy() {
      raw.destroy();
    },
  };
}
