// The fetch Job's command as a process: its arguments, its JSON lines and exit codes, and a
// token that reaches the hub and no output.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeHub, type FakeHub } from '../../test/support/fake-hub.ts';
import { startForwardProxy } from '../../test/support/forward-proxy.ts';
import { manifestOfDirectory } from './files.ts';
import { digestOfManifest, isTokenizerFile } from './manifest.ts';

const CLI = fileURLToPath(new URL('./main.ts', import.meta.url));
const REPO = 'acme/tiny-llm';
const REVISION = '89abcdef0123456789abcdef0123456789abcdef';
const TOKEN = 'hf_CANARY_model_fetch_cli_5b1e';

const root = mkdtempSync(join(tmpdir(), 'model-fetch-cli-'));
const model = join(root, 'model');
const tokenFile = join(root, 'token');
let digestArgs: string[] = [];
const hubs: FakeHub[] = [];
let n = 0;
const freshDest = (): string => join(root, `dest-${n++}`);

beforeAll(async () => {
  mkdirSync(model);
  writeFileSync(join(model, 'config.json'), '{"hidden_size":64}');
  writeFileSync(join(model, 'tokenizer.json'), '{"model":{"type":"BPE"}}');
  writeFileSync(join(model, 'model.safetensors'), randomBytes(3 * 1024 * 1024));
  writeFileSync(tokenFile, `${TOKEN}\n`);
  digestArgs = [
    '--digest',
    digestOfManifest(await manifestOfDirectory(model)),
    '--tokenizer-digest',
    digestOfManifest(await manifestOfDirectory(model, { select: isTokenizerFile })),
  ];
});
afterEach(async () => {
  await Promise.all(hubs.splice(0).map((h) => h.close()));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function startHub(token?: string): Promise<FakeHub> {
  const hub = await startFakeHub({
    modelDir: model,
    repo: REPO,
    revision: REVISION,
    isLfs: (p) => p.endsWith('.safetensors'),
    ...(token ? { token } : {}),
  });
  hubs.push(hub);
  return hub;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  lines: Record<string, unknown>[];
}

// The environment the Job would give, without the machine's own proxy or hub settings.
const BASE_ENV = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !/^(https?_proxy|no_proxy|hf_.*)$/i.test(k)),
);

function run(
  args: string[],
  env: Record<string, string> = {},
  onStderr?: (chunk: string) => void,
): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [CLI, ...args],
      { env: { ...BASE_ENV, ...env } },
      (err, stdout, stderr) => {
        const lines = stdout
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => JSON.parse(l) as Record<string, unknown>);
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr, lines });
      },
    );
    if (onStderr) child.stderr?.on('data', (chunk: Buffer | string) => onStderr(String(chunk)));
  });
}

const args = (hub: FakeHub, dest: string, ...extra: string[]): string[] => [
  '--endpoint',
  hub.url,
  '--repo',
  REPO,
  '--revision',
  REVISION,
  ...digestArgs,
  '--dest',
  dest,
  ...extra,
];

