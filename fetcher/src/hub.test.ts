import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hashFile, manifestOfDirectory } from './files.ts';
import { manifestFromPlan, type FetchPlan } from './fetch-plan.ts';
import { HubTreeListing, planFromHubListing } from './hub.ts';
import { digestOfManifest, isTokenizerFile } from './manifest.ts';

const H64 = (c: string): string => c.repeat(64);
const H40 = (c: string): string => c.repeat(40);

// The shape of `GET /api/models/{repo}/tree/{commit}?recursive=true&expand=true` (huggingface.js
// ApiIndexTreeEntry, huggingface_hub RepoFile): extra fields the manifest does not need included.
const LISTING = [
  { type: 'file', oid: H40('1'), size: 1519, path: '.gitattributes' },
  {
    type: 'file',
    oid: H40('2'),
    size: 663,
    path: 'config.json',
    lastCommit: { id: H40('9'), title: 'x', date: '2025-01-01T00:00:00.000Z' },
  },
  {
    type: 'file',
    oid: H40('3'),
    size: 3_955_411_864,
    path: 'model-00001-of-00002.safetensors',
    lfs: { oid: H64('a'), size: 3_955_411_864, pointerSize: 135 },
    xetHash: H64('f'),
    security: {
      safe: true,
      blobId: H40('3'),
      name: 'model-00001-of-00002.safetensors',
      repositoryId: 'models/x',
    },
  },
  { type: 'directory', oid: H40('4'), size: 0, path: 'original' },
  {
    type: 'file',
    oid: H40('5'),
    size: 2_183_982,
    path: 'original/tokenizer.model',
    lfs: { oid: H64('b'), size: 2_183_982, pointerSize: 133 },
  },
  {
    type: 'file',
    oid: H40('6'),
    size: 7_031_645,
    path: 'tokenizer.json',
    lfs: { oid: H64('c'), size: 7_031_645, pointerSize: 134 },
  },
  { type: 'file', oid: H40('7'), size: 50_500, path: 'tokenizer_config.json' },
];

type Hashed = Map<string, { size: number; sha256: string; gitBlobSha1?: string }>;

function parse(listing: unknown): HubTreeListing {
  return HubTreeListing.parse(listing);
}

function plan(listing: HubTreeListing, select?: (p: string) => boolean): FetchPlan {
  const p = planFromHubListing(listing, select);
  if (!p.ok) throw new Error(p.error.message);
  return p.value;
}

describe('HubTreeListing', () => {
  it('parses the hub tree answer, keeping what the manifest needs', () => {
    const l = parse(LISTING);
    expect(l).toHaveLength(LISTING.length);
    expect(l[1]).toEqual({ type: 'file', oid: H40('2'), size: 663, path: 'config.json' });
  });

  it.each([
    ['an LFS oid that is not a sha256', [{ ...LISTING[2], lfs: { oid: 'abc', size: 1, pointerSize: 1 } }]],
    ['a missing oid', [{ type: 'file', size: 1, path: 'a' }]],
    ['a negative size', [{ type: 'file', oid: H40('1'), size: -1, path: 'a' }]],
    ['an object instead of a list', { files: [] }],
  ])('refuses %s', (_name, listing) => {
    expect(HubTreeListing.safeParse(listing).success).toBe(false);
  });
});

