import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fetchMetricsText, fetchServerInfo, MAX_INFO_BYTES, MAX_METRICS_BYTES } from './client.ts';

let server: http.Server;
let base: string;
/** Bytes the runtime answers with, past the path's cap; 0: a small answer. */
let excess = 0;

beforeEach(async () => {
  excess = 0;
  // A runtime that answers endlessly: as many bytes as the cap of the path asked, plus `excess`.
  server = http.createServer((req, res) => {
    const cap = req.url === '/metrics' ? MAX_METRICS_BYTES : MAX_INFO_BYTES;
    if (excess === 0) {
      res.end(req.url === '/metrics' ? 'sglang:num_queue_reqs 0\n' : '{"version": "0.5.23"}');
      return;
    }
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    const pump = (): void => {
      while (sent < cap + excess) {
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

describe('a runtime answer past its cap', () => {
  it('a small answer is read', async () => {
    expect(await fetchMetricsText(base, {})).toEqual({ ok: true, value: 'sglang:num_queue_reqs 0\n' });
  });

  it('is an error that names the URL and the cap', async () => {
    excess = 1024 * 1024;
    expect(await fetchServerInfo(base, { timeoutMs: 30_000 })).toEqual({
      ok: false,
      error: `GET ${base}/server_info: the answer is larger than ${MAX_INFO_BYTES} bytes`,
    });
    expect(await fetchMetricsText(base, { timeoutMs: 30_000 })).toEqual({
      ok: false,
      error: `GET ${base}/metrics: the answer is larger than ${MAX_METRICS_BYTES} bytes`,
    });
  });
});
