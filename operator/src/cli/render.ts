// `make render FILE=<manifest>`: prints, without a cluster, the objects the
// operator would apply for each cacheroute resource in the file.
import { readFileSync } from 'node:fs';
import { parseAllDocuments, stringify } from 'yaml';
import { renderManifest } from '../controllers/deployment/render.ts';

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: render <manifest.yaml>\n');
  process.exit(2);
}
let failed = false;
const out: string[] = [];
for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
  const result = renderManifest(doc.toJS());
  if (!result.ok) {
    failed = true;
    for (const i of result.issues) process.stderr.write(`${file}: ${result.name}: ${i.path}: ${i.message}\n`);
    continue;
  }
  for (const obj of result.objects) out.push(stringify(obj, { lineWidth: 0, aliasDuplicateObjects: false }));
}
process.stdout.write(out.map((o) => `---\n${o}`).join(''));
process.exit(failed ? 1 : 0);
