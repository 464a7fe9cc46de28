// Folders import one way. A cycle between two folders (a imports b, b imports a, directly or
// through others) means neither can be read, moved or tested without the other, so the
// folder map no longer shows the layering. The project references hold the direction between
// libraries and programs; this test holds it between the folders inside them.
//
// The graph: every production .ts file (tests excluded: a test may reach across its own
// folder's neighbours without making production code depend on them) under the roots below;
// an edge from a file's folder to the folder of each file it names in a static `import` or
// `export ... from` (`import type` included), relative or through the package.json subpath
// imports (#api, #sglang/, #kube/).
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
const ROOTS = ['lib', 'operator/src', 'gateway/src', 'fetcher/src', 'test/sim'];
const SUBPATH_IMPORTS: readonly (readonly [prefix: string, folder: string])[] = [
  ['#api/', 'lib/api/'],
  ['#sglang/', 'lib/sglang/'],
  ['#kube/', 'lib/kube/'],
];

/** One folder-to-folder edge, with a file import that makes it (for the failure message). */
interface Edge {
  readonly to: string;
  readonly via: string;
}

function productionFiles(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.test.ts'))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

/** The specifiers of `file`'s static imports and re-exports. */
function staticSpecifiers(source: string): string[] {
  const sf = ts.createSourceFile('probe.ts', source, ts.ScriptTarget.Latest, false);
  const specifiers: string[] = [];
  for (const statement of sf.statements) {
    if (
      (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) &&
      statement.moduleSpecifier &&
      ts.isStringLiteral(statement.moduleSpecifier)
    ) {
      specifiers.push(statement.moduleSpecifier.text);
    }
  }
  return specifiers;
}

/** The repository-relative file `specifier` names from `file`, or undefined for a package. */
function resolveSpecifier(file: string, specifier: string): string | undefined {
  if (specifier === '#api') return 'lib/api/index.ts';
  for (const [prefix, folder] of SUBPATH_IMPORTS) {
    if (specifier.startsWith(prefix)) return folder + specifier.slice(prefix.length);
  }
  if (specifier.startsWith('.')) return relative(ROOT, resolve(ROOT, dirname(file), specifier));
  return undefined;
}

/** Folder -> the other folders its files import. */
function folderGraph(files: readonly string[], read: (file: string) => string): Map<string, Edge[]> {
  const graph = new Map<string, Edge[]>();
  for (const file of files) {
    const from = dirname(file);
    const edges = graph.get(from) ?? [];
    graph.set(from, edges);
    for (const specifier of staticSpecifiers(read(file))) {
      const target = resolveSpecifier(file, specifier);
      if (target === undefined) continue;
      const to = dirname(target);
      if (to !== from && !edges.some((e) => e.to === to)) edges.push({ to, via: `${file} -> ${target}` });
    }
  }
  return graph;
}

/** Each cycle as the folders on it, first folder repeated last, with the import behind each step. */
function folderCycles(graph: ReadonlyMap<string, readonly Edge[]>): string[] {
  const cycles: string[] = [];
  for (const component of stronglyConnected(graph)) {
    if (component.length < 2) continue;
    cycles.push(describeCycle(graph, new Set(component)));
  }
  return cycles;
}

/** Tarjan's strongly connected components; every component of two or more folders holds a cycle. */
function stronglyConnected(graph: ReadonlyMap<string, readonly Edge[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const { to } of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node)!, index.get(to)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string | undefined;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    components.push(component.sort());
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return components;
}

/** One shortest cycle through the component's first folder, written step by step. */
function describeCycle(graph: ReadonlyMap<string, readonly Edge[]>, component: ReadonlySet<string>): string {
  const start = [...component][0]!;
  const cameFrom = new Map<string, { from: string; edge: Edge }>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const edge of graph.get(node) ?? []) {
      if (!component.has(edge.to) || cameFrom.has(edge.to)) continue;
      cameFrom.set(edge.to, { from: node, edge });
      if (edge.to === start) queue.length = 0;
      else queue.push(edge.to);
    }
  }
  const steps: string[] = [];
  let node = start;
  do {
    const step = cameFrom.get(node)!;
    steps.unshift(`  ${step.from} -> ${node}  (${step.edge.via})`);
    node = step.from;
  } while (node !== start);
  return `cycle through ${[...component].join(', ')}:\n${steps.join('\n')}`;
}

describe('folder cycles', () => {
  it('finds a cycle between two folders and names the imports that make it', () => {
    const sources: Record<string, string> = {
      'a/x.ts': "import type { Y } from '../b/y.ts';\n",
      'b/y.ts': "export { x } from '../a/x.ts';\n",
      'c/z.ts': "import { x } from '../a/x.ts';\nimport { api } from '#api';\n",
    };
    const cycles = folderCycles(folderGraph(Object.keys(sources), (f) => sources[f]!));
    expect(cycles).toEqual([
      'cycle through a, b:\n  a -> b  (a/x.ts -> b/y.ts)\n  b -> a  (b/y.ts -> a/x.ts)',
    ]);
  });

  it('resolves the subpath imports to the library folders', () => {
    expect(resolveSpecifier('gateway/src/app.ts', '#api')).toBe('lib/api/index.ts');
    expect(resolveSpecifier('gateway/src/app.ts', '#kube/informer.ts')).toBe('lib/kube/informer.ts');
    expect(resolveSpecifier('gateway/src/app.ts', '#sglang/salt.ts')).toBe('lib/sglang/salt.ts');
    expect(resolveSpecifier('gateway/src/a/b.ts', '../c.ts')).toBe('gateway/src/c.ts');
    expect(resolveSpecifier('gateway/src/app.ts', 'fastify')).toBeUndefined();
  });

  const files = ROOTS.flatMap(productionFiles);
  const read = (f: string) => readFileSync(join(ROOT, f), 'utf8');

  it('no two folders of the libraries and programs import each other', () => {
    const cycles = folderCycles(folderGraph(files, read));
    expect(cycles, `folder cycles:\n${cycles.join('\n')}`).toEqual([]);
  });
});
