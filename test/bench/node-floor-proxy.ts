// The floor under any Node gateway: a proxy that reads each request, sends it on to one
// upstream over undici (as the gateway does) and passes the buffered answer back, with no
// routing, admission, parsing or metrics. The overhead phase measures it beside the gateway,
// so the report says how much of the gateway's added latency is its own work and how much
// is Node's HTTP server and client on this machine.
//
//   node test/bench/node-floor-proxy.ts --upstream http://127.0.0.1:P --port Q

import http from 'node:http';
import { parseArgs } from 'node:util';
import { Agent } from 'undici';

const { values } = parseArgs({
  options: {
    upstream: { type: 'string' },
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
  },
});
if (values.upstream === undefined) {
  process.stderr.write('node-floor-proxy: --upstream is required\n');
  process.exit(2);
}
const upstream = new URL(values.upstream);
const agent = new Agent({ keepAliveTimeout: 4_000 });

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    agent
      .request({
        origin: upstream.origin,
        path: req.url ?? '/',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: Buffer.concat(chunks),
      })
      .then(async (r) => {
        const body = Buffer.from(await r.body.arrayBuffer());
        res.writeHead(r.statusCode, { 'content-type': 'application/json', 'content-length': body.length });
        res.end(body);
      })
      .catch((e: unknown) => {
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: String(e) }));
      });
  });
});
const stop = (): void => void server.close(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
server.listen(Number(values.port), values.host, () => {
  // The port bound (the kernel's pick for --port 0), for the bench that started it.
  const address = server.address();
  console.log(
    JSON.stringify({ msg: 'listening', port: typeof address === 'object' && address ? address.port : null }),
  );
});