describe('planFromHubListing', () => {
  it('knows LFS files from the listing and leaves git files to fetch and hash; no directories, no hidden files', () => {
    expect(plan(parse(LISTING))).toEqual({
      known: [
        { path: 'model-00001-of-00002.safetensors', size: 3_955_411_864, sha256: H64('a') },
        { path: 'original/tokenizer.model', size: 2_183_982, sha256: H64('b') },
        { path: 'tokenizer.json', size: 7_031_645, sha256: H64('c') },
      ],
      pending: [
        { path: 'config.json', size: 663, gitBlobSha1: H40('2') },
        { path: 'tokenizer_config.json', size: 50_500, gitBlobSha1: H40('7') },
      ],
    });
  });

  it('selects the tokenizer files as the directory walk does (top level only)', () => {
    const p = plan(parse(LISTING), isTokenizerFile);
    expect([...p.known, ...p.pending].map((f) => f.path)).toEqual([
      'tokenizer.json',
      'tokenizer_config.json',
    ]);
  });

  it('refuses a path that has no line in a manifest', () => {
    const r = planFromHubListing(parse([{ type: 'file', oid: H40('1'), size: 1, path: 'a/../b' }]));
    expect(r).toMatchObject({ ok: false, error: { code: 'invalid_path', path: 'a/../b' } });
  });
});

describe('the same manifest from the hub listing as from the files', () => {
  const root = mkdtempSync(join(tmpdir(), 'model-hub-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const files: Record<string, { content: string; lfs: boolean }> = {
    'config.json': { content: '{"model_type":"llama"}', lfs: false },
    'model.safetensors': { content: 'pretend these are weights', lfs: true },
    'sub/extra.bin': { content: 'lfs in a folder', lfs: true },
    'tokenizer.json': { content: '{"model":{}}', lfs: true },
    'tokenizer_config.json': { content: '{"chat_template":"{{x}}"}', lfs: false },
  };
  for (const [path, f] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), f.content);
  }
  const gitBlobId = (path: string): string =>
    execFileSync('git', ['hash-object', join(root, path)])
      .toString()
      .trim();
  const sha256sum = (path: string): string =>
    execFileSync('sha256sum', [join(root, path)])
      .toString()
      .slice(0, 64);
  // The listing as the hub would give it, its ids from git and sha256sum, not from our code.
  const listing = parse([
    { type: 'file', path: '.gitattributes', size: 20, oid: H40('0') },
    { type: 'directory', path: 'sub', size: 0, oid: H40('1') },
    ...Object.entries(files).map(([path, f]) => {
      const size = Buffer.byteLength(f.content);
      const oid = gitBlobId(path);
      return f.lfs
        ? { type: 'file', path, size, oid, lfs: { oid: sha256sum(path), size, pointerSize: 130 } }
        : { type: 'file', path, size, oid };
    }),
  ]);

  async function hashPending(p: FetchPlan): Promise<Hashed> {
    const hashed: Hashed = new Map();
    for (const f of p.pending) hashed.set(f.path, await hashFile(join(root, f.path), { gitBlobSha1: true }));
    return hashed;
  }

  it('gives the digest of the downloaded directory, once the git files are hashed', async () => {
    const p = plan(listing);
    const m = manifestFromPlan(p, await hashPending(p));
    const onDisk = await manifestOfDirectory(root);
    expect(m).toEqual({ ok: true, value: onDisk });
    expect(m.ok && digestOfManifest(m.value)).toBe(digestOfManifest(onDisk));
  });

  it('and the tokenizer digest', async () => {
    const p = plan(listing, isTokenizerFile);
    const m = manifestFromPlan(p, await hashPending(p));
    expect(m).toEqual({ ok: true, value: await manifestOfDirectory(root, { select: isTokenizerFile }) });
  });

  it.each([
    ['missing', (h: Hashed) => h.delete('config.json')],
    ['size', (h: Hashed) => h.set('config.json', { ...h.get('config.json')!, size: 1 })],
    [
      'git_blob_sha1',
      (h: Hashed) => h.set('config.json', { ...h.get('config.json')!, gitBlobSha1: H40('e') }),
    ],
  ])('refuses a fetched git file that is not the listed one: %s', async (code, spoil) => {
    const p = plan(listing);
    const hashed = await hashPending(p);
    spoil(hashed);
    expect(manifestFromPlan(p, hashed)).toMatchObject({ ok: false, error: { code, path: 'config.json' } });
  });
});
