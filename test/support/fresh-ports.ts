// Ports for programs that cannot bind port 0 and say which port they got:
// redis-server (port 0 turns TCP off), etcd and kube-apiserver (their peers
// and certificates name the port before they start; --secure-port 0 turns
// serving off), the LeaderWorkerSet manager (its webhook port is in the
// webhook configuration), the kubelet and kube-proxy, versitygw, the OTLP
// collector and the real SGLang server. Everything else a test starts binds
// port 0 and reads the port back (test/support/sim/testing.ts, sim/process.ts,
// gateway/gateway-process.ts); use that wherever a program allows it.
//
// Here the kernel hands out ports that are free now and `start` runs the
// program on them. Another process may bind one in between; then the program
// fails with "address already in use" and `start` runs again on fresh ports,
// a few times. `start` must throw when the program did not come up (the
// helpers in processes.ts put the program's log in the error), and its probe
// must tell its program from a stranger that took the port: by an answer
// only that program gives, or by `listensOn` (the socket is the child's).

import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer } from 'node:net';

const IN_USE = /address already in use|EADDRINUSE|bind: address|port is already allocated|Address in use/i;

export async function withFreshPorts<T>(
  count: number,
  start: (ports: readonly number[]) => Promise<T>,
  opts: { readonly what: string; readonly attempts?: number },
): Promise<T> {
  const attempts = opts.attempts ?? 5;
  for (let attempt = 1; ; attempt++) {
    const ports = await portsFreeNow(count);
    try {
      return await start(ports);
    } catch (err) {
      if (attempt >= attempts || !IN_USE.test(errorText(err))) throw err;
      process.stderr.write(
        `${opts.what}: a port of ${ports.join(', ')} was taken before it bound it; again on fresh ports\n`,
      );
    }
  }
}

/** `count` distinct ports the kernel handed out and took back: free now, not held. */
async function portsFreeNow(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await portFreeNow());
  return [...ports];
}

function portFreeNow(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

function errorText(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e !== undefined && e !== null && parts.length < 5; e = (e as Error).cause) {
    parts.push(e instanceof Error ? e.message : JSON.stringify(e));
  }
  return parts.join('\n');
}

/**
 * Does process `pid` hold a TCP socket listening on `port` (this network namespace)? Read from
 * /proc: the listening sockets' inodes in /proc/net/tcp{,6}, the process's in /proc/PID/fd.
 */
export function listensOn(pid: number, port: number): boolean {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is f[1] (ADDR:PORT in hex), st is f[3] (0A: LISTEN), inode is f[9].
      if (f[1]?.endsWith(`:${hexPort}`) && f[3] === '0A' && f[9] !== undefined) inodes.add(f[9]);
    }
  }
  if (inodes.size === 0) return false;
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false;
  }
  return fds.some((fd) => {
    try {
      return inodes.has(/^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1] ?? '');
    } catch {
      return false;
    }
  });
}
