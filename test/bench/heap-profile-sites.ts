// Where a sampling heap profile's bytes were allocated, a request: for the profiles
// bench-picker-alloc writes (CACHEROUTE_ALLOC_PROBE_PROFILE=DIR, alloc-probe.ts). Each sampled
// allocation is put on its allocating frame and on the nearest frame of the gateway's own code
// in its stack (gateway/src/...: whose request state it is), the bytes divided by the requests
// the window measured. With a second profile of the same run's code taken with every allocation
// kept (CACHEROUTE_ALLOC_PROBE_HEAP unset), each site's share that outlived the scavenges: a share
// near 1 is state a request leaves behind; near the noise (the young objects live at the
// window's end, ~3%) it is garbage.
//
//   node test/bench/heap-profile-sites.ts PROMOTED.heapprofile [--all ALL.heapprofile]
//        [--requests 10000] [--top 30]

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { z } from 'zod';

interface ProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly ProfileNode[];
}

const ProfileNodeSchema: z.ZodType<ProfileNode> = z.lazy(() =>
  z.object({
    callFrame: z.object({ functionName: z.string(), url: z.string(), lineNumber: z.number() }),
    selfSize: z.number(),
    children: z.array(ProfileNodeSchema),
  }),
);
const ProfileSchema = z.object({ head: ProfileNodeSchema });

const OWN_CODE = '/gateway/src/';

function frameName(f: ProfileNode['callFrame']): string {
  const where = f.url.replace(/^.*\/(gateway|node_modules|test|lib)\//, '$1/');
  return `${f.functionName || '(anonymous)'} ${where}:${f.lineNumber + 1}`;
}

/** Bytes by "nearest own frame <= allocating frame" (the estimate V8 scales each sample to). */
export function bytesBySite(head: ProfileNode): Map<string, number> {
  const out = new Map<string, number>();
  const walk = (node: ProfileNode, own: string | undefined): void => {
    const here = node.callFrame.url.includes(OWN_CODE) ? frameName(node.callFrame) : own;
    if (node.selfSize > 0) {
      const site = `${here ?? '-'} <= ${frameName(node.callFrame)}`;
      out.set(site, (out.get(site) ?? 0) + node.selfSize);
    }
    for (const child of node.children) walk(child, here);
  };
  walk(head, undefined);
  return out;
}

function readProfile(file: string): ProfileNode {
  return ProfileSchema.parse(JSON.parse(readFileSync(file, 'utf8'))).head;
}

function main(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      all: { type: 'string' },
      requests: { type: 'string', default: '10000' },
      top: { type: 'string', default: '30' },
    },
  });
  const file = positionals[0];
  const requests = Number(values.requests);
  const top = Number(values.top);
  if (file === undefined || !(requests > 0) || !(top > 0)) {
    process.stderr.write('heap-profile-sites: PROFILE [--all PROFILE] [--requests N] [--top N]\n');
    process.exit(2);
  }
  const sites = bytesBySite(readProfile(file));
  const all = values.all === undefined ? undefined : bytesBySite(readProfile(values.all));
  let total = 0;
  for (const bytes of sites.values()) total += bytes;
  process.stdout.write(`${(total / requests).toFixed(0)} B a request in all\n`);
  process.stdout.write(all ? '  B/req  all B/req  share  site\n' : '  B/req  site\n');
  for (const [site, bytes] of [...sites].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    const perRequest = (bytes / requests).toFixed(0).padStart(7);
    const allBytes = all?.get(site);
    const share =
      all === undefined
        ? ''
        : ` ${((allBytes ?? 0) / requests).toFixed(0).padStart(9)}  ${allBytes ? (bytes / allBytes).toFixed(2) : '-'.padStart(4)}`;
    process.stdout.write(`${perRequest}${share}  ${site}\n`);
  }
}

main();
