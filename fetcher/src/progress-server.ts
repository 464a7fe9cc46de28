// The fetcher's progress over HTTP: `GET /progress` answers the last progress event as JSON
// (204 before the first). The operator reads it from the fetch pod's IP while the Job runs and
// shows it in the Deployment's status (ADR 0016); the fetch pod needs no API access for that,
// and the operator no `pods/log` or exec.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FETCH_PROGRESS_PATH, type FetchProgress } from '#api/model-fetch-progress.ts';

export interface ProgressServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function serveFetchProgress(opts: {
  readonly host: string;
  readonly port: number;
  readonly current: () => FetchProgress | undefined;
}): Promise<ProgressServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || path !== FETCH_PROGRESS_PATH)
      return void res
        .writeHead(404, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: `only GET ${FETCH_PROGRESS_PATH} is served here` }));
    const p = opts.current();
    if (!p) return void res.writeHead(204).end();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(p));
  });
  // A reader that goes away mid-answer must not keep the fetcher's exit waiting.
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
