// The gateway as its own process (server.ts), for tests of what only a
// process shows: signals, exit codes, a tier of replicas.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { waitForJsonLine } from '../json-lines.ts';

const SERVER = fileURLToPath(new URL('../../../gateway/src/server.ts', import.meta.url));

export interface GatewayProcess {
  readonly url: string;
  /** Where /status, /metrics and the probes are: the admin listener with `admin`, else `url`. */
  readonly adminUrl: string;
  readonly proc: ChildProcess;
  /** The endpoint picker's ext_proc and gRPC health ports (--mode picker or both). */
  readonly picker?: { readonly port: number; readonly healthPort: number };
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

/** The gateway's `listening` line (server.ts): the ports it bound. */
const ListeningLine = z.object({
  msg: z.literal('listening'),
  port: z.number().int().positive(),
  adminPort: z.number().int().positive().optional(),
  pickerPort: z.number().int().positive().optional(),
  pickerHealthPort: z.number().int().positive().optional(),
});

/**
 * Starts server.ts on port 0 with `--routes`, `--auth open` (and `--admin-port 0`, with `admin`),
 * reads the ports it bound from its `listening` line, and resolves once /readyz says ready.
 */
export async function spawnGateway(
  routes: string,
  extra: readonly string[] = [],
  opts: { admin?: boolean; env?: NodeJS.ProcessEnv } = {},
): Promise<GatewayProcess> {
  // Open unless `extra` says otherwise (a later --auth wins).
  const args = ['--routes', routes, '--auth', 'open', '--host', '127.0.0.1', '--port', '0'];
  // The `listening` line is written at any level; the rest of stdout is read here and dropped.
  args.push('--log-level', 'warn');
  if (opts.admin) args.push('--admin-port', '0');
  const proc = spawn(process.execPath, [SERVER, ...args, ...extra], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...opts.env },
  });
  const exited = once(proc, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  if (!proc.stdout) throw new Error('the gateway process has no stdout pipe');
  const line = await waitForJsonLine(proc, proc.stdout, (l) => ListeningLine.safeParse(l).success, {
    what: 'the gateway',
  }).catch((e: unknown) => {
    proc.kill('SIGKILL');
    throw e;
  });
  const listening = ListeningLine.parse(line);
  const url = `http://127.0.0.1:${listening.port}`;
  const adminUrl = listening.adminPort === undefined ? url : `http://127.0.0.1:${listening.adminPort}`;
  for (let i = 0; i < 400; i++) {
    const ready = await fetch(`${adminUrl}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ready) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  const picker =
    listening.pickerPort !== undefined && listening.pickerHealthPort !== undefined
      ? { port: listening.pickerPort, healthPort: listening.pickerHealthPort }
      : undefined;
  return { url, adminUrl, proc, exited, ...(picker ? { picker } : {}) };
}

export { SERVER as GATEWAY_SERVER };
