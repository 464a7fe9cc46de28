// Bytes on a TCP socket, for requests no HTTP client library will send
// (a broken request line, bad framing, control characters in a header), and
// the one response that comes back, read as plainly as it was written.

import net from 'node:net';

export interface RawAnswer {
  readonly status: number;
  readonly headers: ReadonlyMap<string, string>;
  readonly body: Buffer;
}

/**
 * Sends `bytes` and reads one response. Resolves undefined when none came within
 * `quietMs` of the last byte received (an incomplete request the server still
 * waits on), or when the server closed the connection without answering.
 */
export function sendRaw(port: number, bytes: Buffer, quietMs = 400): Promise<RawAnswer | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let settled = false;
    const finish = (): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parseResponse(Buffer.concat(chunks)));
    };
    let timer = setTimeout(finish, quietMs);
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      if (parseResponse(Buffer.concat(chunks), true)) finish();
      else {
        clearTimeout(timer);
        timer = setTimeout(finish, quietMs);
      }
    });
    socket.on('error', finish);
    socket.on('close', finish);
    socket.write(bytes);
  });
}

/** The first response in `buf`; with `complete`, only once its whole body has arrived. */
function parseResponse(buf: Buffer, complete = false): RawAnswer | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1];
  if (status === undefined) return undefined;
  // An interim answer (100 Continue): the real one follows it.
  if (status.startsWith('1')) return parseResponse(buf.subarray(end + 4), complete);
  const headers = new Map<string, string>();
  for (const line of lines.slice(1)) {
    const i = line.indexOf(':');
    if (i > 0) headers.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
  }
  const rest = buf.subarray(end + 4);
  const length = headers.get('content-length');
  if (length !== undefined) {
    const n = Number(length);
    if (complete && rest.length < n) return undefined;
    return { status: Number(status), headers, body: rest.subarray(0, n) };
  }
  if (headers.get('transfer-encoding') === 'chunked') {
    if (complete && !rest.includes('\r\n0\r\n\r\n') && !rest.subarray(0, 5).equals(Buffer.from('0\r\n\r\n')))
      return undefined;
    return { status: Number(status), headers, body: dechunk(rest) };
  }
  // No framing: the body runs to the close.
  if (complete) return undefined;
  return { status: Number(status), headers, body: rest };
}

function dechunk(buf: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', at);
    if (eol < 0) break;
    const size = parseInt(buf.subarray(at, eol).toString('latin1'), 16);
    if (!(size > 0)) break;
    out.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}
