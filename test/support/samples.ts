import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const EXAMPLES_DIR = join(REPO_ROOT, 'examples');

export type Manifest = Record<string, unknown> & {
  kind: string;
  metadata: { name: string };
  spec: Record<string, unknown>;
};

/** Every document of every YAML file in examples/, with the file it came from. */
export function loadSamples(): { file: string; doc: Manifest }[] {
  return readdirSync(EXAMPLES_DIR)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .flatMap((file) =>
      parseAllDocuments(readFileSync(join(EXAMPLES_DIR, file), 'utf8')).map((d) => ({
        file,
        doc: d.toJS() as Manifest,
      })),
    );
}

export function loadSample(file: string): Manifest {
  const found = loadSamples().find((s) => s.file === file);
  if (!found) throw new Error(`no sample ${file} in examples/`);
  return structuredClone(found.doc);
}
