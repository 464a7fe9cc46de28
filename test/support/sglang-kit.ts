// The SGLang conformance kit (hack/sglang/) from TypeScript: SGLang's own
// argument parser and startup checks, its flag table, its protocol models.
// Each call runs the pinned SGLang in its cached virtualenv; install it first
// with `ensureSglangKit()` (idempotent, minutes when cold).
import { spawn, spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { z } from 'zod';

const ROOT = resolve(import.meta.dirname, '../..');
const INSTALL = resolve(ROOT, 'hack/sglang/install.sh');
const KIT = resolve(ROOT, 'hack/sglang/kit.sh');

let venv: string | undefined;

/** Installs (or finds) the pinned SGLang's virtualenv; returns its path. */
export function ensureSglangKit(): string {
  if (venv !== undefined) return venv;
  const fromEnv = process.env['SGLANG_KIT_VENV'];
  if (fromEnv) return (venv = fromEnv);
  const out = spawnSync('bash', [INSTALL], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (out.status !== 0) throw new Error(`hack/sglang/install.sh failed (exit ${out.status})`);
  const last = out.stdout.trim().split('\n').at(-1);
  if (!last) throw new Error('hack/sglang/install.sh printed no venv path');
  return (venv = last);
}

function kitEnv(): NodeJS.ProcessEnv {
  return { ...process.env, SGLANG_KIT_VENV: ensureSglangKit() };
}

/**
 * A kit command with `input` on stdin: its stdout, or a rejection on a non-zero exit. `runKit`
 * starts a process for it; a `KitSession`'s `run` (sglang-kit-session.ts) reuses one.
 */
export type KitRunner = (args: readonly string[], input?: string) => Promise<string>;

/** Runs one kit command with `input` on stdin; resolves with its stdout, rejects on a non-zero exit. */
export function runKit(args: readonly string[], input = ''): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn('bash', [KIT, ...args], { env: kitEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) resolvePromise(Buffer.concat(out).toString('utf8'));
      else {
        const tail = Buffer.concat(err).toString('utf8').trim().split('\n').slice(-20).join('\n');
        reject(new Error(`kit ${args[0] ?? ''} exited ${code}:\n${tail}`));
      }
    });
    child.stdin.end(input);
  });
}

export interface CheckArgsRequest {
  readonly id: string;
  readonly argv: readonly string[];
  /** Model family whose config.json stands in for --model-path (hack/sglang/models/); default llama. */
  readonly model?: string;
  readonly env?: Readonly<Record<string, string>>;
}

export const CheckArgsResult = z.object({
  id: z.string(),
  ok: z.boolean(),
  /** parse: argparse refused; resolve/check: a startup check refused; kit: the kit itself failed. */
  stage: z.enum(['parse', 'resolve', 'check', 'kit']),
  error: z.string().nullable(),
});
export type CheckArgsResult = z.infer<typeof CheckArgsResult>;

/** One request per JSON line in, one answer per line out, in order: the kit's batch commands. */
async function runBatch<S extends z.ZodType>(
  command: string,
  requests: readonly unknown[],
  answer: S,
  kit: KitRunner = runKit,
): Promise<z.infer<S>[]> {
  if (requests.length === 0) return [];
  const input = requests.map((r) => JSON.stringify(r)).join('\n') + '\n';
  const stdout = await kit([command, '--batch'], input);
  const results = stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => answer.parse(JSON.parse(l)));
  if (results.length !== requests.length) {
    throw new Error(`${command} answered ${results.length} of ${requests.length} requests`);
  }
  return results;
}

/**
 * SGLang's verdict on each command line, in the request order. `jobs` SGLang
 * processes share the list (each imports SGLang once, then forks per check).
 */
export async function checkArgs(
  requests: readonly CheckArgsRequest[],
  { jobs = 2 }: { jobs?: number } = {},
): Promise<CheckArgsResult[]> {
  const n = Math.max(1, Math.min(jobs, Math.ceil(requests.length / 20)));
  const shares = Array.from({ length: n }, (_, j) => requests.filter((_r, i) => i % n === j));
  const answers = await Promise.all(shares.map((share) => runBatch('check-args', share, CheckArgsResult)));
  return requests.map((_r, i) => {
    const answer = answers[i % n]?.[Math.floor(i / n)];
    if (!answer) throw new Error(`check-args gave no answer for request ${i}`);
    return answer;
  });
}

export const DumpedFlag = z.object({
  name: z.string(),
  aliases: z.array(z.string()),
  dest: z.string(),
  kind: z.string(),
  type: z.string().nullable(),
  nargs: z.union([z.string(), z.number()]).nullable(),
  choices: z.array(z.unknown()).nullable(),
  default: z.unknown(),
});
export const DumpedFlags = z.object({ sglang: z.string(), flags: z.array(DumpedFlag) });
export type DumpedFlags = z.infer<typeof DumpedFlags>;

/** Every launch flag as SGLang's argparse parser declares it. */
export async function dumpFlags(): Promise<DumpedFlags> {
  return DumpedFlags.parse(JSON.parse(await runKit(['dump-flags'])));
}

export interface ValidateRequest {
  readonly id: string;
  /** GenerateReqInput, openai.<Class>, api.<Class> or kit.<Name> (hack/sglang/cacheroute_kit/validate.py). */
  readonly model: string;
  readonly body: unknown;
}

export const ValidateResult = z.object({
  id: z.string(),
  ok: z.boolean(),
  errors: z.array(z.string()),
  /** Keys a proto contract type ignores (it declares fewer than the server sends); never errors. */
  ignored: z.array(z.string()),
});
export type ValidateResult = z.infer<typeof ValidateResult>;

/** Each body judged by SGLang's own request/response models, in one SGLang process (`kit`'s). */
export function validateBodies(
  requests: readonly ValidateRequest[],
  kit: KitRunner = runKit,
): Promise<ValidateResult[]> {
  return runBatch('validate', requests, ValidateResult, kit);
}
