// Child processes of the test harness (etcd, kube-apiserver, ...): logs to files,
// and a guarantee that none outlives the test process.
//
// Node has no prctl(PR_SET_PDEATHSIG), so three layers:
//  1. every child is started through `setpriv --pdeathsig KILL` when available: the
//     kernel kills it when the thread that spawned it dies, however it dies;
//  2. on 'exit' and on SIGINT/SIGTERM/SIGHUP every child still known gets SIGKILL
//     and the registered cleanups run, synchronously (a signalled test run has no
//     time for graceful shutdowns: its parent may be about to kill it);
//  3. hack/in-netns.sh runs everything in a PID namespace whose processes the kernel
//     kills when the command ends.
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logPath: string;
  readonly exited: Promise<ProcessExit>;
  isRunning(): boolean;
}

interface Entry {
  child: ChildProcess;
  running: boolean;
}

const live = new Set<Entry>();
const cleanups = new Set<() => void>();
let hooksInstalled = false;
let setprivPath: string | null | undefined;
const pause = new Int32Array(new SharedArrayBuffer(4));

export function spawnManaged(
  name: string,
  command: string,
  args: readonly string[],
  opts: {
    logPath: string;
    env?: NodeJS.ProcessEnv;
    cwd?: string;
    /** A process group of its own (its pid the group's id): a bench then counts its CPU time alone. */
    detached?: boolean;
  },
): ManagedProcess {
  installExitHooks();
  const fd = openSync(opts.logPath, 'a');
  const setpriv = findSetpriv();
  const [file, argv] = setpriv
    ? [setpriv, ['--pdeathsig', 'KILL', '--', command, ...args]]
    : [command, [...args]];
  let child: ChildProcess;
  try {
    child = spawn(file, argv, {
      stdio: ['ignore', fd, fd],
      env: opts.env ?? process.env,
      ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
      ...(opts.detached ? { detached: true } : {}),
    });
  } finally {
    closeSync(fd);
  }
  const entry: Entry = { child, running: true };
  live.add(entry);
  const exited = new Promise<ProcessExit>((resolve) => {
    const done = (exit: ProcessExit): void => {
      entry.running = false;
      live.delete(entry);
      resolve(exit);
    };
    child.once('exit', (code, signal) => done({ code, signal }));
    child.once('error', () => done({ code: null, signal: null }));
  });
  if (child.pid === undefined) throw new Error(`${name}: could not start ${command}`);
  return { name, pid: child.pid, logPath: opts.logPath, exited, isRunning: () => entry.running };
}

// SIGTERM, then SIGKILL after graceMs; resolves once the process has exited.
export async function stopManaged(proc: ManagedProcess, graceMs = 5_000): Promise<void> {
  if (!proc.isRunning()) return;
  signal(proc.pid, 'SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const killed = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      signal(proc.pid, 'SIGKILL');
      resolve();
    }, graceMs);
  });
  await Promise.race([proc.exited, killed]);
  clearTimeout(timer);
  await proc.exited;
}

/**
 * Resolves once `probe` answers true, asked every intervalMs. Throws at once, with
 * the log's tail, when the process exits first; with the tail too after timeoutMs.
 * `what` names what the probe asks (e.g. '/health'), for the messages.
 */
export async function waitUntilAnswering(
  proc: ManagedProcess,
  probe: () => Promise<boolean>,
  opts: { what: string; timeoutMs: number; intervalMs: number },
): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  const fail = (why: string): Error =>
    new Error(`${proc.name} ${why} (log: ${proc.logPath})\n${readLogTail(proc.logPath)}`);
  for (;;) {
    if (!proc.isRunning()) {
      const { code, signal } = await proc.exited;
      throw fail(`exited (${signal ?? `code ${code}`}) before it answered ${opts.what}`);
    }
    if (await probe()) return;
    if (Date.now() > deadline) throw fail(`did not answer ${opts.what} within ${opts.timeoutMs / 1000} s`);
    await Promise.race([proc.exited, new Promise((r) => setTimeout(r, opts.intervalMs))]);
  }
}

/** The status of one HTTP request (its body read), or undefined when none came within 5 s: a probe. */
export async function httpStatus(url: string, init: RequestInit = {}): Promise<number | undefined> {
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(5_000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return undefined;
  }
}

// Runs synchronously on exit and on SIGINT/SIGTERM/SIGHUP, after every child got
// SIGKILL (e.g. removing a temp dir); returns an unregister function.
export function registerCleanup(fn: () => void): () => void {
  installExitHooks();
  cleanups.add(fn);
  return () => cleanups.delete(fn);
}

export function readLogTail(path: string, lines = 40): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

export function isPidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie still answers kill(0); it is dead for our purposes.
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

function findSetpriv(): string | null {
  if (setprivPath === undefined) {
    const probe = spawnSync('setpriv', ['--pdeathsig', 'KILL', '--', 'true'], { stdio: 'ignore' });
    setprivPath = probe.status === 0 ? 'setpriv' : null;
  }
  return setprivPath;
}

function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  const killAll = (): void => {
    const pids = [...live].flatMap(({ child }) => (child.pid === undefined ? [] : [child.pid]));
    for (const pid of pids) signal(pid, 'SIGKILL');
    // Cleanups remove the directories these processes write to: wait (synchronously,
    // there is no event loop left on 'exit') until the kernel has killed them.
    const deadline = Date.now() + 2_000;
    while (pids.some(isPidAlive) && Date.now() < deadline) Atomics.wait(pause, 0, 0, 10);
    for (const fn of cleanups) {
      try {
        fn();
      } catch {
        // best effort: the process is going down
      }
    }
    cleanups.clear();
  };
  process.on('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      process.off(sig, onSignal);
      killAll();
      // Let the signal do what it would have done, unless someone else handles it.
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}
