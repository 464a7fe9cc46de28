// A real S3 server for a test: versitygw (Apache-2.0) with its posix backend in a temp dir, on
// loopback, on a free port (fresh-ports.ts: it does not say what port 0 bound), with one access key; it checks SigV4 signatures, so a wrong key is
// really refused. Built into the control-plane bin directory by hack/build-controlplane.sh.
// Stopped (and its dir removed) by stop(), and on every other exit path by processes.ts.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { findBinDir } from './binaries.ts';
import { httpStatus, registerCleanup, spawnManaged, stopManaged, waitUntilAnswering } from './processes.ts';
import { withFreshPorts } from './fresh-ports.ts';

export interface RunningObjectStore {
  readonly endpoint: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  /** A client with the server's key, path-style, as S3-compatible stores want. */
  readonly client: S3Client;
  createBucket(bucket: string): Promise<void>;
  /** Every file under `dir` (hidden ones too) as an object at `prefix` + its relative path. */
  putDirectory(bucket: string, prefix: string, dir: string): Promise<void>;
  stop(): Promise<void>;
}

export function startObjectStore(opts: { startTimeoutMs?: number } = {}): Promise<RunningObjectStore> {
  const bin = join(findBinDir(['versitygw']), 'versitygw');
  return withFreshPorts(1, ([port = 0]) => startObjectStoreOn(bin, port, opts), { what: 'versitygw' });
}

async function startObjectStoreOn(
  bin: string,
  port: number,
  opts: { startTimeoutMs?: number },
): Promise<RunningObjectStore> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-s3-'));
  const root = join(dir, 'root');
  mkdirSync(root);
  const removeDir = (): void => rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  const unregister = registerCleanup(removeDir);
  const accessKeyId = 'AKIACACHEROUTETEST';
  const secretAccessKey = `test-secret-${port}`;
  const proc = spawnManaged(
    'versitygw',
    bin,
    ['--access', accessKeyId, '--secret', secretAccessKey, '--port', `127.0.0.1:${port}`, 'posix', root],
    { logPath: join(dir, 'versitygw.log'), cwd: dir },
  );
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      client.destroy();
      await stopManaged(proc);
      unregister();
      removeDir();
    })());
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId, secretAccessKey },
  });
  try {
    // Unsigned: S3's 403 says the server is up (another server on the port would not refuse so).
    await waitUntilAnswering(proc, async () => (await httpStatus(`${endpoint}/`)) === 403, {
      what: 'GET /',
      timeoutMs: opts.startTimeoutMs ?? 15_000,
      intervalMs: 50,
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    endpoint,
    accessKeyId,
    secretAccessKey,
    client,
    createBucket: async (bucket) => {
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
    },
    putDirectory: async (bucket, prefix, from) => {
      for (const file of walk(from))
        await client.send(
          new PutObjectCommand({
            Bucket: bucket,
            Key: `${prefix}${relative(from, file)}`,
            Body: readFileSync(file),
          }),
        );
    },
    stop,
  };
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}
