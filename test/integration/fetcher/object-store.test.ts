// The fetcher against a real S3 server (versitygw, test/support/object-store.ts): an s3:// prefix
// fetched, verified against the digests and marked; resumed where a partial file was left; a
// refused key, a missing bucket and a bucket whose files are not the pinned ones each end with
// their reason and nothing trusted; a proxy; the CLI reading the key from the environment.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { partialPathFor } from '../../../fetcher/src/download.ts';
import { MARKER_FILE } from '../../../fetcher/src/fetch-marker.ts';
import type { FetchProgress } from '#api/model-fetch-progress.ts';
import { fetchModel, type FetchOutcome } from '../../../fetcher/src/fetch.ts';
import type { ProxyConfig } from '../../../fetcher/src/hub-client.ts';
import { buildStoreClient, listStoreObjects, parseStoreUrl } from '../../../fetcher/src/object-store.ts';
import { manifestOfDirectory } from '../../../fetcher/src/files.ts';
import { digestOfManifest, isTokenizerFile } from '../../../fetcher/src/manifest.ts';
import { startForwardProxy } from '../../support/forward-proxy.ts';
import { startObjectStore, type RunningObjectStore } from '../../support/object-store.ts';

const BUCKET = 'models';
const PREFIX = 'acme/tiny-llm';
const URL_OF = `s3://${BUCKET}/${PREFIX}`;
const WEIGHTS = 'model.safetensors';
const WEIGHTS_SIZE = 6 * 1024 * 1024 + 321;

let store: RunningObjectStore;
let model = '';
let digests = { digest: '', tokenizerDigest: '' };
let total = 0;
const roots: string[] = [];

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'model-fetch-s3-'));
  roots.push(d);
  return d;
}

beforeAll(async () => {
  store = await startObjectStore();
  model = tempDir();
  const files: Record<string, string | Buffer> = {
    'config.json': '{"architectures":["LlamaForCausalLM"],"hidden_size":64}',
    'tokenizer.json': '{"version":"1.0","model":{"type":"BPE"}}',
    'tokenizer_config.json': '{"chat_template":"{{ messages }}"}',
    'original/params.json': '{"dim":64}',
    [WEIGHTS]: randomBytes(WEIGHTS_SIZE),
  };
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(model, path)), { recursive: true });
    writeFileSync(join(model, path), content);
  }
  const manifest = await manifestOfDirectory(model);
  digests = {
    digest: digestOfManifest(manifest),
    tokenizerDigest: digestOfManifest(await manifestOfDirectory(model, { select: isTokenizerFile })),
  };
  total = manifest.files.reduce((n, f) => n + f.size, 0);
  await store.createBucket(BUCKET);
  await store.putDirectory(BUCKET, `${PREFIX}/`, model);
  // Outside the manifest (hidden), and a sibling prefix that starts with the same letters.
  await store.client.send(
    new PutObjectCommand({ Bucket: BUCKET, Key: `${PREFIX}/.cache/notes.txt`, Body: 'not the model' }),
  );
  await store.client.send(
    new PutObjectCommand({ Bucket: BUCKET, Key: `${PREFIX}-v2/config.json`, Body: '{}' }),
  );
}, 60_000);

afterEach(() => {
  vi.unstubAllEnvs();
});

afterAll(async () => {
  await store?.stop();
  roots.forEach((r) => rmSync(r, { recursive: true, force: true }));
});

function useKey(secret = store.secretAccessKey): void {
  vi.stubEnv('AWS_ACCESS_KEY_ID', store.accessKeyId);
  vi.stubEnv('AWS_SECRET_ACCESS_KEY', secret);
}

