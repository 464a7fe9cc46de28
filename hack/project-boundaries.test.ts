// The import direction (shared library -> programs -> tests) is held by the compiler: each
// library and program is a TypeScript project that lists only its own files and references
// only what it may import (ADR 0021), so an import that runs the wrong way is TS6307 in
// `tsc -b`. Each case compiles one probe file, in memory, as part of a real project: that
// loads the whole project, seconds on a quiet machine and more on a busy one.
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');

/** The diagnostics of `source`, compiled as `file` inside `project`'s own tsconfig.json. */
function compileProbe(project: string, file: string, source: string): string[] {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, project, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  if (!parsed) throw new Error(`${project}/tsconfig.json did not parse`);
  const probe = join(ROOT, file);
  const host = ts.createCompilerHost(parsed.options);
  const fileExists = host.fileExists.bind(host);
  const readFile = host.readFile.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  host.fileExists = (f) => f === probe || fileExists(f);
  host.readFile = (f) => (f === probe ? source : readFile(f));
  host.getSourceFile = (f, lang, ...rest) =>
    f === probe ? ts.createSourceFile(f, source, lang) : getSourceFile(f, lang, ...rest);
  const program = ts.createProgram({
    rootNames: [...parsed.fileNames, probe],
    options: parsed.options,
    host,
    ...(parsed.projectReferences ? { projectReferences: parsed.projectReferences } : {}),
  });
  const sf = program.getSourceFile(probe);
  if (!sf) throw new Error(`${file} is not in the program`);
  return program.getSemanticDiagnostics(sf).map((d) => `TS${d.code}`);
}

describe('project boundaries', () => {
  it.each([
    ['gateway', 'gateway/src/probe.ts', '../../operator/src/operator.ts', 'the gateway imports the operator'],
    ['lib/api', 'lib/api/probe.ts', '../../gateway/src/app.ts', 'the library imports a program'],
    ['lib/sglang', 'lib/sglang/probe.ts', '#api/resources.ts', 'the SGLang contract imports the API'],
    [
      'operator',
      'operator/src/probe.ts',
      '../../test/support/kubectl.ts',
      'production code imports a test helper',
    ],
    ['test/sim', 'test/sim/probe.ts', '#kube/client.ts', 'the simulator imports the Kubernetes kit'],
  ])(
    '%s refuses an import the wrong way (%s -> %s: %s)',
    (project, file, target) => {
      const diagnostics = compileProbe(project, file, `export * from '${target}';\n`);
      expect(diagnostics).toContain('TS6307');
    },
    60_000,
  );

  it('a program imports the shared library by name', () => {
    const source =
      "export { GROUP } from '#api/resources.ts';\nexport { formatKey } from '#kube/objects.ts';\n";
    // TS6305 only says the library's declarations are not built yet (`tsc -b` builds them).
    const diagnostics = compileProbe('gateway', 'gateway/src/probe.ts', source);
    expect(diagnostics.filter((code) => code !== 'TS6305')).toEqual([]);
  }, 60_000);
});
