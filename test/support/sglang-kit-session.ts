// One long-lived conformance-kit process (`kit session`) for a test file that
// asks SGLang's own code many times: Python starts and SGLang is imported once
// (about 9 s a start on this machine) instead of once a call. Each call is
// still the kit command itself, run by the same entry point in that process
// (hack/sglang/cacheroute_kit/session.py), with the same stdout and exit code
// a fresh `kit.sh` would give; `runKit`'s contract holds for `session.run`.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { z } from 'zod';
import { ensureSglangKit, type KitRunner } from './sglang-kit.ts';

const KIT = resolve(import.meta.dirname, '../../hack/sglang/kit.sh');

const Answer = z.strictObject({
  id: z.number().int(),
  exit: z.number().int(),
  stdout: z.string(),
  stderr: z.string(),
});

export interface KitSession {
  /** Runs one served command (tree-events, validate, auth, decode-events --drain/--stdin). */
  readonly run: KitRunner;
  /** Ends the process (stdin closed, so it exits once the pending commands are answered). */
  close(): Promise<void>;
}

/** Starts `kit session`; its first command pays SGLang's imports, the later ones do not. */
export function openKitSession(): KitSession {
  const child = spawn('bash', [KIT, 'session'], {
    env: { ...process.env, SGLANG_KIT_VENV: ensureSglangKit() },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const err: string[] = [];
  child.stderr.setEncoding('utf8').on('data', (s: string) => err.push(s));
  const pending = new Map<
    number,
    { args: readonly string[]; resolve: (s: string) => void; reject: (e: Error) => void }
  >();
  let nextId = 0;
  let ended: Error | undefined;

  const broken = (why: string): void => {
    err.push(`\n${why}`);
    child.kill('SIGTERM');
  };
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line.trim() === '') return;
    const answer = Answer.safeParse(parseJson(line));
    if (!answer.success) return broken(`an answer that is not the session's: ${line.slice(0, 200)}`);
    const waiter = pending.get(answer.data.id);
    if (!waiter) return broken(`an answer to request ${answer.data.id}, which nobody asked`);
    pending.delete(answer.data.id);
    if (answer.data.exit === 0) waiter.resolve(answer.data.stdout);
    else {
      const tail = answer.data.stderr.trim().split('\n').slice(-20).join('\n');
      waiter.reject(new Error(`kit ${waiter.args[0] ?? ''} exited ${answer.data.exit}:\n${tail}`));
    }
  });
  const exited = new Promise<void>((resolveExit) => {
    const fail = (why: string): void => {
      const tail = err.join('').trim().split('\n').slice(-20).join('\n');
      ended = new Error(`kit session ${why}:\n${tail}`);
      for (const w of pending.values()) w.reject(ended);
      pending.clear();
      resolveExit();
    };
    child.once('error', (e) => fail(`failed to start (${e.message})`));
    child.once('close', (code, signal) => fail(`exited ${code ?? signal ?? ''}`));
  });
  // A write after the process died reports through 'close' above, not as an unhandled error.
  child.stdin.on('error', () => undefined);

  const run: KitRunner = (args, input = '') => {
    if (ended) return Promise.reject(ended);
    const id = nextId++;
    return new Promise<string>((resolveRun, reject) => {
      pending.set(id, { args, resolve: resolveRun, reject });
      child.stdin.write(`${JSON.stringify({ id, argv: args, stdin: input })}\n`);
    });
  };
  const close = async (): Promise<void> => {
    if (!ended) child.stdin.end();
    await exited;
  };
  return { run, close };
}

function parseJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}
