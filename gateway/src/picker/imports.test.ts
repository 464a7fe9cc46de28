// The picker is the routing decision without a transport: a second front end
// (an Envoy ext_proc server) will call it, so nothing it reaches, through any
// chain of imports, type-only ones included, may be fastify or undici.
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const FORBIDDEN = /^(fastify|@fastify\/|undici)/;

/** `#api/x.ts` and the like, as package.json's `imports` map them. */
function resolveAlias(spec: string): string | undefined {
  if (spec === '#api') return join(ROOT, 'lib/api/index.ts');
  const m = /^#(api|sglang|kube)\/(.+)$/.exec(spec);
  return m ? join(ROOT, 'lib', m[1] as string, m[2] as string) : undefined;
}

/** Every package each file reachable from `entry` imports, with the chain that reaches it. */
function collectPackages(entry: string): Map<string, string[]> {
  const packages = new Map<string, string[]>();
  const seen = new Set<string>();
  const walk = (file: string, chain: string[]): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    for (const { fileName: spec } of info.importedFiles) {
      const next = spec.startsWith('.') ? resolve(dirname(file), spec) : resolveAlias(spec);
      if (next) walk(next, [...chain, next.slice(ROOT.length + 1)]);
      else if (!packages.has(spec)) packages.set(spec, chain);
    }
  };
  walk(entry, [entry.slice(ROOT.length + 1)]);
  return packages;
}

describe('the picker', () => {
  it('reaches neither fastify nor undici through its imports', () => {
    const packages = collectPackages(join(ROOT, 'gateway/src/picker/pick.ts'));
    const forbidden = [...packages].filter(([name]) => FORBIDDEN.test(name));
    expect(forbidden.map(([name, chain]) => `${name} via ${chain.join(' -> ')}`)).toEqual([]);
    // The walk itself works: the picker does use zod (request/shape.ts).
    expect(packages.has('zod')).toBe(true);
  });
});
