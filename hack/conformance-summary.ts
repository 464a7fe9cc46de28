// The last line of `make conformance`: the conformance suites' counts summed
// into one JSON line. Exits 1 when a key every run must report is missing or
// when SGLang and cacheroute disagree anywhere.
import { CONFORMANCE_KEYS, sumConformance } from '../test/support/conformance-report.ts';

const dir = process.argv[2];
if (!dir) {
  process.stderr.write('usage: conformance-summary.ts <report dir>\n');
  process.exit(2);
}
const total = sumConformance(dir);
const line = Object.fromEntries(CONFORMANCE_KEYS.map((k) => [k, total[k] ?? null]));
process.stdout.write(JSON.stringify(line) + '\n');
const missing = CONFORMANCE_KEYS.filter((k) => total[k] === undefined);
const failing = (
  [
    'disagreements',
    'catalogue_drift',
    'differential_mismatches',
    'pd_differential_mismatches',
    'l3_differential_mismatches',
  ] as const
).filter((k) => (total[k] ?? 0) > 0);
if (missing.length > 0) process.stderr.write(`conformance: no suite reported ${missing.join(', ')}\n`);
if (failing.length > 0) process.stderr.write(`conformance: non-zero ${failing.join(', ')}\n`);
process.exit(missing.length > 0 || failing.length > 0 ? 1 : 0);
