// The fetcher against a hub over real HTTP (test/support/fake-hub.ts): a hub with paged
// listings, relative redirects for git files and a CDN on another origin for LFS files.
import { createHash, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeHub, type FakeHub, type FakeHubOptions } from '../../test/support/fake-hub.ts';
import { startForwardProxy } from '../../test/support/forward-proxy.ts';
import { PARTIAL_DIR, partialPathFor } from './download.ts';
import { MARKER_FILE } from './fetch-marker.ts';
import type { FetchProgress } from '#api/model-fetch-progress.ts';
import { FETCH_REASONS } from './fetch-reasons.ts';
import type { FetchRequest } from './fetch-request.ts';
import { fetchModel, type FetchOptions, type FetchOutcome } from './fetch.ts';
import { manifestOfDirectory } from './files.ts';
import { nextPageUrl } from './hub-listing.ts';
import { digestOfManifest, isTokenizerFile } from './manifest.ts';

const REPO = 'acme/tiny-llm';
const REVISION = '0123456789abcdef0123456789abcdef01234567';
const WEIGHTS = 'model.safetensors';
const WEIGHTS_SIZE = 6 * 1024 * 1024 + 123;
const TOKEN = 'hf_CANARY_do_not_print_7f3a9c';
const isLfs = (p: string): boolean => p.endsWith('.safetensors') || p === 'tokenizer.model';

const roots: string[] = [];
const hubs: FakeHub[] = [];
afterEach(async () => {
  await Promise.all(hubs.splice(0).map((h) => h.close()));
});
afterAll(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'model-fetch-'));
  roots.push(d);
  return d;
}

let model = '';
let digests = { digest: '', tokenizerDigest: '' };

beforeAll(async () => {
  model = tempDir();
  const files: Record<string, string | Buffer> = {
    '.gitattributes': '*.safetensors filter=lfs diff=lfs merge=lfs -text\n',
    'config.json': '{"architectures":["LlamaForCausalLM"],"hidden_size":64}',
    'generation_config.json': '{"do_sample":false}',
    'tokenizer.json': '{"version":"1.0","model":{"type":"BPE"}}',
    'tokenizer_config.json': '{"chat_template":"{{ messages }}"}',
    'special_tokens_map.json': '{"bos_token":"<s>"}',
    'original/params.json': '{"dim":64}',
    'tokenizer.model': randomBytes(70_000),
    [WEIGHTS]: randomBytes(WEIGHTS_SIZE),
  };
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(model, path)), { recursive: true });
    writeFileSync(join(model, path), content);
  }
  digests = {
    digest: digestOfManifest(await manifestOfDirectory(model)),
    tokenizerDigest: digestOfManifest(await manifestOfDirectory(model, { select: isTokenizerFile })),
  };
});

async function startHub(opts: Partial<FakeHubOptions> = {}): Promise<FakeHub> {
  const hub = await startFakeHub({
    modelDir: model,
    repo: REPO,
    revision: REVISION,
    isLfs,
    pageSize: 3,
    ...opts,
  });
  hubs.push(hub);
  return hub;
}

interface Run {
  readonly outcome: FetchOutcome;
  readonly events: FetchProgress[];
  readonly sleeps: number[];
}

async function fetchFrom(
  hub: FakeHub,
  dest: string,
  opts: Partial<Omit<FetchOptions, 'request'>> & { request?: Partial<FetchRequest> } = {},
): Promise<Run> {
  const events: FetchProgress[] = [];
  const sleeps: number[] = [];
  const { request, ...rest } = opts;
  const outcome = await fetchModel({
    request: { endpoint: hub.url, repo: REPO, revision: REVISION, ...digests, dest, ...request },
    sleep: (ms) => {
      sleeps.push(ms);
      return Promise.resolve();
    },
    onProgress: (p) => events.push(p),
    now: () => new Date('2026-12-02T00:00:00Z'),
    ...rest,
  });
  return { outcome, events, sleeps };
}

const cdnRequests = (hub: FakeHub) => hub.requests.filter((r) => r.server === 'cdn');
const partialsLeft = (dest: string): string[] =>
  existsSync(join(dest, PARTIAL_DIR)) ? readdirSync(join(dest, PARTIAL_DIR)) : [];

