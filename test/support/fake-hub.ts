// A small Hugging Face hub over real HTTP, for the model fetcher's tests (and, later, the fetch
// Job's e2e suite): it serves one repository at one commit from a directory.
//   GET /api/models/{repo}/tree/{rev}?recursive=true  the listing, `pageSize` entries a page,
//                                                     the next page behind `Link: <…>; rel="next"`
//   GET /{repo}/resolve/{rev}/{path}   git files: 307 to /api/resolve-cache/… (relative, as the hub
//                                      does); LFS files: 302 to a second server, the "CDN"
//   GET {cdn}/lfs/{sha256}?sig=…       LFS content; it needs no token and records any it gets
// Both serve Range requests (unless `ignoreRange`). With `token`, every hub route answers
// 401 without that bearer.
// Tests can tamper with a file (one byte changed, same size), inject a status, a connection
// cut or a stall (the body held after some bytes until `release()`) into matching requests, and
// read every request and the bytes served.
import { createHash } from 'node:crypto';
import { createReadStream, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Transform } from 'node:stream';

export interface FakeHubOptions {
  readonly modelDir: string;
  readonly repo: string;
  readonly revision: string;
  /** Which files the hub keeps in LFS (served through the CDN). */
  readonly isLfs: (path: string) => boolean;
  readonly token?: string;
  readonly pageSize?: number;
  /** Answer Range requests with the whole file (200), as some mirrors do. */
  readonly ignoreRange?: boolean;
}

export interface ServedRequest {
  readonly server: 'hub' | 'cdn';
  readonly path: string;
  readonly authorization: string | undefined;
  readonly range: string | undefined;
  /** Body bytes of a file sent in answer (0 for listings, redirects and errors). */
  bytes: number;
}

export interface Injection {
  readonly server?: 'hub' | 'cdn';
  /** Matches when the request's path contains it. */
  readonly path?: string;
  readonly status?: number;
  /** Serve the body, but close the connection after this many bytes. */
  readonly cutAfter?: number;
  /** Serve this many bytes of the body (to the next chunk), then hold the rest until `release()`. */
  readonly stallAfter?: number;
  times: number;
}

interface HubFile {
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
  readonly gitBlobSha1: string;
  readonly lfs: boolean;
}

type Answer = (
  req: IncomingMessage,
  res: ServerResponse,
  seen: ServedRequest,
  url: URL,
  inj: Injection | undefined,
) => void;

export interface FakeHub {
  readonly url: string;
  readonly cdnUrl: string;
  readonly requests: ServedRequest[];
  /** File bytes the CDN served: the LFS content. */
  readonly cdnBytes: () => number;
  /** File bytes served for `path`, hub and CDN. */
  readonly bytesOf: (path: string) => number;
  readonly tamper: (path: string) => void;
  readonly inject: (i: Omit<Injection, 'times'> & { times?: number }) => void;
  /** Lets every stalled body go on. */
  readonly release: () => void;
  readonly close: () => Promise<void>;
}

const sha = (algo: string, ...parts: (string | Buffer)[]): string => {
  const h = createHash(algo);
  for (const p of parts) h.update(p);
  return h.digest('hex');
};
const encodePath = (path: string): string => path.split('/').map(encodeURIComponent).join('/');
const gitBlob = (content: Buffer): string => sha('sha1', `blob ${content.length}\0`, content);

function walk(dir: string, rel = ''): { files: string[]; dirs: string[] } {
  const out = { files: [] as string[], dirs: [] as string[] };
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const path = rel ? `${rel}/${name}` : name;
    if (statSync(join(dir, path)).isDirectory()) {
      out.dirs.push(path);
      const sub = walk(dir, path);
      out.files.push(...sub.files);
      out.dirs.push(...sub.dirs);
    } else out.files.push(path);
  }
  return out;
}

