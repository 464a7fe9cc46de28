// The real SGLang server (the pinned release, `python -m sglang.launch_server`)
// on this CPU-only machine, started through `kit serve` (hack/sglang/cacheroute_kit/serve.py)
// with a pod's arguments: the tiny Llama stands in for the weights, and only what
// a CPU forces is changed (listed in serve.py). Start-up takes 20-40 s (Python
// imports) and about 2.2 GB; this 2-core machine holds two next to a test suite.

import { lstatSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import {
  httpStatus,
  isPidAlive,
  registerCleanup,
  spawnManaged,
  stopManaged,
  waitUntilAnswering,
} from './processes.ts';
import { ensureSglangKit } from './sglang-kit.ts';
import { listensOn, withFreshPorts } from './fresh-ports.ts';

const KIT = resolve(import.meta.dirname, '../../hack/sglang/kit.sh');
export const MAX_REAL_SERVERS = 2;
const STOP_GRACE_MS = 10_000;

let running = 0;

/** How a stop ended: on SIGTERM within the grace, or only by the SIGKILL after it. */
export type StopOutcome = 'exited' | 'killed';

export interface RealSglang {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  readonly logPath: string;
  /** The temp directory: the log, and the declared model path when the args named none. */
  readonly dir: string;
  /** Wall time from spawn to the first /health 200. */
  readonly startupMs: number;
  /** Proportional set size of the server's process tree, MB (the machine's real share). */
  readPssMb(): number;
  /**
   * SIGTERM to the server (SGLang ends its own tree), SIGKILL to what is left after 10 s;
   * says whether the server exited on the SIGTERM or had to be killed (the first stop's answer).
   */
  stop(): Promise<StopOutcome>;
}

export interface RealSglangOptions {
  /** The pod's SGLang arguments, minus --host/--port (given here). */
  readonly args: readonly string[];
  readonly host?: string;
  readonly port?: number;
  readonly startTimeoutMs?: number;
  /** The pod's environment (a kubelet's resolved env, container paths mapped to local ones). */
  readonly env?: Readonly<Record<string, string>>;
}

/**
 * Starts one real server and resolves once /health answers 200. Without a
 * `--model-path` in `args`, the declared path is `<dir>/models` (serve links it
 * to the tiny model, so /model_info reports it).
 */
export function startRealSglang(opts: RealSglangOptions): Promise<RealSglang> {
  if (opts.port !== undefined) return startRealSglangOn(opts.port, opts);
  // SGLang checks its port is free before it starts: a port free now, again if it was lost (fresh-ports.ts).
  return withFreshPorts(1, ([port = 0]) => startRealSglangOn(port, opts), { what: 'sglang' });
}

/** Whether another real server may start now (MAX_REAL_SERVERS in this process). */
export function hasFreeRealSlot(): boolean {
  return running < MAX_REAL_SERVERS;
}

async function startRealSglangOn(port: number, opts: RealSglangOptions): Promise<RealSglang> {
  if (!hasFreeRealSlot()) {
    throw new Error(`at most ${MAX_REAL_SERVERS} real SGLang servers at once on this machine`);
  }
  const venv = ensureSglangKit();
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-sglang-'));
  const removeDir = (): void => rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  const unregister = registerCleanup(removeDir);
  const host = opts.host ?? '127.0.0.1';
  const hasModel = opts.args.some((a) => /^--model(-path)?(=|$)/.test(a));
  const args = [
    ...(hasModel ? [] : ['--model-path', join(dir, 'models')]),
    ...opts.args,
    '--host',
    host,
    '--port',
    String(port),
  ];
  const logPath = join(dir, 'sglang.log');
  const started = performance.now();
  running++;
  const proc = spawnManaged('sglang', 'bash', [KIT, 'serve', ...args], {
    logPath,
    env: { ...process.env, ...opts.env, SGLANG_KIT_VENV: venv },
  });
  const url = `http://${host}:${port}`;
  let stopped: Promise<StopOutcome> | undefined;
  const stop = (): Promise<StopOutcome> =>
    (stopped ??= (async () => {
      // SGLang's children (scheduler, detokenizer) are recorded first: once the
      // main process is gone they are no longer its descendants.
      const tree = listDescendants(proc.pid);
      await stopManaged(proc, STOP_GRACE_MS);
      const outcome: StopOutcome = (await proc.exited).signal === 'SIGKILL' ? 'killed' : 'exited';
      for (const pid of tree) if (isPidAlive(pid)) kill(pid);
      running--;
      unregister();
      removeDir();
      return outcome;
    })());
  try {
    // Its /health, and the port is held by one of its processes (the server is a child of the kit's bash).
    const ours = (): boolean => [proc.pid, ...listDescendants(proc.pid)].some((pid) => listensOn(pid, port));
    await waitUntilAnswering(proc, async () => (await httpStatus(`${url}/health`)) === 200 && ours(), {
      what: '/health',
      timeoutMs: opts.startTimeoutMs ?? 240_000,
      intervalMs: 250,
    });
  } catch (err) {
    await stop();
    throw err;
  }
  const startupMs = performance.now() - started;
  const readPssMb = (): number =>
    [proc.pid, ...listDescendants(proc.pid)].reduce((sum, pid) => sum + readPssKb(pid), 0) / 1024;
  return { url, port, pid: proc.pid, logPath, dir, startupMs, readPssMb, stop };
}

/**
 * Removes `path` when it is the link `kit serve` made from a pod's declared model path
 * to the tiny model (serve.py link_declared); anything else is left alone.
 */
export function removeKitModelLink(path: string): void {
  if (!lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink()) return;
  const target = readLinkTarget(path);
  if (target !== undefined && basename(target).startsWith('tiny-llama')) rmSync(path);
}

function readLinkTarget(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined; // a dangling link is not ours to judge
  }
}

/** Every descendant pid of `pid`, from /proc (children of each thread). */
export function listDescendants(pid: number): number[] {
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const p = queue.shift() ?? 0;
    for (const t of readDir(`/proc/${p}/task`)) {
      const children = readText(`/proc/${p}/task/${t}/children`);
      for (const c of children.split(' ').filter((s) => s.trim() !== '')) {
        out.push(Number(c));
        queue.push(Number(c));
      }
    }
  }
  return out;
}

function readDir(path: string): string[] {
  try {
    return readdirSync(path);
  } catch {
    return []; // the process is gone
  }
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

function readPssKb(pid: number): number {
  const m = /^Pss:\s+(\d+) kB/m.exec(readText(`/proc/${pid}/smaps_rollup`));
  return m ? Number(m[1]) : 0;
}

function kill(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
