// The gateway process itself under a real SIGTERM (what the kubelet sends
// after the chart's preStop sleep): a request in flight is answered, nothing
// new reaches the model server, and the process exits 0.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { findFreePort } from '../../test/sim/testing.ts';
import { eventually, Gate, startFakeUpstream, type FakeUpstream } from './testing/fake-upstream.ts';

const SERVER = fileURLToPath(new URL('./server.ts', import.meta.url));

let up: FakeUpstream | undefined;
let child: ChildProcess | undefined;
let dir: string | undefined;

afterEach(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await up?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** One request on its own keep-alive connection; resolves with the status, or the connection error. */
function post(url: string, agent: http.Agent): Promise<number | string> {
  const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
  return new Promise((resolve) => {
    const req = http.request(
      `${url}/v1/chat/completions`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
    req.end(body);
  });
}

describe('gateway process on SIGTERM', () => {
  it('answers the request in flight, sends nothing new upstream, and exits 0', async () => {
    const upstream = await startFakeUpstream();
    up = upstream;
    dir = mkdtempSync(path.join(os.tmpdir(), 'cacheroute-gw-'));
    const routes = path.join(dir, 'routes.json');
    writeFileSync(
      routes,
      JSON.stringify([
        {
          model: 'm',
          deployment: 'ns/m',
          fingerprint: 'fp',
          salt: 's',
          endpoints: [{ id: 'a', url: upstream.url, fingerprint: 'fp', verified: true, ready: true }],
        },
      ]),
    );
    const port = await findFreePort();
    const url = `http://127.0.0.1:${port}`;
    const proc = spawn(
      process.execPath,
      [SERVER, '--routes', routes, '--host', '127.0.0.1', '--port', String(port), '--log-level', 'warn'],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    child = proc;
    const exited = once(proc, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    for (let i = 0; i < 200; i++) {
      const ok = await fetch(`${url}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) break;
      await new Promise((r) => setTimeout(r, 50));
    }

    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    expect(await post(url, agent)).toBe(200); // a warm keep-alive connection
    upstream.headGate = new Gate();
    const held = post(url, new http.Agent());
    await eventually(() => upstream.headGate.waiting === 1);

    proc.kill('SIGTERM');
    // Closing: the listener goes first (new connections refused) ...
    for (let i = 0; i < 200; i++) {
      const listening = await fetch(`${url}/healthz`).then(
        () => true,
        () => false,
      );
      if (!listening) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    // ... and new work on the warm connection is refused too (503), or that connection was closed.
    expect([503, 'ECONNREFUSED', 'ECONNRESET']).toContain(await post(url, agent));
    expect(upstream.received).toHaveLength(2);

    upstream.headGate.open();
    expect(await held).toBe(200);
    const [code, signal] = await exited;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    agent.destroy();
  });
});
