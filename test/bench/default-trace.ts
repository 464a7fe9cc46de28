// Where a benchmark finds its Mooncake trace when no --trace is given. The trace lives beside
// the main checkout (`../shared/data`), not in the repository: a path relative to the running
// checkout is wrong from any git worktree, so the main checkout is found through git.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

/** A directory holding the traces; wins over the main checkout's `../shared/data`. */
export const TRACE_DIR_ENV = 'CACHEROUTE_TRACE_DIR';
export const CONVERSATION_TRACE = 'mooncake_conversation_trace.jsonl';

/**
 * The default trace file: `$CACHEROUTE_TRACE_DIR/<file>`, else `<main checkout>/../shared/data/<file>`
 * (the main checkout: the one whose .git the repository at `repo` shares, a worktree's too).
 * Throws an error saying what to pass when neither holds the file.
 */
export function resolveDefaultTrace(
  repo: string,
  file: string = CONVERSATION_TRACE,
  env: NodeJS.ProcessEnv = process.env,
): string {
  const dir = env[TRACE_DIR_ENV];
  if (dir) {
    const p = path.resolve(dir, file);
    if (existsSync(p)) return p;
    throw new Error(`${TRACE_DIR_ENV}=${dir} holds no ${file}: pass --trace FILE, or point it at the traces`);
  }
  const main = mainCheckout(repo);
  const beside = main === undefined ? undefined : path.resolve(main, '../shared/data', file);
  if (beside !== undefined && existsSync(beside)) return beside;
  throw new Error(
    `no trace given and ${beside ?? `no git checkout at ${repo}`}${beside ? ' does not exist' : ''}: ` +
      `pass --trace FILE, or set ${TRACE_DIR_ENV} to the directory holding ${file}`,
  );
}

/** The main working tree of the repository at `repo` (git's common dir's parent), if git knows it. */
function mainCheckout(repo: string): string | undefined {
  try {
    const common = execFileSync(
      'git',
      ['-C', repo, 'rev-parse', '--path-format=absolute', '--git-common-dir'],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    ).trim();
    return common === '' ? undefined : path.dirname(common);
  } catch {
    return undefined; // not a git checkout (an unpacked tarball), or no git
  }
}

/** For a benchmark's command line: `--trace` as given, else the default; without one, exit 2 saying why. */
export function traceArgOrExit(given: string | undefined, repo: string, tool: string): string {
  if (given) return given;
  try {
    return resolveDefaultTrace(repo);
  } catch (err) {
    console.error(`${tool}: ${(err as Error).message}`);
    process.exit(2);
  }
}
