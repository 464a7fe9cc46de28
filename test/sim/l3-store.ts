// HiCache's L3 `file` storage tier (sglang 0.5.23 mem_cache/hicache_storage.py HiCacheFile) as
// the simulator keeps it: a directory shared by every server given the same one
// (SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR), holding pages by key.
//
// What it keeps of the wheel's semantics:
// - A page's key is a hash chain over the token ids, seeded by the request's namespace
//   (cache_salt and extra_key: mem_cache/utils.py storage_namespace_seed) and the served model
//   name (part of HiCacheFile's file name): two tenants never share a page.
// - Pages are written through from the host tier (the radix tree's backup hook: SGLang's
//   write_backup_storage runs at the host ack), never removed by the server: /flush_cache
//   leaves the directory alone, and so does a restart.
// - A lookup answers the leading run of pages present (the prefetch's batch_exists).
// - Many processes share one directory: writers never overwrite each other.
//
// What it does not keep: one file per page (`<hash>_<model>_<rank>_<size>.bin`). A replay of
// thousands of long prompts would create millions of files on a shared 2-core machine; each
// simulator instead appends the keys it writes to its own journal in the directory
// (`sim-l3-<pid>-<n>.journal`, one hex key a line) and reads the others' journals forward from
// where it last stopped, before each lookup. Only whole lines count, so a journal being
// appended to is never half read. No LRUFileEvictor: nothing bounds the tier (SGLang's default
// without a cap in the extra config).

import { createHash } from 'node:crypto';
import { appendFileSync, closeSync, fstatSync, mkdirSync, openSync, readdirSync, readSync } from 'node:fs';
import { join, resolve } from 'node:path';

const JOURNAL_SUFFIX = '.journal';
let journalsOpened = 0;

/** The leading chain state of a namespace: every page key of it hangs off this. */
export function seedL3Chain(servedModel: string, namespace: string): Buffer {
  return createHash('sha256')
    .update('cacheroute-sim-l3\0')
    .update(servedModel)
    .update('\0')
    .update(namespace)
    .digest();
}

/** Extends a chain state by one page of token ids; the result is the page's key (and the next state). */
export function extendL3Chain(prev: Buffer, page: readonly number[]): Buffer {
  const ids = Buffer.alloc(page.length * 4);
  page.forEach((t, i) => ids.writeUInt32LE(t >>> 0, i * 4));
  return createHash('sha256').update(prev).update(ids).digest();
}

/** Keys of the whole pages of `tokens` (a short last page has none), from `seed`. */
export function pageKeys(seed: Buffer, tokens: readonly number[], pageSize: number): Buffer[] {
  const out: Buffer[] = [];
  let state = seed;
  for (let at = 0; at + pageSize <= tokens.length; at += pageSize) {
    state = extendL3Chain(state, tokens.slice(at, at + pageSize));
    out.push(state);
  }
  return out;
}

const keyText = (k: Buffer): string => k.toString('hex', 0, 16);

export interface L3Store {
  /** Pages known to the tier. */
  readonly pages: number;
  /** How many of `keys`, from the first, the tier holds in a row. */
  leadingRun(keys: readonly Buffer[]): number;
  /** Write pages through (ones already held are not written again); returns how many were new. */
  write(keys: readonly Buffer[]): number;
}

interface Journal {
  offset: number;
  /** An incomplete last line, kept until its newline arrives. */
  tail: string;
}

/** The tier in a directory shared by processes: own journal appended, the others' read forward. */
export class DirectoryL3Store implements L3Store {
  readonly #dir: string;
  readonly #own: string;
  readonly #keys = new Set<string>();
  readonly #journals = new Map<string, Journal>();

  constructor(dir: string) {
    mkdirSync(dir, { recursive: true });
    this.#dir = dir;
    this.#own = `sim-l3-${process.pid}-${journalsOpened++}${JOURNAL_SUFFIX}`;
    this.#journals.set(this.#own, { offset: 0, tail: '' });
    this.#refresh();
  }

  get directory(): string {
    return this.#dir;
  }

  get pages(): number {
    this.#refresh();
    return this.#keys.size;
  }

  leadingRun(keys: readonly Buffer[]): number {
    if (keys.length === 0) return 0;
    this.#refresh();
    let n = 0;
    while (n < keys.length && this.#keys.has(keyText(keys[n] as Buffer))) n++;
    return n;
  }

  write(keys: readonly Buffer[]): number {
    const fresh = keys.map(keyText).filter((k) => !this.#keys.has(k));
    if (fresh.length === 0) return 0;
    for (const k of fresh) this.#keys.add(k);
    // Our own journal is never read back: what we wrote is in the set already.
    appendFileSync(join(this.#dir, this.#own), fresh.join('\n') + '\n');
    return fresh.length;
  }

  /** Read every other journal in the directory from where it was last read. */
  #refresh(): void {
    for (const name of readdirSync(this.#dir)) {
      if (!name.endsWith(JOURNAL_SUFFIX) || name === this.#own) continue;
      let j = this.#journals.get(name);
      if (!j) this.#journals.set(name, (j = { offset: 0, tail: '' }));
      this.#readForward(name, j);
    }
  }

  #readForward(name: string, j: Journal): void {
    let fd: number;
    try {
      fd = openSync(join(this.#dir, name), 'r');
    } catch {
      return; // removed by an admin: what it held stays known, as a file cache would have loaded it
    }
    try {
      const size = fstatSync(fd).size;
      if (size <= j.offset) return;
      const buf = Buffer.alloc(size - j.offset);
      const read = readSync(fd, buf, 0, buf.length, j.offset);
      j.offset += read;
      const text = j.tail + buf.toString('latin1', 0, read);
      const lines = text.split('\n');
      j.tail = lines.pop() ?? '';
      for (const l of lines) if (l !== '') this.#keys.add(l);
    } finally {
      closeSync(fd);
    }
  }
}

const openStores = new Map<string, DirectoryL3Store>();

/** The store of `dir`, one per directory in a process: in-process simulators share it directly. */
export function openL3Store(dir: string): DirectoryL3Store {
  const key = resolve(dir);
  let store = openStores.get(key);
  if (!store) openStores.set(key, (store = new DirectoryL3Store(key)));
  return store;
}

/**
 * Where a server's `file` tier lives, as HiCacheFile resolves it: the env
 * SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR, else the extra config's `file_storage_path`. SGLang
 * then falls back to /tmp/hicache; the simulator keeps no tier instead (null), so simulators
 * of unrelated tests on one machine never share pages by accident.
 */
export function resolveL3Directory(
  backend: string | null | undefined,
  extraConfig: string | null | undefined,
  env: Readonly<Record<string, string | undefined>> | undefined,
): string | null {
  if (backend !== 'file') return null;
  const fromEnv = env?.['SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR'];
  if (fromEnv) return fromEnv;
  if (extraConfig && extraConfig.trim().startsWith('{')) {
    try {
      const path = (JSON.parse(extraConfig) as Record<string, unknown>)['file_storage_path'];
      if (typeof path === 'string' && path !== '') return path;
    } catch {
      return null; // SGLang refuses a malformed extra config at start; the flag checks say so
    }
  }
  return null;
}
