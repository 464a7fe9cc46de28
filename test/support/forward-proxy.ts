// A minimal HTTP forward proxy (absolute-form requests, as clients send for http:// targets
// through HTTP_PROXY), recording the targets it relayed: enough to show a client uses it.
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ForwardProxy {
  readonly url: string;
  /** Absolute URLs relayed, in order. */
  readonly relayed: string[];
  readonly close: () => Promise<void>;
}

export async function startForwardProxy(): Promise<ForwardProxy> {
  const relayed: string[] = [];
  const server: Server = createServer((req, res) => {
    const target = new URL(req.url ?? '/');
    relayed.push(target.href);
    const upstream = request(
      target,
      { method: req.method, headers: { ...req.headers, host: target.host } },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.on('error', () => res.destroy());
        up.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    relayed,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
