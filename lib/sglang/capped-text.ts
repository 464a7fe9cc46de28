// A runtime's answer body read as text, up to a byte cap: past it the read fails and the
// body is given up (the connection with it). The runtime image is the namespace user's:
// an endless /metrics or /server_info must not grow the gateway's or the operator's heap.

export class BodyTooLargeError extends Error {
  constructor(url: string, limitBytes: number) {
    super(`${url}: the answer is larger than ${limitBytes} bytes`);
  }
}

/**
 * The body, a Node stream (undici) or a web stream (fetch), as UTF-8 text. Leaving the loop
 * early ends the iteration, which destroys a Node stream and cancels a web one: nothing past
 * the cap is read.
 */
export async function readCappedText(
  body: AsyncIterable<Uint8Array>,
  maxBytes: number,
  url: string,
): Promise<string> {
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  for await (const chunk of body) {
    bytes += chunk.byteLength;
    if (bytes > maxBytes) throw new BodyTooLargeError(url, maxBytes);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
