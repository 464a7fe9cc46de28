// /healthz, /readyz and /metrics over plain HTTP (the kubelet's probes and Prometheus).
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface Check {
  name: string;
  check(): boolean;
}

export interface HealthServerOptions {
  host?: string;
  port: number;
  healthChecks: readonly Check[];
  readyChecks: readonly Check[];
  registry: Registry;
}

export interface HealthServer {
  address(): AddressInfo;
  close(): Promise<void>;
}

export async function startHealthServer(opts: HealthServerOptions): Promise<HealthServer> {
  const report = (checks: readonly Check[]): { ok: boolean; body: string } => {
    const failed = checks.filter((c) => !safe(c));
    const lines = checks.map(
      (c) => `[${failed.includes(c) ? '-' : '+'}]${c.name} ${failed.includes(c) ? 'failed' : 'ok'}`,
    );
    return {
      ok: failed.length === 0,
      body: `${lines.join('\n')}\n${failed.length === 0 ? 'ok' : 'failed'}\n`,
    };
  };
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz' || path === '/readyz') {
      const r = report(path === '/healthz' ? opts.healthChecks : opts.readyChecks);
      res.writeHead(r.ok ? 200 : 503, { 'content-type': 'text/plain; charset=utf-8' }).end(r.body);
      return;
    }
    if (path === '/metrics') {
      opts.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': opts.registry.contentType }).end(text),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
      return;
    }
    res.writeHead(404).end('not found\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '0.0.0.0', () => resolve());
  });
  return {
    address: () => server.address() as AddressInfo,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function safe(c: Check): boolean {
  try {
    return c.check();
  } catch {
    return false;
  }
}
