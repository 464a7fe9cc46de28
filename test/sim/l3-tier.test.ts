import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { VirtualClock } from './clock.ts';
import { Engine, type EngineConfig, type RequestResult } from './engine.ts';
import { DirectoryL3Store, type L3Store } from './l3-store.ts';

const PAGE = 16;
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const newDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'sim-l3-test-'));
  dirs.push(d);
  return d;
};

function server(store: L3Store | null, hostCapacity = 8192) {
  const cfg: EngineConfig = {
    maxRunningRequests: 16,
    maxTotalTokens: 4096,
    maxPrefillTokens: 16_384,
    pageSize: PAGE,
    radixCache: true,
    hostCapacity,
    writePolicy: 'write_through',
    prefillTps: 8000,
    hostLoadTps: 200_000,
    decodeBaseMs: 6,
    decodePerReqMs: 0.35,
    l3: store ? { store, servedModel: 'tiny', loadTps: 80_000, backendName: 'HiCacheFile' } : null,
  };
  const clock = new VirtualClock();
  const engine = new Engine(cfg, clock);
  let n = 0;
  const run = (prompt: readonly number[], namespace = ''): RequestResult => {
    let out: RequestResult | undefined;
    engine.submit(
      { rid: `r${n++}`, namespace, promptIds: prompt, outputIds: [1] },
      { onTokens: () => undefined, onFinish: (r) => (out = r) },
    );
    clock.runAll();
    if (!out) throw new Error('did not finish');
    return out;
  };
  return { engine, run };
}

const prompt = (len: number, from = 1): number[] => Array.from({ length: len }, (_, i) => from + i);
/** SGLang computes the last token: a prompt's cacheable pages. */
const cacheable = (len: number): number => Math.floor((len - 1) / PAGE) * PAGE;

describe('the shared L3 tier (HiCache file backend)', () => {
  it('B loads from L3 what A computed and wrote through; a load costs less than recomputing', () => {
    const dir = newDir();
    const a = server(new DirectoryL3Store(dir));
    const b = server(new DirectoryL3Store(dir)); // another process's store: journals in one directory
    const p = prompt(1000);
    const onA = a.run(p);
    expect(onA.cachedTokens).toBe(0);
    expect(readdirSync(dir).some((f) => f.endsWith('.journal'))).toBe(true);
    const onB = b.run(p);
    expect(onB).toMatchObject({ cachedDevice: 0, cachedHost: 0, cachedStorage: cacheable(1000) });
    expect(onB.cachedTokens).toBe(cacheable(1000));
    expect(onB.ttftMs).toBeLessThan(onA.ttftMs);
    // 992 tokens at 80,000 tok/s and 8 computed at 8,000 tok/s.
    expect(onB.ttftMs).toBeCloseTo((992 / 80_000 + 8 / 8000) * 1000, 6);
  });

  it('keeps tenants apart: another cache_salt finds nothing in L3', () => {
    const dir = newDir();
    const a = server(new DirectoryL3Store(dir));
    const b = server(new DirectoryL3Store(dir));
    a.run(prompt(1000), 'tenant-a');
    expect(b.run(prompt(1000), 'tenant-b').cachedTokens).toBe(0);
    expect(b.run(prompt(1000), 'tenant-a').cachedStorage).toBe(cacheable(1000));
  });

  it('survives /flush_cache: the flushed server loads its own prefix back from L3', () => {
    const s = server(new DirectoryL3Store(newDir()));
    s.run(prompt(600));
    expect(s.engine.flushCache()).toBe(true);
    expect(s.run(prompt(600))).toMatchObject({
      cachedDevice: 0,
      cachedHost: 0,
      cachedStorage: cacheable(600),
    });
  });

  it('loads only a leading run past the device and host match, and nothing under 256 tokens', () => {
    const dir = newDir();
    const a = server(new DirectoryL3Store(dir));
    const b = server(new DirectoryL3Store(dir));
    // A holds a 512-token prefix; B shares its first 128 tokens itself.
    a.run(prompt(513));
    b.run(prompt(129));
    const onB = b.run(prompt(1000));
    expect(onB).toMatchObject({ cachedDevice: 128, cachedHost: 0, cachedStorage: 512 - 128 });
    // A run of 240 tokens in L3 is below SGLang's prefetch threshold: computed.
    a.run(prompt(241, 5000));
    expect(b.run(prompt(600, 5000)).cachedTokens).toBe(0);
  });

  it('writes only what the host tier backs up: no host tier, nothing in L3', () => {
    const dir = newDir();
    const a = server(new DirectoryL3Store(dir), 0);
    a.run(prompt(1000));
    const b = server(new DirectoryL3Store(dir));
    expect(b.run(prompt(1000)).cachedTokens).toBe(0);
  });
});