describe('fetchModel', () => {
  it('fetches every file of the commit, verifies it and leaves a marker', async () => {
    const hub = await startHub();
    const dest = join(tempDir(), 'model');
    const { outcome, events } = await fetchFrom(hub, dest);

    const total = (await manifestOfDirectory(model)).files.reduce((n, f) => n + f.size, 0);
    expect(outcome).toEqual({
      ok: true,
      ...digests,
      files: 8,
      bytes: total,
      downloadedBytes: total,
      fromMarker: false,
    });
    expect(digestOfManifest(await manifestOfDirectory(dest))).toBe(digests.digest);
    expect(readFileSync(join(dest, WEIGHTS)).equals(readFileSync(join(model, WEIGHTS)))).toBe(true);
    expect(JSON.parse(readFileSync(join(dest, MARKER_FILE), 'utf8'))).toMatchObject({
      repo: REPO,
      revision: REVISION,
      ...digests,
      files: 8,
      bytes: total,
      verifiedAt: '2026-12-02T00:00:00.000Z',
    });
    expect(partialsLeft(dest)).toEqual([]);
    // Paged listing: 10 entries (with .gitattributes and a directory), 3 a page.
    expect(hub.requests.filter((r) => r.path.includes('/tree/'))).toHaveLength(4);
    // Every git file was fetched before the first LFS byte.
    const firstCdn = hub.requests.findIndex((r) => r.server === 'cdn');
    const lastCache = hub.requests.findLastIndex((r) => r.path.startsWith('/api/resolve-cache/'));
    expect(lastCache).toBeLessThan(firstCdn);
    expect(hub.bytesOf(WEIGHTS)).toBe(WEIGHTS_SIZE);

    const last = events.at(-1);
    expect(last).toEqual({
      phase: 'verifying',
      filesDone: 8,
      filesTotal: 8,
      bytesDone: total,
      bytesTotal: total,
    });
    expect(events.map((e) => e.phase).filter((p, i, a) => a[i - 1] !== p)).toEqual([
      'checking',
      'listing',
      'small-files',
      'weights',
      'verifying',
    ]);
    // Byte progress is throttled to whole percents and file ends, and never goes backwards here.
    expect(events.length).toBeLessThan(130);
    expect(events.every((e, i) => i === 0 || e.bytesDone >= (events[i - 1]?.bytesDone ?? 0))).toBe(true);
  });

  it('makes no request at all on a second run: the marker and the names and sizes suffice', async () => {
    const hub = await startHub();
    const dest = join(tempDir(), 'model');
    expect((await fetchFrom(hub, dest)).outcome.ok).toBe(true);
    const served = hub.requests.length;
    const again = await fetchFrom(hub, dest);
    expect(again.outcome).toMatchObject({ ok: true, ...digests, downloadedBytes: 0, fromMarker: true });
    expect(hub.requests).toHaveLength(served);
    // Two progress lines, not one per file: checking, then all done.
    expect(again.events.map((e) => [e.phase, e.filesDone])).toEqual([
      ['checking', 0],
      ['checking', 8],
    ]);
  });

  it('lists the commit but downloads no file again when the marker is gone (a crash before it)', async () => {
    const hub = await startHub();
    const dest = join(tempDir(), 'model');
    await fetchFrom(hub, dest);
    rmSync(join(dest, MARKER_FILE));
    const served = hub.requests.length;
    const again = await fetchFrom(hub, dest);
    expect(again.outcome).toMatchObject({ ok: true, downloadedBytes: 0, fromMarker: false });
    expect(hub.requests.slice(served).every((r) => r.path.includes('/tree/'))).toBe(true);
    expect(existsSync(join(dest, MARKER_FILE))).toBe(true);
  });

  it('notices a file gone by its name despite the marker, and fetches only that one again', async () => {
    const hub = await startHub();
    const dest = join(tempDir(), 'model');
    await fetchFrom(hub, dest);
    rmSync(join(dest, WEIGHTS));
    const again = await fetchFrom(hub, dest);
    expect(again.outcome).toMatchObject({ ok: true, downloadedBytes: WEIGHTS_SIZE, fromMarker: false });
    expect(hub.bytesOf(WEIGHTS)).toBe(2 * WEIGHTS_SIZE);
    expect(hub.bytesOf('config.json')).toBe(Buffer.byteLength(readFileSync(join(model, 'config.json'))));
  });

  it('refuses a tampered LFS file, naming it, and leaves it nowhere in the directory', async () => {
    const hub = await startHub();
    hub.tamper(WEIGHTS);
    const dest = join(tempDir(), 'model');
    const { outcome } = await fetchFrom(hub, dest);
    expect(outcome).toMatchObject({ ok: false, reason: 'ModelDigestMismatch', path: WEIGHTS });
    expect(!outcome.ok && outcome.message).toMatch(
      /^model\.safetensors: sha256 [0-9a-f]{64}, the listing of commit 0123/,
    );
    expect(existsSync(join(dest, WEIGHTS))).toBe(false);
    expect(partialsLeft(dest)).toEqual([]);
    expect(existsSync(join(dest, MARKER_FILE))).toBe(false);
  });

  it('refuses a tampered git file before any LFS byte is served', async () => {
    const hub = await startHub();
    hub.tamper('tokenizer_config.json');
    const dest = join(tempDir(), 'model');
    const { outcome } = await fetchFrom(hub, dest);
    expect(outcome).toMatchObject({
      ok: false,
      reason: 'ModelDigestMismatch',
      path: 'tokenizer_config.json',
    });
    expect(!outcome.ok && outcome.message).toMatch(
      /^tokenizer_config\.json: git blob [0-9a-f]{40}, the listing/,
    );
    expect(cdnRequests(hub)).toEqual([]);
    expect(hub.cdnBytes()).toBe(0);
    expect(existsSync(join(dest, 'tokenizer_config.json'))).toBe(false);
  });

  it.each([
    ['model digest', { digest: `sha256:${'e'.repeat(64)}` }, 'digest'],
    ['tokenizer digest', { tokenizerDigest: `sha256:${'e'.repeat(64)}` }, 'tokenizerDigest'],
  ] as const)('refuses another %s than the commit has, before any weight', async (_name, pinned, field) => {
    const hub = await startHub();
    const { outcome } = await fetchFrom(hub, join(tempDir(), 'model'), { request: pinned });
    expect(outcome).toMatchObject({ ok: false, reason: 'ModelDigestMismatch' });
    // The message names both: what was pinned and what the commit has.
    expect(!outcome.ok && outcome.message).toContain(`sha256:${'e'.repeat(64)}`);
    expect(!outcome.ok && outcome.message).toContain(digests[field]);
    expect(cdnRequests(hub)).toEqual([]);
  });

  it('sends the token to the hub only: 401 without it, and the CDN never sees it', async () => {
    const hub = await startHub({ token: TOKEN });
    const without = await fetchFrom(hub, join(tempDir(), 'model'));
    expect(without.outcome).toMatchObject({ ok: false, reason: 'HubUnauthorized' });
    expect(!without.outcome.ok && without.outcome.message).toMatch(/check the token .*none was given/);

    const wrong = await fetchFrom(hub, join(tempDir(), 'model'), { token: 'hf_wrong_token_1234' });
    expect(!wrong.outcome.ok && wrong.outcome.message).toMatch(/the one given was refused/);

    const withToken = await fetchFrom(hub, join(tempDir(), 'model'), { token: TOKEN });
    expect(withToken.outcome).toMatchObject({ ok: true });
    const after = hub.requests.slice(hub.requests.findIndex((r) => r.authorization === `Bearer ${TOKEN}`));
    expect(after.filter((r) => r.server === 'hub').every((r) => r.authorization === `Bearer ${TOKEN}`)).toBe(
      true,
    );
    expect(cdnRequests(hub).length).toBeGreaterThan(0);
    expect(cdnRequests(hub).map((r) => r.authorization)).toEqual(cdnRequests(hub).map(() => undefined));
    for (const run of [without, wrong, withToken]) expect(JSON.stringify(run)).not.toContain('hf_');
  });

  it('retries a 503 of the listing and of a download, with backoff', async () => {
    const hub = await startHub();
    hub.inject({ server: 'hub', path: '/tree/', status: 503 });
    hub.inject({ server: 'cdn', status: 503 });
    const { outcome, sleeps } = await fetchFrom(hub, join(tempDir(), 'model'), { backoffMs: 250 });
    expect(outcome).toMatchObject({ ok: true });
    expect(sleeps).toEqual([250, 250]);
  });

  it('gives up with DownloadFailed after the retries', async () => {
    const hub = await startHub();
    hub.inject({ server: 'cdn', status: 502, times: 100 });
    const { outcome, sleeps } = await fetchFrom(hub, join(tempDir(), 'model'), {
      retries: 2,
      backoffMs: 100,
    });
    expect(outcome).toMatchObject({ ok: false, reason: 'DownloadFailed' });
    expect(!outcome.ok && outcome.message).toMatch(/gave up after 3 attempts: .*HTTP 502/);
    expect(sleeps.filter((ms) => ms >= 100)).toEqual(expect.arrayContaining([100, 200]));
  });

  it('resumes a download cut off mid-file with a Range request', async () => {
    const hub = await startHub();
    const cut = 2 * 1024 * 1024;
    hub.inject({ server: 'cdn', path: '/lfs/', cutAfter: cut });
    const { outcome } = await fetchFrom(hub, join(tempDir(), 'model'), { concurrency: 1 });
    expect(outcome).toMatchObject({ ok: true });
    const weights = cdnRequests(hub).filter((r) => r.bytes > 100_000);
    expect(weights.map((r) => r.range)).toEqual([undefined, expect.stringMatching(/^bytes=\d+-$/)]);
    const from = Number(/\d+/.exec(weights[1]?.range ?? '')?.[0]);
    expect(from).toBeGreaterThan(0);
    expect(from).toBeLessThanOrEqual(cut);
    expect(weights[1]?.bytes).toBe(WEIGHTS_SIZE - from);
  });

  it('resumes a partial file an earlier run left', async () => {
    const hub = await startHub();
    const dest = join(tempDir(), 'model');
    const part = partialPathFor(dest, { path: WEIGHTS, size: WEIGHTS_SIZE, sha256: sha256Of(WEIGHTS) });
    mkdirSync(dirname(part), { recursive: true });
    writeFileSync(part, readFileSync(join(model, WEIGHTS)).subarray(0, 1 << 20));
    const { outcome } = await fetchFrom(hub, dest);
    expect(outcome).toMatchObject({ ok: true, downloadedBytes: expect.any(Number) });
    const weights = cdnRequests(hub).filter((r) => r.bytes > 100_000);
    expect(weights.map((r) => [r.range, r.bytes])).toEqual([[`bytes=${1 << 20}-`, WEIGHTS_SIZE - (1 << 20)]]);
  });

  it('starts over when the server answers a Range request with the whole file', async () => {
    const hub = await startHub({ ignoreRange: true });
    const dest = join(tempDir(), 'model');
    const part = partialPathFor(dest, { path: WEIGHTS, size: WEIGHTS_SIZE, sha256: sha256Of(WEIGHTS) });
    mkdirSync(dirname(part), { recursive: true });
    writeFileSync(part, readFileSync(join(model, WEIGHTS)).subarray(0, 1 << 20));
    const { outcome } = await fetchFrom(hub, dest);
    expect(outcome).toMatchObject({ ok: true });
    const weights = cdnRequests(hub).filter((r) => r.bytes > 100_000);
    expect(weights.map((r) => [r.range, r.bytes])).toEqual([[`bytes=${1 << 20}-`, WEIGHTS_SIZE]]);
    expect(readFileSync(join(dest, WEIGHTS)).equals(readFileSync(join(model, WEIGHTS)))).toBe(true);
  });

  it('drops a partial file whose bytes are wrong and fetches the file from the start', async () => {
    const hub = await startHub();
    const dest = join(tempDir(), 'model');
    const part = partialPathFor(dest, { path: WEIGHTS, size: WEIGHTS_SIZE, sha256: sha256Of(WEIGHTS) });
    mkdirSync(dirname(part), { recursive: true });
    writeFileSync(part, Buffer.alloc(1 << 20));
    const { outcome } = await fetchFrom(hub, dest);
    expect(outcome).toMatchObject({ ok: true });
    const weights = cdnRequests(hub).filter((r) => r.bytes > 100_000);
    expect(weights.map((r) => r.range)).toEqual([`bytes=${1 << 20}-`, undefined]);
  });

  it.each(['main', 'v1.0', '0123456'])('refuses the revision %s before any request', async (revision) => {
    const hub = await startHub();
    const { outcome } = await fetchFrom(hub, join(tempDir(), 'model'), { request: { revision } });
    expect(outcome).toMatchObject({ ok: false, reason: 'InvalidArguments' });
    expect(!outcome.ok && outcome.message).toMatch(/^revision must be the 40-hex commit id/);
    expect(hub.requests).toEqual([]);
  });

  it('says HubNotFound, naming the repository and revision, for a commit the hub does not have', async () => {
    const hub = await startHub();
    const revision = 'f'.repeat(40);
    const { outcome } = await fetchFrom(hub, join(tempDir(), 'model'), { request: { revision } });
    expect(outcome).toMatchObject({ ok: false, reason: 'HubNotFound' });
    expect(!outcome.ok && outcome.message).toBe(
      `the hub answered 404 (RevisionNotFound) for the file listing of ${REPO} at ${revision}: ` +
        'check the repository id and that the revision is a commit of it',
    );
  });

  it('refuses a destination with files that are not the commit’s before fetching any', async () => {
    const hub = await startHub();
    const dest = tempDir();
    writeFileSync(join(dest, 'notes.txt'), 'mine');
    const { outcome } = await fetchFrom(hub, dest);
    expect(outcome).toMatchObject({ ok: false, reason: 'UnexpectedFiles', path: 'notes.txt' });
    expect(hub.requests.every((r) => r.path.includes('/tree/'))).toBe(true);
  });

  it('goes through an HTTP proxy when given one', async () => {
    const hub = await startHub({ token: TOKEN });
    const proxy = await startForwardProxy();
    try {
      const { outcome } = await fetchFrom(hub, join(tempDir(), 'model'), {
        token: TOKEN,
        proxy: { httpProxy: proxy.url },
      });
      expect(outcome).toMatchObject({ ok: true });
      expect(proxy.relayed.some((u) => u.startsWith(`${hub.url}/api/models/`))).toBe(true);
      expect(proxy.relayed.some((u) => u.startsWith(`${hub.cdnUrl}/lfs/`))).toBe(true);
      expect(proxy.relayed).toHaveLength(hub.requests.length);
      expect(cdnRequests(hub).every((r) => r.authorization === undefined)).toBe(true);
    } finally {
      await proxy.close();
    }
  });
});

function sha256Of(path: string): string {
  return createHash('sha256')
    .update(readFileSync(join(model, path)))
    .digest('hex');
}

describe('nextPageUrl', () => {
  const base = new URL('https://hub.example/api/models/a/b/tree/c?recursive=true');
  it.each([
    [undefined, undefined],
    ['<https://hub.example/p2?cursor=x>; rel="next"', 'https://hub.example/p2?cursor=x'],
    ['</p2?cursor=y>; rel=next', 'https://hub.example/p2?cursor=y'],
    ['<https://hub.example/p0>; rel="prev", <https://hub.example/p2>; rel="next"', 'https://hub.example/p2'],
    ['<https://hub.example/p0>; rel="prev"', undefined],
  ])('%s → %s', (link, next) => {
    expect(nextPageUrl(link, base)?.href).toBe(next);
  });
});

describe('FETCH_REASONS', () => {
  it('are each documented in docs/operations.md', () => {
    const doc = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
    expect(Object.keys(FETCH_REASONS).filter((r) => !doc.includes(`| \`${r}\``))).toEqual([]);
  });
});