describe('model-fetch', () => {
  it('fetches with the token from a file; the token is in no output, and the CDN never gets it', async () => {
    const hub = await startHub(TOKEN);
    const resultFile = join(root, 'result-done');
    const r = await run(args(hub, freshDest(), '--token-file', tokenFile, '--result-file', resultFile));
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(readFileSync(resultFile, 'utf8'))).toEqual(r.lines.at(-1));
    expect(r.lines.at(-1)).toMatchObject({
      phase: 'done',
      ok: true,
      digest: digestArgs[1],
      files: 3,
      fromMarker: false,
    });
    // Every line before it is progress: a phase and the four counters.
    for (const l of r.lines.slice(0, -1))
      expect(Object.keys(l).sort()).toEqual(['bytesDone', 'bytesTotal', 'filesDone', 'filesTotal', 'phase']);
    expect(hub.requests.filter((q) => q.server === 'cdn').map((q) => q.authorization)).toEqual([undefined]);
    expect(r.stdout + r.stderr).not.toContain(TOKEN);
  }, 30_000);

  it('fails with a reason in the last line and words on stderr, printing no token', async () => {
    const hub = await startHub(TOKEN);
    hub.tamper('model.safetensors');
    const resultFile = join(root, 'result-tampered');
    const tampered = await run(
      args(hub, freshDest(), '--token-file', tokenFile, '--result-file', resultFile),
    );
    // 3: the files are not the pinned ones, another attempt would fetch the same.
    expect(tampered.code).toBe(3);
    // The result file holds the last line alone: what the fetch Job's termination message carries.
    expect(JSON.parse(readFileSync(resultFile, 'utf8'))).toEqual(tampered.lines.at(-1));
    expect(tampered.lines.at(-1)).toMatchObject({
      phase: 'failed',
      ok: false,
      reason: 'ModelDigestMismatch',
      path: 'model.safetensors',
    });
    expect(tampered.stderr).toMatch(/^model-fetch: ModelDigestMismatch: model\.safetensors: sha256 /);

    const wrongFile = join(root, 'wrong-token');
    writeFileSync(wrongFile, 'hf_CANARY_wrong_token_0c4d');
    const refused = await run(args(hub, freshDest(), '--token-file', wrongFile));
    expect(refused.code).toBe(1);
    expect(refused.lines.at(-1)).toMatchObject({ reason: 'HubUnauthorized' });
    expect(refused.stderr).toMatch(/check the token .*the one given was refused/);

    for (const out of [tampered, refused]) expect(out.stdout + out.stderr).not.toContain('hf_CANARY');
  }, 30_000);

  it('takes the endpoint and the token from HF_ENDPOINT and HF_TOKEN', async () => {
    const hub = await startHub(TOKEN);
    const [, , ...rest] = args(hub, freshDest());
    const r = await run(rest, { HF_ENDPOINT: hub.url, HF_TOKEN: TOKEN });
    expect(r.code).toBe(0);
    expect(r.stdout + r.stderr).not.toContain(TOKEN);
  }, 30_000);

  it.each([
    ['--proxy', (url: string) => ['--proxy', url], {}],
    ['HTTP_PROXY', () => [], { HTTP_PROXY: 'PROXY' }],
  ])(
    'goes through the proxy of %s',
    async (_name, flag, env) => {
      const hub = await startHub();
      const proxy = await startForwardProxy();
      try {
        const withUrl = Object.fromEntries(Object.entries(env).map(([k]) => [k, proxy.url]));
        const r = await run(args(hub, freshDest(), ...flag(proxy.url)), withUrl);
        expect(r.code).toBe(0);
        expect(proxy.relayed).toHaveLength(hub.requests.length);
      } finally {
        await proxy.close();
      }
    },
    30_000,
  );

  it('leaves a host in NO_PROXY out of the proxy', async () => {
    const hub = await startHub();
    const proxy = await startForwardProxy();
    try {
      const r = await run(args(hub, freshDest()), { HTTP_PROXY: proxy.url, NO_PROXY: '127.0.0.1' });
      expect(r.code).toBe(0);
      expect(proxy.relayed).toEqual([]);
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it.each([
    ['a branch for the revision', ['--revision', 'main'], /--revision must be the 40-hex commit id/],
    ['a short commit id', ['--revision', '89abcde'], /--revision must be the 40-hex commit id/],
    ['a digest without its prefix', ['--digest', 'e'.repeat(64)], /--digest must be sha256: and 64/],
    ['a token on the command line', ['--token', TOKEN], /never as an argument/],
    ['a token on the command line, with =', [`--token=${TOKEN}`], /never as an argument/],
    [
      'an endpoint that is not a URL',
      ['--endpoint', 'huggingface.co'],
      /--endpoint must be an http\(s\) URL/,
    ],
    [
      'a tokenizer subpath out of the repository',
      ['--tokenizer-subpath', '../x'],
      /--tokenizer-subpath must be/,
    ],
    [
      'a missing token file',
      ['--token-file', join(root, 'nope')],
      /cannot read the token file .*nope: ENOENT/,
    ],
    ['an unknown flag', ['--revison', REVISION], /Unknown option '--revison'/],
    [
      'a progress port out of range',
      ['--progress-port', '65536'],
      /--progress-port takes a port from 0 to 65535/,
    ],
    [
      'an unexpanded pod IP for the progress host',
      ['--progress-port', '8497', '--progress-host', '$(POD_IP)'],
      /--progress-host "\$\(POD_IP\)" is no address \(set POD_IP/,
    ],
    [
      'a progress host without a port',
      ['--progress-host', '127.0.0.1'],
      /--progress-host needs --progress-port/,
    ],
    ['a marker directory for a fetch', ['--marker-dir', '/tmp'], /--marker-dir goes with --verify-only/],
    [
      'an object store beside a hub repository',
      ['--object-store', 's3://models/tiny'],
      /--object-store fetches from a bucket, not the hub: leave out --endpoint, --repo, --revision/,
    ],
    [
      'an object store setting for a hub fetch',
      ['--store-region', 'eu-west-1'],
      /a hub fetch has no object store: leave out --store-region/,
    ],
  ])(
    'refuses %s with exit code 2 and no request',
    async (_name, extra, message) => {
      const hub = await startHub(TOKEN);
      // Later flags win in parseArgs: the bad value replaces the good one.
      const r = await run([...args(hub, freshDest()), ...extra]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).toContain('usage: model-fetch');
      expect(r.lines).toEqual([expect.objectContaining({ phase: 'failed', reason: 'InvalidArguments' })]);
      expect(r.stdout + r.stderr).not.toContain(TOKEN);
      expect(hub.requests).toEqual([]);
    },
    30_000,
  );

  it('serves its last progress line on GET /progress while it fetches, and no longer once it ended', async () => {
    const hub = await startHub();
    hub.inject({ server: 'cdn', stallAfter: 1024 * 1024 });
    // Port 0: the fetcher says on stderr which port the kernel gave it.
    let stderr = '';
    let said: (port: number) => void = () => undefined;
    const bound = new Promise<number>((resolve) => (said = resolve));
    const running = run(
      args(hub, freshDest(), '--progress-port', '0', '--progress-host', '127.0.0.1'),
      {},
      (chunk) => {
        stderr += chunk;
        const port = /progress on 127\.0\.0\.1 port (\d+)\n/.exec(stderr)?.[1];
        if (port !== undefined) said(Number(port));
      },
    );
    const port = await Promise.race([bound, running.then((r) => Promise.reject(new Error(r.stderr)))]);
    const url = `http://127.0.0.1:${port}/progress`;
    // The weights are held after their first MiB: the fetcher says so while it waits.
    let seen: Record<string, unknown> | undefined;
    for (let i = 0; i < 200 && !(seen?.['phase'] === 'weights' && Number(seen['bytesDone']) > 0); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const res = await fetch(url).catch(() => undefined);
      if (res?.status === 200) seen = (await res.json()) as Record<string, unknown>;
    }
    expect(seen).toMatchObject({ phase: 'weights', filesTotal: 3 });
    expect(Number(seen?.['bytesDone'])).toBeGreaterThan(0);
    expect(Number(seen?.['bytesDone'])).toBeLessThan(Number(seen?.['bytesTotal']));
    expect((await fetch(`http://127.0.0.1:${port}/other`)).status).toBe(404);
    hub.release();
    const r = await running;
    expect(r.code).toBe(0);
    // Served what it printed: the line seen is one of its progress lines.
    expect(r.lines).toContainEqual(seen);
    await expect(fetch(url)).rejects.toThrow();
  }, 30_000);

  it('verifies staged files with --verify-only, with no hub: the pinned pass (exit 0), others exit 3', async () => {
    const good = await run(['--verify-only', ...digestArgs, '--dest', model]);
    expect(good.code).toBe(0);
    expect(good.lines.at(-1)).toMatchObject({ phase: 'done', ok: true, digest: digestArgs[1], files: 3 });
    const other = join(root, 'staged-other');
    mkdirSync(other);
    writeFileSync(join(other, 'config.json'), '{"hidden_size":65}');
    writeFileSync(join(other, 'tokenizer.json'), '{"model":{"type":"BPE"}}');
    const resultFile = join(root, 'result-verify');
    const bad = await run(['--verify-only', ...digestArgs, '--dest', other, '--result-file', resultFile]);
    expect(bad.code).toBe(3);
    expect(JSON.parse(readFileSync(resultFile, 'utf8'))).toMatchObject({
      phase: 'failed',
      reason: 'ModelDigestMismatch',
    });
    // A hub flag with --verify-only would be ignored: refused instead.
    const mixed = await run(['--verify-only', ...digestArgs, '--dest', model, '--repo', REPO]);
    expect(mixed.code).toBe(2);
    expect(mixed.stderr).toContain('--verify-only fetches nothing: leave out --repo');
  }, 30_000);

  it('with --lock-file, two fetchers into one node cache fetch once: the second waits, then finds the marker', async () => {
    const hub = await startHub();
    hub.inject({ server: 'cdn', stallAfter: 1024 * 1024 });
    const dest = freshDest();
    const lock = `${dest}.lock`;
    const first = run(args(hub, dest, '--lock-file', lock));
    // The first holds the lock while its weights are held back; the second starts meanwhile.
    for (let i = 0; i < 100 && hub.cdnBytes() === 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    // Released only once the second says it waits: a fixed pause lost that race on a busy machine.
    let secondWaits = false;
    const second = run(args(hub, dest, '--lock-file', lock), {}, (chunk) => {
      if (chunk.includes('waiting for')) secondWaits = true;
    });
    for (let i = 0; i < 400 && !secondWaits; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    hub.release();
    const [a, b] = await Promise.all([first, second]);
    expect([a.code, b.code]).toEqual([0, 0]);
    expect(b.stderr).toContain(`waiting for ${lock}: another fetcher on this node holds it`);
    expect(b.lines.at(-1)).toMatchObject({ phase: 'done', fromMarker: true, downloadedBytes: 0 });
    expect(hub.bytesOf('model.safetensors')).toBe(3 * 1024 * 1024);
  }, 30_000);

  it.each([
    [
      'a URL that is not s3://',
      ['--object-store', 'https://models.example/tiny'],
      /--object-store must be s3:/,
    ],
    [
      'a store endpoint that is not a URL',
      ['--object-store', 's3://models/tiny', '--store-endpoint', 'minio:9000'],
      /--store-endpoint must be an http\(s\) URL/,
    ],
    ['no digest', ['--object-store', 's3://models/tiny'], /--digest is required/],
  ])(
    'refuses an object store fetch with %s (exit code 2)',
    async (name, flags, message) => {
      const r = await run([...flags, '--dest', freshDest(), ...(name === 'no digest' ? [] : digestArgs)]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(message);
    },
    30_000,
  );

  it('needs the repository, the digests and the destination', async () => {
    const r = await run(['--revision', REVISION]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^model-fetch: --repo is required\n/);
  }, 30_000);
});
