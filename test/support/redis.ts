// A real redis-server for a test: on loopback, on a free port (fresh-ports.ts:
// its port 0 turns TCP off), in a temp dir, nothing persisted; stopped (and its dir removed) by stop(), and on every
// other exit path by processes.ts. `bash hack/install-test-deps.sh` installs it.

import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { registerCleanup, spawnManaged, stopManaged, waitUntilAnswering } from './processes.ts';
import { withFreshPorts } from './fresh-ports.ts';

export interface RunningRedis {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  stop(): Promise<void>;
}

type RedisOptions = {
  startTimeoutMs?: number;
  args?: readonly string[];
  /** `requirepass`: clients AUTH with it (the url carries it). */
  password?: string;
};

export function startRedis(opts: RedisOptions = {}): Promise<RunningRedis> {
  return withFreshPorts(1, ([port = 0]) => startRedisOn(port, opts), { what: 'redis-server' });
}

async function startRedisOn(port: number, opts: RedisOptions): Promise<RunningRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-redis-'));
  const removeDir = (): void => rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  const unregister = registerCleanup(removeDir);
  const logPath = join(dir, 'redis.log');
  const proc = spawnManaged(
    'redis-server',
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      '--daemonize',
      'no',
      '--protected-mode',
      'yes',
      ...(opts.password !== undefined ? ['--requirepass', opts.password] : []),
      ...(opts.args ?? []),
    ],
    { logPath, cwd: dir },
  );
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      await stopManaged(proc);
      unregister();
      removeDir();
    })());
  try {
    await waitUntilAnswering(proc, () => ping(port), {
      what: 'PING',
      timeoutMs: opts.startTimeoutMs ?? 15_000,
      intervalMs: 50,
    });
  } catch (err) {
    await stop();
    throw err;
  }
  const auth = opts.password !== undefined ? `:${encodeURIComponent(opts.password)}@` : '';
  return { url: `redis://${auth}127.0.0.1:${port}`, port, dir, stop };
}

/** One RESP PING over a fresh connection; NOAUTH (a password is required) is an answer too. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ port, host: '127.0.0.1' });
    let buf = '';
    const done = (ok: boolean): void => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(1_000, () => done(false));
    s.on('error', () => done(false));
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG') || buf.startsWith('-NOAUTH'));
    });
  });
}
