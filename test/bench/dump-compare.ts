// Two rows' per-request dumps (bench-tier-virtual.ts --dump-requests) read against each other,
// request by request (request-dump.ts): B's TTFT median against A's, the requests that moved it
// (under A's median in A, over it in B) by cause and by the rule that placed them, and what the
// deciding replica knew of the runtime it chose against the tier's truth then. With --line-ms,
// each row's requests over that TTFT line by cause (findOverLine): those too long to prefill
// under it alone at --prefill-tps, the waiting hits, the misses.
//
//   node test/bench/dump-compare.ts A.jsonl B.jsonl [--min-ms 1] [--show 10] [--line-ms MS] [--prefill-tps 8000]

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  compareRequests,
  findOverLine,
  groupSlower,
  medianCrossers,
  parseDump,
  summarizeViews,
  viewGapOf,
  type CauseGroup,
  type DumpLine,
  type RequestDelta,
} from './request-dump.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'min-ms': { type: 'string', default: '1' },
    show: { type: 'string', default: '10' },
    'line-ms': { type: 'string' },
    'prefill-tps': { type: 'string', default: '8000' },
  },
});

function load(file: string): DumpLine[] {
  const parsed = parseDump(readFileSync(file, 'utf8'));
  if (!parsed.ok) {
    console.error(`dump-compare: ${file}: ${parsed.error}`);
    process.exit(2);
  }
  return parsed.lines;
}

const [fileA, fileB] = positionals;
if (fileA === undefined || fileB === undefined) {
  console.error(
    'usage: dump-compare.ts A.jsonl B.jsonl [--min-ms 1] [--show 10] [--line-ms MS] [--prefill-tps 8000]',
  );
  process.exit(2);
}
const a = load(fileA);
const b = load(fileB);
const byIndexA = new Map(a.map((l) => [l.i, l]));
const byIndexB = new Map(b.map((l) => [l.i, l]));
const deltas = compareRequests(a, b);
const minMs = Number(values['min-ms']);
const f0 = (x: number): string => x.toFixed(0);
const groups = (title: string, gs: readonly CauseGroup[]): string[] => [
  title,
  ...gs.map((g) => `  ${g.cause.padEnd(40)} ${String(g.count).padStart(5)}  +${f0(g.addedMs)} ms`),
];
const tally = (xs: readonly string[]): string =>
  [...xs.reduce((m, x) => m.set(x, (m.get(x) ?? 0) + 1), new Map<string, number>())]
    .sort((x, y) => y[1] - x[1])
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
const mean = (xs: readonly number[]): number => xs.reduce((s, x) => s + x, 0) / Math.max(1, xs.length);

const { medianA, medianB, up, down } = medianCrossers(deltas);
const views = (name: string, lines: readonly DumpLine[]): string => {
  const v = summarizeViews(lines);
  return `${name}: ${v.decisions} decisions, ${v.sameInstant} at an instant another request arrived at; chosen runtime had backlog the replica did not know of: ${v.unseen} (${v.unseenSameInstant} at a shared instant); not the cheapest by the truth: ${v.misPicks} (${v.misPicksSameInstant} at a shared instant)`;
};
const upLines = up.map((d) => byIndexB.get(d.i) as DumpLine);
const gaps = upLines.map(viewGapOf);
const lines = [
  `A ${fileA}\nB ${fileB}`,
  `${deltas.length} requests in both; TTFT p50 A ${f0(medianA)} ms, B ${f0(medianB)} ms (${(medianB / medianA).toFixed(3)}x)`,
  `slower in B by > ${minMs} ms: ${deltas.filter((d) => d.delta > minMs).length}, faster: ${deltas.filter((d) => d.delta < -minMs).length}`,
  ...groups(
    `slower in B, by cause (runtime against A's, hit, the part that grew most):`,
    groupSlower(deltas, minMs),
  ),
  views('A', a),
  views('B', b),
  `crossed A's median: ${up.length} up, ${down.length} down (B's median moves up by the difference)`,
  ...groups(`  up, by cause:`, groupSlower(up, 0)),
  `  up, prefilled in B with a request that reached another replica at the same instant: ${up.filter((d) => d.sameInstantMates > 0).length} (down: ${down.filter((d) => d.sameInstantMates > 0).length}; all slower by > ${minMs} ms: ${deltas.filter((d) => d.delta > minMs && d.sameInstantMates > 0).length}, all faster: ${deltas.filter((d) => d.delta < -minMs && d.sameInstantMates > 0).length})`,
  `  up, the rule that placed them in B: ${tally(upLines.map((l) => l.reason ?? '(none)'))}`,
  `  up, on the runtime it chose the replica did not know of: backlog ${f0(mean(gaps.map((g) => g.unseenBacklog)))} tokens, in flight ${mean(gaps.map((g) => g.unseenInFlight)).toFixed(2)} (means); cheapest by the truth too: ${gaps.filter((g) => g.cheapestByTruth).length} of ${gaps.length}`,
  `  up, the most delayed (index: A -> B ms; hold/queue/batch delta; runtime A -> B; cached A -> B; batch size A -> B; rule):`,
  ...[...up]
    .sort((x, y) => y.delta - x.delta)
    .slice(0, Number(values.show))
    .map((d: RequestDelta) => {
      const la = byIndexA.get(d.i) as DumpLine;
      const lb = byIndexB.get(d.i) as DumpLine;
      return `    ${d.i}: ${f0(d.ttftA)} -> ${f0(d.ttftB)}; ${f0(d.holdDelta)}/${f0(d.queueDelta)}/${f0(d.batchDelta)}; ${la.runtime} -> ${lb.runtime}; ${la.cachedTokens} -> ${lb.cachedTokens}; ${d.batchSizeA} -> ${d.batchSizeB}; ${lb.reason ?? '-'}`;
    }),
];
const lineMs = values['line-ms'] === undefined ? undefined : Number(values['line-ms']);
const overLine = (name: string, rows: readonly DumpLine[], ms: number): string[] => {
  const over = findOverLine(rows, ms, Number(values['prefill-tps']) / 1000);
  return [
    `${name}: over ${f0(ms)} ms: ${over.length} (${tally(over.map((o) => o.cause))})`,
    ...over
      .filter((o) => o.cause !== 'too-long')
      .slice(0, Number(values.show))
      .map(
        (o) =>
          `    ${o.i}: ${o.cause}, TTFT ${f0(o.ttftMs)} ms, ${o.uncached} uncached, queued ${f0(o.queueMs)} ms`,
      ),
  ];
};
if (lineMs !== undefined) lines.push(...overLine('A', a, lineMs), ...overLine('B', b, lineMs));
console.log(lines.join('\n'));
