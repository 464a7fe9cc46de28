// Reading a child's JSON log lines for the one that reports where it listens:
// programs started on port 0 say which port the kernel gave them, and a test
// reads it there instead of guessing a free port first.

import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';

/**
 * The first JSON line on `stream` that `match` accepts (its parsed object). Rejects when the
 * stream ends or the child exits first, with the lines seen, so a child that failed to start
 * says why. Lines after the match are still read (and dropped) so the child never blocks on a
 * full pipe; `echo` copies every line to this process's stderr.
 */
export function waitForJsonLine(
  child: ChildProcess,
  stream: Readable,
  match: (line: Record<string, unknown>) => boolean,
  opts: { what: string; echo?: boolean },
): Promise<Record<string, unknown>> {
  const seen: string[] = [];
  const lines = createInterface({ input: stream });
  return new Promise((resolve, reject) => {
    let found = false;
    const fail = (why: string): void => {
      if (found) return;
      found = true;
      reject(
        new Error(`${opts.what}: ${why} before it said where it listens; its output:\n${seen.join('\n')}`),
      );
    };
    lines.on('line', (line) => {
      if (opts.echo) process.stderr.write(`${line}\n`);
      if (found) return;
      seen.push(line);
      const parsed = parseObject(line);
      if (parsed !== null && match(parsed)) {
        found = true;
        resolve(parsed);
      }
    });
    lines.once('close', () => fail('its output ended'));
    child.once('exit', (code, signal) => fail(`it exited (${signal ?? code})`));
    child.once('error', (e) => fail(`it did not start (${e.message})`));
  });
}

function parseObject(line: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(line);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
