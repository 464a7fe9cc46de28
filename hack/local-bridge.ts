// A TCP port on the host that reaches a TCP port inside the private network
// namespace of `make run`. A process lives in one network namespace, but the
// filesystem is shared: the host side listens on 127.0.0.1 and forwards each
// connection to a Unix socket; the namespace side accepts on that socket and
// forwards to the real address. Bytes are piped untouched (TLS stays end to end).
import { connect, createServer, type Server, type Socket } from 'node:net';

function pipeBoth(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  const close = (): void => {
    a.destroy();
    b.destroy();
  };
  a.on('error', close).on('close', close);
  b.on('error', close).on('close', close);
}

function listen(server: Server, target: { port: number; host: string } | { path: string }): Promise<Server> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(target, () => resolve(server));
  });
}

/** Host side: 127.0.0.1:port → Unix socket. */
export function forwardTcpToUnix(port: number, socketPath: string): Promise<Server> {
  const server = createServer((client) => pipeBoth(client, connect({ path: socketPath })));
  return listen(server, { port, host: '127.0.0.1' });
}

/** Namespace side: Unix socket → host:port inside the namespace. */
export function forwardUnixToTcp(socketPath: string, host: string, port: number): Promise<Server> {
  const server = createServer((client) => pipeBoth(client, connect({ host, port })));
  return listen(server, { path: socketPath });
}
