// Child processes of the benchmark: spawn in their own process group, stop
// every one of them (by pid) on every exit path, wait for them to answer.

import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';

export interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  /** Last lines of stderr/stdout, for error messages. */
  tail(): string;
  exited(): boolean;
  /** The first of its first JSON log lines whose msg is `msg` (a start-up line), if it printed one. */
  said(msg: string): Record<string, unknown> | undefined;
}

/** How many of a process's first JSON lines are kept for said(): start-up lines come early. */
const KEPT_JSON_LINES = 100;

const live = new Set<Proc>();

/** Spawn `cmd args` in a new process group; output goes to `logPath` and a small ring for errors. */
export function startProcess(
  name: string,
  cmd: string,
  args: readonly string[],
  logPath: string,
  env: NodeJS.ProcessEnv = process.env,
): Proc {
  const log: WriteStream = createWriteStream(logPath, { flags: 'a' });
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true, env });
  let ring = '';
  let exited = false;
  const keep = (chunk: Buffer): void => {
    log.write(chunk);
    ring = (ring + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const json: Record<string, unknown>[] = [];
  const keepJson = (stream: Readable | null): void => {
    if (!stream) return;
    createInterface({ input: stream }).on('line', (line) => {
      if (json.length >= KEPT_JSON_LINES || !line.startsWith('{')) return;
      try {
        json.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // not a JSON log line
      }
    });
  };
  keepJson(child.stdout);
  keepJson(child.stderr);
  const proc: Proc = {
    name,
    child,
    tail: () => ring.trim(),
    exited: () => exited,
    said: (msg) => json.find((l) => l['msg'] === msg),
  };
  child.on('exit', () => {
    exited = true;
    live.delete(proc);
    log.end();
  });
  child.on('error', (e) => {
    ring += `\nspawn error: ${e.message}`;
    exited = true;
    live.delete(proc);
  });
  live.add(proc);
  return proc;
}

function signalGroup(p: Proc, sig: NodeJS.Signals): void {
  const pid = p.child.pid;
  if (pid === undefined || p.exited()) return;
  try {
    process.kill(-pid, sig); // its own group: the process and whatever it started
  } catch {
    try {
      p.child.kill(sig);
    } catch {
      // already gone
    }
  }
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when it exited. */
export async function stopProcess(p: Proc, graceMs = 5000): Promise<void> {
  if (p.exited()) return;
  const done = new Promise<void>((resolve) => p.child.once('exit', () => resolve()));
  signalGroup(p, 'SIGTERM');
  const t = setTimeout(() => signalGroup(p, 'SIGKILL'), graceMs);
  await Promise.race([done, sleep(graceMs + 2000)]);
  clearTimeout(t);
}

export async function stopAll(): Promise<void> {
  await Promise.all([...live].map((p) => stopProcess(p)));
}

/** Synchronous last resort (process 'exit' handlers cannot wait). */
export function killAllNow(): void {
  for (const p of live) signalGroup(p, 'SIGKILL');
}

let hooked = false;
/** Stop every child on exit, Ctrl-C, SIGTERM and uncaught errors. */
export function installCleanup(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', killAllNow);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      console.error(`bench: ${sig}, stopping children`);
      void stopAll().finally(() => process.exit(130));
    });
  }
  process.on('uncaughtException', (e) => {
    console.error('bench: uncaught', e);
    killAllNow();
    process.exit(1);
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The start-up line of a process started on port 0 (a JSON line whose msg is `msg`, with the
 * ports it bound), once it printed it.
 */
export async function startupLine(
  proc: Proc,
  msg: string,
  timeoutMs = 30_000,
): Promise<Record<string, unknown>> {
  await waitUntil(
    `${proc.name}: its '${msg}' line`,
    () => Promise.resolve(proc.said(msg) !== undefined),
    timeoutMs,
    proc,
    20,
  );
  const line = proc.said(msg);
  if (!line) throw new Error(`${proc.name}: no '${msg}' line`);
  return line;
}

/** A port number from a start-up line's field. */
export function portIn(line: Record<string, unknown>, field: string): number {
  const port = line[field];
  if (typeof port !== 'number' || !Number.isInteger(port) || port <= 0)
    throw new Error(`no port in the start-up line's ${field}: ${JSON.stringify(line)}`);
  return port;
}

/** A tcp://HOST:PORT address libzmq reported, as reached on loopback. */
export function loopbackEndpoint(bound: unknown): string {
  const port = typeof bound === 'string' ? /:(\d+)$/.exec(bound)?.[1] : undefined;
  if (port === undefined) throw new Error(`not a bound tcp:// address: ${JSON.stringify(bound)}`);
  return `tcp://127.0.0.1:${port}`;
}

/**
 * Poll `check` every `everyMs` until it returns true, the process exits or
 * `timeoutMs` passes. Throws with the process's output tail on failure.
 */
export async function waitUntil(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  proc?: Proc,
  everyMs = 200,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (proc?.exited()) throw new Error(`${what}: process exited: ${proc.tail().slice(-800)}`);
    try {
      if (await check()) return;
    } catch (e) {
      last = (e as Error).message;
    }
    await sleep(everyMs);
  }
  throw new Error(
    `${what}: not ready after ${timeoutMs} ms${last ? ` (${last})` : ''}${proc ? `: ${proc.tail().slice(-800)}` : ''}`,
  );
}

export async function fetchOk(url: string, init: RequestInit = {}, timeoutMs = 3000): Promise<Response> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  return res;
}
