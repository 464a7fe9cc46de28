import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { listensOn, withFreshPorts } from './fresh-ports.ts';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => s.close(() => r()));
});

function listen(port: number): Promise<Server> {
  const s = createServer();
  return new Promise((resolve, reject) => {
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => {
      servers.push(s);
      resolve(s);
    });
  });
}

describe('withFreshPorts', () => {
  it('starts again on fresh ports when another process took one first', async () => {
    const tried: number[][] = [];
    const server = await withFreshPorts(
      2,
      async (ports) => {
        tried.push([...ports]);
        // The first time, a stranger binds the first port before the program does.
        if (tried.length === 1) await listen(ports[0] ?? 0);
        return listen(ports[0] ?? 0);
      },
      { what: 'a test server' },
    );
    expect(tried).toHaveLength(2);
    expect(tried[1]).not.toEqual(tried[0]);
    expect(new Set(tried[0]).size).toBe(2);
    expect(listensOn(process.pid, (server.address() as { port: number }).port)).toBe(true);
  });

  it('gives up after its attempts, and at once on any other failure', async () => {
    let calls = 0;
    const inUse = withFreshPorts(
      1,
      () => {
        calls++;
        return Promise.reject(new Error('listen tcp 127.0.0.1:1: bind: address already in use'));
      },
      { what: 'a test server', attempts: 3 },
    );
    await expect(inUse).rejects.toThrow(/address already in use/);
    expect(calls).toBe(3);
    calls = 0;
    const other = withFreshPorts(
      1,
      () => {
        calls++;
        return Promise.reject(new Error('no such file', { cause: new Error('ENOENT') }));
      },
      { what: 'a test server' },
    );
    await expect(other).rejects.toThrow(/no such file/);
    expect(calls).toBe(1);
  });
});

describe('listensOn', () => {
  it("tells this process's listening port from one it does not hold", async () => {
    const s = await listen(0);
    const port = (s.address() as { port: number }).port;
    expect(listensOn(process.pid, port)).toBe(true);
    expect(listensOn(1, port)).toBe(false);
    await new Promise<void>((r) => s.close(() => r()));
    servers.splice(servers.indexOf(s), 1);
    expect(listensOn(process.pid, port)).toBe(false);
  });
});
