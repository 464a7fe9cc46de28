// `make render FILE=<manifest> [ARGS='operator flags']`: prints, without a cluster, the
// objects the operator would apply for each cacheroute resource in the file. The
// operator's own flags decide what else it makes (--runtime-network-policy and its
// --runtime-ingress-* peers: a NetworkPolicy per Deployment), so they are taken here too.
import { readFileSync } from 'node:fs';
import { parseAllDocuments, stringify } from 'yaml';
import { renderManifest } from '../controllers/deployment/render.ts';
import { hostPathRootsOf, parseFlags, runtimeIngressOf } from '../main.ts';

const [file, ...operatorArgs] = process.argv.slice(2);
if (!file) {
  process.stderr.write(
    'usage: render <manifest.yaml> [operator flags, e.g. --runtime-network-policy=true ...]\n',
  );
  process.exit(2);
}
const flags = parseFlags(operatorArgs);
if (!flags.ok) {
  process.stderr.write(`render: ${flags.error}\n`);
  process.exit(2);
}
const runtimeIngress = runtimeIngressOf(flags.value);
let failed = false;
const out: string[] = [];
for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
  const result = renderManifest(doc.toJS(), {
    runtimeIngress,
    hostPathRoots: hostPathRootsOf(flags.value),
    nodeCacheRoot: flags.value['model-cache-node-root'],
  });
  if (!result.ok) {
    failed = true;
    for (const i of result.issues) process.stderr.write(`${file}: ${result.name}: ${i.path}: ${i.message}\n`);
    continue;
  }
  for (const obj of result.objects) out.push(stringify(obj, { lineWidth: 0, aliasDuplicateObjects: false }));
}
process.stdout.write(out.map((o) => `---\n${o}`).join(''));
process.exit(failed ? 1 : 0);
