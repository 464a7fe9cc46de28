// The benchmarks' default trace: found beside the main checkout from a worktree too, or where
// CACHEROUTE_TRACE_DIR says; otherwise an error that says to pass --trace.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONVERSATION_TRACE, resolveDefaultTrace, TRACE_DIR_ENV } from './default-trace.ts';

let root = '';
let main = '';
let worktree = '';
const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-C', cwd, '-c', 'user.email=t@t', '-c', 'user.name=t', ...args], { stdio: 'ignore' });

beforeAll(() => {
  // <root>/main (a repository), <root>/shared/data/<trace>, <root>/wt/x (a worktree of main).
  root = mkdtempSync(path.join(tmpdir(), 'cacheroute-trace-'));
  main = path.join(root, 'main');
  mkdirSync(main);
  mkdirSync(path.join(root, 'shared/data'), { recursive: true });
  writeFileSync(path.join(root, 'shared/data', CONVERSATION_TRACE), '{}\n');
  git(main, 'init', '-q');
  git(main, 'commit', '-q', '--allow-empty', '-m', 'x');
  worktree = path.join(root, 'wt/x');
  git(main, 'worktree', 'add', '-q', worktree);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('resolveDefaultTrace', () => {
  const beside = () => path.join(root, 'shared/data', CONVERSATION_TRACE);

  it('finds the trace beside the main checkout, from the checkout and from a worktree', () => {
    expect(resolveDefaultTrace(main, CONVERSATION_TRACE, {})).toBe(beside());
    // `../shared/data` from the worktree would be <root>/wt/shared/data: not there.
    expect(resolveDefaultTrace(worktree, CONVERSATION_TRACE, {})).toBe(beside());
  });

  it('takes CACHEROUTE_TRACE_DIR first, and names it when the file is not there', () => {
    const dir = mkdtempSync(path.join(root, 'traces-'));
    writeFileSync(path.join(dir, CONVERSATION_TRACE), '{}\n');
    expect(resolveDefaultTrace(worktree, CONVERSATION_TRACE, { [TRACE_DIR_ENV]: dir })).toBe(
      path.join(dir, CONVERSATION_TRACE),
    );
    expect(() => resolveDefaultTrace(worktree, 'other.jsonl', { [TRACE_DIR_ENV]: dir })).toThrow(
      /CACHEROUTE_TRACE_DIR=.* holds no other\.jsonl: pass --trace/,
    );
  });

  it('outside a git checkout, or with no trace beside it, says to pass --trace', () => {
    const plain = mkdtempSync(path.join(tmpdir(), 'cacheroute-no-git-'));
    try {
      expect(() => resolveDefaultTrace(plain, CONVERSATION_TRACE, {})).toThrow(/pass --trace FILE/);
    } finally {
      rmSync(plain, { recursive: true, force: true });
    }
    expect(() => resolveDefaultTrace(worktree, 'missing.jsonl', {})).toThrow(
      /missing\.jsonl does not exist: pass --trace FILE, or set CACHEROUTE_TRACE_DIR/,
    );
  });
});