async function fetchFrom(
  dest: string,
  opts: { url?: string; proxy?: ProxyConfig; digest?: string } = {},
): Promise<{ outcome: FetchOutcome; events: FetchProgress[] }> {
  const events: FetchProgress[] = [];
  const outcome = await fetchModel({
    request: {
      url: opts.url ?? URL_OF,
      endpoint: store.endpoint,
      pathStyle: true,
      ...digests,
      ...(opts.digest ? { digest: opts.digest } : {}),
      dest,
    },
    ...(opts.proxy ? { proxy: opts.proxy } : {}),
    retries: 1,
    sleep: () => Promise.resolve(),
    onProgress: (p) => events.push(p),
    now: () => new Date('2026-12-03T00:00:00Z'),
  });
  return { outcome, events };
}

describe('model-fetch from an object store', () => {
  it('fetches every object under the prefix, verifies the files against the digests and marks them', async () => {
    useKey();
    const dest = join(tempDir(), 'model');
    const { outcome, events } = await fetchFrom(dest);
    expect(outcome).toEqual({
      ok: true,
      ...digests,
      files: 5,
      bytes: total,
      downloadedBytes: total,
      fromMarker: false,
    });
    expect(readFileSync(join(dest, WEIGHTS)).equals(readFileSync(join(model, WEIGHTS)))).toBe(true);
    // The hidden object and the sibling prefix are not the model's.
    expect(existsSync(join(dest, '.cache'))).toBe(false);
    expect(digestOfManifest(await manifestOfDirectory(dest))).toBe(digests.digest);
    expect(JSON.parse(readFileSync(join(dest, MARKER_FILE), 'utf8'))).toMatchObject({
      url: URL_OF,
      ...digests,
      files: 5,
    });
    expect(new Set(events.map((e) => e.phase))).toEqual(
      new Set(['checking', 'listing', 'weights', 'verifying']),
    );

    // Again: the marker and the files' names and sizes suffice, nothing is read from the store.
    const again = await fetchFrom(dest);
    expect(again.outcome).toMatchObject({ ok: true, fromMarker: true, downloadedBytes: 0 });
  });

  it('lists every page of a prefix, and only that prefix', async () => {
    useKey();
    const at = parseStoreUrl(URL_OF);
    if (!at.ok) throw new Error(at.error);
    const client = buildStoreClient({ endpoint: store.endpoint, pathStyle: true });
    let pages = 0;
    client.middlewareStack.add(
      (next) => (args) => {
        pages++;
        return next(args);
      },
      { step: 'initialize' },
    );
    try {
      const retry = { retries: 0, backoffMs: 0, sleep: () => Promise.resolve() };
      const paged = await listStoreObjects(client, at.value, retry, 2);
      // Five model files and the hidden one, three pages; not the sibling prefix's object.
      expect(paged.map((o) => o.key).sort()).toEqual(
        [
          ...['config.json', 'tokenizer.json', 'tokenizer_config.json', 'original/params.json', WEIGHTS],
          '.cache/notes.txt',
        ]
          .map((p) => `${PREFIX}/${p}`)
          .sort(),
      );
      expect(pages).toBe(3);
      expect(await listStoreObjects(client, at.value, retry)).toEqual(paged);
      expect(pages).toBe(4);
    } finally {
      client.destroy();
    }
  });

  it('refuses a prefix with a .. component before any request', async () => {
    const { outcome } = await fetchFrom(join(tempDir(), 'model'), { url: `s3://${BUCKET}/a/../b` });
    expect(outcome).toMatchObject({ ok: false, reason: 'InvalidArguments' });
  });

  it('resumes a partial file where an earlier run left it, with the listed ETag', async () => {
    useKey();
    const dest = join(tempDir(), 'model');
    const listed = await store.client.send(
      new ListObjectsV2Command({ Bucket: BUCKET, Prefix: `${PREFIX}/${WEIGHTS}` }),
    );
    const etag = listed.Contents?.[0]?.ETag;
    expect(etag).toBeDefined();
    const held = 2 * 1024 * 1024;
    const partial = partialPathFor(dest, {
      path: WEIGHTS,
      size: WEIGHTS_SIZE,
      ...(etag ? { version: etag } : {}),
    });
    mkdirSync(dirname(partial), { recursive: true });
    writeFileSync(partial, readFileSync(join(model, WEIGHTS)).subarray(0, held));

    const { outcome } = await fetchFrom(dest);
    expect(outcome).toMatchObject({ ok: true, downloadedBytes: total - held });
    expect(readFileSync(join(dest, WEIGHTS)).equals(readFileSync(join(model, WEIGHTS)))).toBe(true);
  });

  it('refuses a wrong secret key with StoreUnauthorized and never says the key', async () => {
    const wrong = 'wrong-secret-CANARY-5d1e';
    useKey(wrong);
    const dest = join(tempDir(), 'model');
    const { outcome, events } = await fetchFrom(dest);
    expect(outcome).toMatchObject({ ok: false, reason: 'StoreUnauthorized' });
    expect(!outcome.ok && outcome.message).toMatch(
      /answered 403 \(SignatureDoesNotMatch\).*check the credentials/,
    );
    expect(JSON.stringify({ outcome, events })).not.toContain(wrong);
    expect(existsSync(join(dest, MARKER_FILE))).toBe(false);
  });

  it('names a missing bucket (StoreNotFound) and an empty prefix (StoreInvalidListing)', async () => {
    useKey();
    const missing = await fetchFrom(join(tempDir(), 'model'), { url: 's3://no-such-bucket/x' });
    expect(missing.outcome).toMatchObject({ ok: false, reason: 'StoreNotFound' });
    expect(!missing.outcome.ok && missing.outcome.message).toContain('NoSuchBucket');
    const empty = await fetchFrom(join(tempDir(), 'model'), { url: `s3://${BUCKET}/nothing-here` });
    expect(empty.outcome).toMatchObject({ ok: false, reason: 'StoreInvalidListing' });
    expect(!empty.outcome.ok && empty.outcome.message).toContain('no objects under s3://models/nothing-here');
  });

  it('fetches but does not trust files whose digest is not the pinned one', async () => {
    useKey();
    const dest = join(tempDir(), 'model');
    const { outcome } = await fetchFrom(dest, { digest: `sha256:${'0'.repeat(64)}` });
    expect(outcome).toMatchObject({ ok: false, reason: 'ModelDigestMismatch' });
    expect(!outcome.ok && outcome.message).toContain(
      `the files under ${URL_OF} have model digest ${digests.digest}, the spec pins sha256:${'0'.repeat(64)}`,
    );
    expect(existsSync(join(dest, MARKER_FILE))).toBe(false);
  });

  it('goes through the proxy it is given', async () => {
    useKey();
    const proxy = await startForwardProxy();
    try {
      const { outcome } = await fetchFrom(join(tempDir(), 'model'), { proxy: { httpProxy: proxy.url } });
      expect(outcome).toMatchObject({ ok: true, downloadedBytes: total });
      expect(
        proxy.relayed.some((u) => u.startsWith(`${store.endpoint}/${BUCKET}/${PREFIX}/${WEIGHTS}`)),
      ).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it('runs as the fetch Job runs it: the CLI with the key as environment variables', async () => {
    const dest = join(tempDir(), 'model');
    const result = join(tempDir(), 'result.json');
    const run = await promisify(execFile)(
      process.execPath,
      [
        'fetcher/src/main.ts',
        '--object-store',
        URL_OF,
        '--store-endpoint',
        store.endpoint,
        '--store-path-style',
        '--digest',
        digests.digest,
        '--tokenizer-digest',
        digests.tokenizerDigest,
        '--dest',
        dest,
        '--result-file',
        result,
      ],
      {
        env: {
          PATH: process.env['PATH'] ?? '',
          AWS_ACCESS_KEY_ID: store.accessKeyId,
          AWS_SECRET_ACCESS_KEY: store.secretAccessKey,
        },
      },
    );
    expect(run.stderr).toBe('');
    expect(JSON.parse(readFileSync(result, 'utf8'))).toMatchObject({ phase: 'done', ok: true, ...digests });
    expect(run.stdout).not.toContain(store.secretAccessKey);
  });
});
