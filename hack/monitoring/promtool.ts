// promtool, Prometheus' own checker (Debian's prometheus package, installed by
// hack/install-test-deps.sh): `check rules` for syntax and `test rules` for the
// alerts' unit tests (rule-tests.ts reads what it reports).

import { execFile } from 'node:child_process';
import type { PromtoolResult } from './rule-tests.ts';

/** PROMTOOL, else promtool on PATH. */
export function findPromtool(env: NodeJS.ProcessEnv = process.env): string {
  return env['PROMTOOL'] ?? 'promtool';
}

export function runPromtool(bin: string, args: readonly string[], cwd: string): Promise<PromtoolResult> {
  return new Promise((resolve, reject) => {
    execFile(bin, args, { cwd, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') {
        const hint = err.code === 'ENOENT' ? ' (not installed: `make test-deps` installs it)' : '';
        reject(new Error(`${bin} ${args.join(' ')}${hint}: ${err.message}`, { cause: err }));
        return;
      }
      resolve({ code: typeof err?.code === 'number' ? err.code : 0, output: stdout + stderr });
    });
  });
}
