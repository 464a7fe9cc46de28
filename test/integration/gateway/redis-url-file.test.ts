// The gateway process finds a Redis that needs a password through
// --redis-url-file, never through its command line: against a real
// redis-server with `requirepass`, a result one request stores is served to
// the next from Redis, and the password is nowhere in the process's argv.
// --redis-url with a password is refused with what to use instead.

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_REDIS_PREFIX } from '../../../gateway/src/reuse/redis-store.ts';
import { GATEWAY_SERVER, spawnGateway } from '../../support/gateway/gateway-process.ts';
import { startRedis, type RunningRedis } from '../../support/redis.ts';
import { postJson, startSim, type RunningSim } from '../../support/sim/testing.ts';

const PASSWORD = 'pw-only-the-secret-knows';

let redis: RunningRedis;
let sim: RunningSim;
let dir: string;
let child: ChildProcess | undefined;

beforeAll(async () => {
  redis = await startRedis({ password: PASSWORD });
  sim = await startSim(['--model-path', 'm']);
  dir = mkdtempSync(join(tmpdir(), 'cacheroute-redis-url-'));
  writeFileSync(join(dir, 'url'), `${redis.url}\n`);
  writeFileSync(join(dir, 'hmac-key'), 'a-key-of-thirty-two-bytes-or-more-0123456789\n');
  const endpoints = [{ id: 'sim0', url: sim.url, fingerprint: 'fp', verified: true, ready: true }];
  writeFileSync(
    join(dir, 'routes.json'),
    JSON.stringify([
      { model: 'm', deployment: 'ns/m', fingerprint: 'fp', salt: 's', reuse: { enabled: true }, endpoints },
    ]),
  );
});
afterEach(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
afterAll(async () => {
  await sim?.close();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const chat = { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, temperature: 0 };

describe('the Redis URL stays out of argv', { timeout: 30_000 }, () => {
  it('--redis-url-file: the gateway reaches a Redis that needs a password, and argv holds none', async () => {
    const gw = await spawnGateway(join(dir, 'routes.json'), [
      '--redis-url-file',
      join(dir, 'url'),
      '--reuse-hmac-key-file',
      join(dir, 'hmac-key'),
    ]);
    child = gw.proc;
    const first = await postJson(`${gw.url}/v1/chat/completions`, chat);
    expect(first.status).toBe(200);
    const second = await postJson(`${gw.url}/v1/chat/completions`, chat);
    expect(second.headers.get('x-cacheroute-reused')).toBe('store');
    const authed = new Redis(redis.url);
    try {
      const stored = (await authed.keys(`${DEFAULT_REDIS_PREFIX}*`)).filter((k) => /:[0-9a-f]{64}$/.test(k));
      expect(stored).toHaveLength(1);
      expect(String(await authed.call('CLIENT', 'LIST'))).toContain('name=cacheroute-gateway');
    } finally {
      await authed.quit();
    }
    const argv = readFileSync(`/proc/${gw.proc.pid}/cmdline`, 'utf8');
    expect(argv).toContain('--redis-url-file');
    expect(argv).not.toContain(PASSWORD);
  });

  it('--redis-url with a password is refused, naming what to use, without echoing it', async () => {
    const proc = spawn(
      process.execPath,
      [
        GATEWAY_SERVER,
        '--routes',
        join(dir, 'routes.json'),
        '--auth',
        'open',
        '--redis-url',
        redis.url,
        '--reuse-hmac-key-file',
        join(dir, 'hmac-key'),
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    child = proc;
    let err = '';
    proc.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    const [code] = (await once(proc, 'exit')) as [number | null];
    expect(code).toBe(2);
    expect(err).toContain('--redis-url: the URL carries a password');
    expect(err).toContain('--redis-url-file');
    expect(err).not.toContain(PASSWORD);
  });
});
