import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BodyTooLargeError } from '#sglang/capped-text.ts';
import { fetchMetricsText } from './runtime-load.ts';

let server: http.Server;
let base: string;

beforeEach(async () => {
  // A runtime whose /metrics answers as many bytes as ?bytes= asks, in 64 KiB writes.
  server = http.createServer((req, res) => {
    const want = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('bytes'));
    res.writeHead(200, { 'content-type': 'text/plain' });
    const chunk = Buffer.alloc(64 * 1024, 0x23);
    let sent = 0;
    const pump = (): void => {
      while (sent < want) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    res.on('error', () => undefined);
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

describe('fetchMetricsText', () => {
  it('reads an answer within the cap', async () => {
    expect(await fetchMetricsText(`${base}/metrics?bytes=${128 * 1024}`, 1024 * 1024)).toHaveLength(
      128 * 1024,
    );
  });

  it('fails an answer past the cap, and stops reading it', async () => {
    await expect(
      fetchMetricsText(`${base}/metrics?bytes=${64 * 1024 * 1024}`, 1024 * 1024),
    ).rejects.toBeInstanceOf(BodyTooLargeError);
  });
});
