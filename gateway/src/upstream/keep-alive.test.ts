// The gateway closes an idle connection to a runtime before the runtime does.
// SGLang's uvicorn closes a connection idle SGLANG_KEEP_ALIVE_TIMEOUT_MS and,
// unlike Node's http server, sends no Keep-Alive header that would tell the
// client so; a request written as the close arrives is reset unanswered. The
// runtime here answers as uvicorn does: HTTP/1.1, no Keep-Alive header, and
// its own close after the idle timeout.
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { SGLANG_KEEP_ALIVE_TIMEOUT_MS } from '#sglang/http-server.ts';
import { build } from '../app.ts';
import { StaticRoutingTable } from '../routing/table.ts';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

/** Answers each complete request with one small JSON body; closes after the idle timeout, as uvicorn does. */
function serveLikeUvicorn(onSocket: (s: Socket, closedByServer: () => boolean) => void) {
  return createServer((socket) => {
    let serverClosed = false;
    let buffered = '';
    let idle: NodeJS.Timeout | undefined;
    onSocket(socket, () => serverClosed);
    socket.on('data', (chunk: Buffer) => {
      clearTimeout(idle);
      buffered += chunk.toString('latin1');
      const head = buffered.indexOf('\r\n\r\n');
      if (head < 0) return;
      const length = Number(/content-length: *(\d+)/i.exec(buffered.slice(0, head))?.[1] ?? 0);
      if (buffered.length < head + 4 + length) return;
      buffered = buffered.slice(head + 4 + length);
      const body = '{"text":"a","meta_info":{}}';
      socket.write(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
      );
      idle = setTimeout(() => {
        serverClosed = true;
        socket.end();
      }, SGLANG_KEEP_ALIVE_TIMEOUT_MS);
    });
    socket.on('close', () => clearTimeout(idle));
    socket.on('error', () => undefined);
  });
}

it("closes idle runtime connections before SGLang's keep-alive timeout would", async () => {
  const clientCloses: boolean[] = [];
  const runtime = serveLikeUvicorn((socket, closedByServer) =>
    // 'end' is the peer's FIN: the gateway closed first unless the server already had.
    socket.on('end', () => clientCloses.push(!closedByServer())),
  );
  await new Promise<void>((r) => runtime.listen(0, '127.0.0.1', r));
  closers.push(() => new Promise((r) => runtime.close(() => r())));
  const url = `http://127.0.0.1:${(runtime.address() as AddressInfo).port}`;
  const app = build({
    table: new StaticRoutingTable([
      {
        model: 'm',
        deployment: 'ns/m',
        fingerprint: 'fp',
        salt: 's',
        routing: RoutingSettings.parse({ policy: 'round-robin' }),
        admission: Admission.parse({}),
        reuse: ResultReuse.parse({}),
        endpoints: [{ id: 'e', url, role: 'standalone', fingerprint: 'fp', verified: true, ready: true }],
      },
    ]),
  });
  closers.push(() => app.close());
  const res = await app.inject({ method: 'POST', url: '/generate', payload: { model: 'm', text: 'hi' } });
  expect(res.statusCode).toBe(200);
  await new Promise((r) => setTimeout(r, SGLANG_KEEP_ALIVE_TIMEOUT_MS + 500));
  expect(clientCloses).toEqual([true]);
}, 15_000);
