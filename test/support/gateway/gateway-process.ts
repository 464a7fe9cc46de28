// The gateway as its own process (server.ts), for tests of what only a
// process shows: signals, exit codes, a tier of replicas.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findFreePort } from '../sim/testing.ts';

const SERVER = fileURLToPath(new URL('../../../gateway/src/server.ts', import.meta.url));

export interface GatewayProcess {
  readonly url: string;
  /** Where /status, /metrics and the probes are: the admin listener with `admin`, else `url`. */
  readonly adminUrl: string;
  readonly proc: ChildProcess;
  readonly exited: Promise<[number | null, NodeJS.Signals | null]>;
}

/** A --routes file with one model `m` served by one verified endpoint at `upstreamUrl`; remove() deletes it. */
export function writeRoutesFile(upstreamUrl: string): { readonly path: string; readonly remove: () => void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'cacheroute-gw-'));
  const file = path.join(dir, 'routes.json');
  const endpoints = [{ id: 'a', url: upstreamUrl, fingerprint: 'fp', verified: true, ready: true }];
  writeFileSync(
    file,
    JSON.stringify([{ model: 'm', deployment: 'ns/m', fingerprint: 'fp', salt: 's', endpoints }]),
  );
  return { path: file, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Starts server.ts on a free port with `--routes`, `--auth open` (and `--admin-port`, with `admin`); resolves once /readyz says ready. */
export async function spawnGateway(
  routes: string,
  extra: readonly string[] = [],
  opts: { admin?: boolean; env?: NodeJS.ProcessEnv } = {},
): Promise<GatewayProcess> {
  const port = await findFreePort();
  const url = `http://127.0.0.1:${port}`;
  // Open unless `extra` says otherwise (a later --auth wins).
  const args = ['--routes', routes, '--auth', 'open', '--host', '127.0.0.1', '--port', String(port)];
  args.push('--log-level', 'warn');
  let adminUrl = url;
  if (opts.admin) {
    const adminPort = await findFreePort();
    adminUrl = `http://127.0.0.1:${adminPort}`;
    args.push('--admin-port', String(adminPort));
  }
  const proc = spawn(process.execPath, [SERVER, ...args, ...extra], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, ...opts.env },
  });
  const exited = once(proc, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  for (let i = 0; i < 400; i++) {
    const ready = await fetch(`${adminUrl}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ready) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  return { url, adminUrl, proc, exited };
}

export { SERVER as GATEWAY_SERVER };