function describeModel(opts: FakeHubOptions): { files: Map<string, HubFile>; listing: object[] } {
  const { files: paths, dirs } = walk(opts.modelDir);
  const files = new Map<string, HubFile>();
  const listing: object[] = dirs.map((path) => ({
    type: 'directory',
    path,
    size: 0,
    oid: sha('sha1', path),
  }));
  for (const path of paths) {
    const content = readFileSync(join(opts.modelDir, path));
    const f = {
      path,
      size: content.length,
      sha256: sha('sha256', content),
      gitBlobSha1: gitBlob(content),
      lfs: opts.isLfs(path),
    };
    files.set(path, f);
    if (!f.lfs) listing.push({ type: 'file', path, size: f.size, oid: f.gitBlobSha1 });
    else {
      const pointer = Buffer.from(
        `version https://git-lfs.github.com/spec/v1\noid sha256:${f.sha256}\nsize ${f.size}\n`,
      );
      listing.push({
        type: 'file',
        path,
        size: f.size,
        oid: gitBlob(pointer),
        lfs: { oid: f.sha256, size: f.size, pointerSize: pointer.length },
      });
    }
  }
  return { files, listing };
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export async function startFakeHub(opts: FakeHubOptions): Promise<FakeHub> {
  const { files, listing } = describeModel(opts);
  const bySha256 = new Map([...files.values()].filter((f) => f.lfs).map((f) => [f.sha256, f]));
  const tampered = new Set<string>();
  const injections: Injection[] = [];
  const requests: ServedRequest[] = [];
  const pageSize = opts.pageSize ?? 3;
  const repoPrefix = `/api/models/${opts.repo}/tree/`;
  const resolvePrefix = `/${opts.repo}/resolve/`;
  const cachePrefix = `/api/resolve-cache/models/${opts.repo}/`;
  let hubUrl = '';
  let cdnUrl = '';
  let release = (): void => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));

  function sendFile(
    req: IncomingMessage,
    res: ServerResponse,
    file: HubFile,
    seen: ServedRequest,
    inj?: Injection,
  ): void {
    const cutAfter = inj?.cutAfter;
    const stallAfter = inj?.stallAfter;
    const m = opts.ignoreRange ? null : /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const start = m ? Number(m[1]) : 0;
    if (start > file.size) return void res.writeHead(416, { 'content-range': `bytes */${file.size}` }).end();
    res.writeHead(m ? 206 : 200, {
      'content-length': String(file.size - start),
      ...(m ? { 'content-range': `bytes ${start}-${file.size - 1}/${file.size}` } : {}),
      etag: `"${file.lfs ? file.sha256 : file.gitBlobSha1}"`,
    });
    if (file.size === start) return void res.end();
    const source = createReadStream(join(opts.modelDir, file.path), { start });
    const flipAt = tampered.has(file.path) ? Math.floor(file.size / 2) : -1;
    let pos = start;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        if (stallAfter !== undefined && seen.bytes >= stallAfter)
          return void released.then(() => pass(chunk, done));
        pass(chunk, done);
      },
    });
    function pass(chunk: Buffer, done: (e: null, out: Buffer) => void): void {
      let out = chunk;
      const cut = cutAfter !== undefined && seen.bytes + out.length >= cutAfter;
      if (cut) out = out.subarray(0, cutAfter - seen.bytes);
      if (flipAt >= pos && flipAt < pos + out.length) {
        out = Buffer.from(out);
        out[flipAt - pos] = (out[flipAt - pos] ?? 0) ^ 0xff;
      }
      pos += out.length;
      seen.bytes += out.length;
      done(null, out);
      // A dropped connection: what was written goes out, then the socket ends short of the length.
      if (cut) setImmediate(() => (source.destroy(), res.socket?.end()));
    }
    source.pipe(counter).pipe(res);
  }

  const answerHub: Answer = (req, res, seen, url, inj) => {
    if (opts.token !== undefined && req.headers.authorization !== `Bearer ${opts.token}`)
      return void res
        .writeHead(401, { 'content-type': 'application/json' })
        .end('{"error":"Invalid credentials in Authorization header"}');
    const p = decodeURIComponent(url.pathname);
    if (p.startsWith(repoPrefix)) {
      if (p.slice(repoPrefix.length) !== opts.revision)
        return void res
          .writeHead(404, { 'x-error-code': 'RevisionNotFound' })
          .end('{"error":"Invalid rev id"}');
      const from = Number(url.searchParams.get('cursor') ?? '0');
      const page = listing.slice(from, from + pageSize);
      const next =
        from + pageSize < listing.length
          ? `${hubUrl}${url.pathname}?recursive=true&cursor=${from + pageSize}`
          : undefined;
      return void res
        .writeHead(200, {
          'content-type': 'application/json',
          ...(next ? { link: `<${next}>; rel="next"` } : {}),
        })
        .end(JSON.stringify(page));
    }
    const [prefix, rest] = p.startsWith(resolvePrefix)
      ? [resolvePrefix, p.slice(resolvePrefix.length)]
      : p.startsWith(cachePrefix)
        ? [cachePrefix, p.slice(cachePrefix.length)]
        : [undefined, ''];
    const slash = rest.indexOf('/');
    const file = files.get(rest.slice(slash + 1));
    if (!prefix || rest.slice(0, slash) !== opts.revision || !file)
      return void res.writeHead(404, { 'x-error-code': prefix ? 'EntryNotFound' : 'RepoNotFound' }).end();
    if (prefix === cachePrefix || !file.lfs) {
      if (prefix === resolvePrefix)
        return void res
          .writeHead(307, {
            location: `${cachePrefix}${opts.revision}/${encodePath(file.path)}?etag=${file.gitBlobSha1}`,
          })
          .end();
      return sendFile(req, res, file, seen, inj);
    }
    res
      .writeHead(302, {
        location: `${cdnUrl}/lfs/${file.sha256}?sig=${sha('sha1', file.path)}`,
        'x-linked-size': String(file.size),
      })
      .end();
  };

  const answerCdn: Answer = (req, res, seen, url, inj) => {
    const file = bySha256.get(url.pathname.replace(/^\/lfs\//, ''));
    if (!file || !url.searchParams.get('sig')) return void res.writeHead(403).end();
    sendFile(req, res, file, seen, inj);
  };

  const handler = (server: 'hub' | 'cdn') => (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const seen: ServedRequest = {
      server,
      path: req.url ?? '/',
      authorization: req.headers.authorization,
      range: req.headers.range,
      bytes: 0,
    };
    requests.push(seen);
    const inj = injections.find(
      (i) => i.times > 0 && (i.server ?? server) === server && url.pathname.includes(i.path ?? ''),
    );
    if (inj) inj.times--;
    if (inj?.status !== undefined) return void res.writeHead(inj.status).end();
    (server === 'hub' ? answerHub : answerCdn)(req, res, seen, url, inj);
  };
  const hub = createServer(handler('hub'));
  const cdn = createServer(handler('cdn'));
  hubUrl = await listen(hub);
  cdnUrl = await listen(cdn);

  const fileOf = (r: ServedRequest): string | undefined => {
    const p = decodeURIComponent(r.path.split('?')[0] ?? '');
    if (r.server === 'cdn') return bySha256.get(p.replace(/^\/lfs\//, ''))?.path;
    return p.startsWith(cachePrefix) ? p.slice(cachePrefix.length).split('/').slice(1).join('/') : undefined;
  };
  return {
    url: hubUrl,
    cdnUrl,
    requests,
    cdnBytes: () => requests.filter((r) => r.server === 'cdn').reduce((n, r) => n + r.bytes, 0),
    bytesOf: (path) => requests.filter((r) => fileOf(r) === path).reduce((n, r) => n + r.bytes, 0),
    tamper: (path) => void tampered.add(path),
    inject: (i) => void injections.push({ ...i, times: i.times ?? 1 }),
    release,
    close: async () => {
      release();
      for (const s of [hub, cdn]) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
    },
  };
}
