// A runtime's answer body read as text, up to a byte cap: past it the body is
// destroyed (the connection with it) and the read fails. The runtime image is
// the namespace user's; an endless /metrics must not grow the gateway's heap.

import type { Readable } from 'node:stream';

export class BodyTooLargeError extends Error {
  constructor(url: string, limitBytes: number) {
    super(`${url}: the answer is larger than ${limitBytes} bytes`);
  }
}

export async function readCappedText(body: Readable, maxBytes: number, url: string): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > maxBytes) {
      const err = new BodyTooLargeError(url, maxBytes);
      body.destroy(err);
      throw err;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
