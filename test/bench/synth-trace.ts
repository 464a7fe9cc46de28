// Write a Mooncake-format trace of a chosen shape (trace-synth.ts) as JSONL on
// stdout, for `make bench VIRTUAL=1 ARGS='--trace FILE'`:
//
//   node test/bench/synth-trace.ts --arrivals poisson|bursts|mixed --sharing sessions|templates
//        [--n 2000] [--seed 1] [--rate 20] [--mean-burst 8] [--prefix-blocks 4] [--prefixes 4]
//        [--mean-new-blocks 3] [--mean-output 300] [--open-sessions 48] [--max-turns 8]

import { parseArgs } from 'node:util';
import { z } from 'zod';
import { createRng } from '../support/gateway/rng.ts';
import { SYNTH_DEFAULTS, synthTrace } from './trace-synth.ts';

const { values } = parseArgs({
  options: {
    arrivals: { type: 'string', default: SYNTH_DEFAULTS.arrivals },
    sharing: { type: 'string', default: SYNTH_DEFAULTS.sharing },
    n: { type: 'string', default: String(SYNTH_DEFAULTS.n) },
    seed: { type: 'string', default: '1' },
    rate: { type: 'string', default: String(SYNTH_DEFAULTS.rate) },
    'mean-burst': { type: 'string', default: String(SYNTH_DEFAULTS.meanBurst) },
    'prefix-blocks': { type: 'string', default: String(SYNTH_DEFAULTS.prefixBlocks) },
    prefixes: { type: 'string', default: String(SYNTH_DEFAULTS.prefixes) },
    'mean-new-blocks': { type: 'string', default: String(SYNTH_DEFAULTS.meanNewBlocks) },
    'mean-output': { type: 'string', default: String(SYNTH_DEFAULTS.meanOutput) },
    'open-sessions': { type: 'string', default: String(SYNTH_DEFAULTS.openSessions) },
    'max-turns': { type: 'string', default: String(SYNTH_DEFAULTS.maxTurns) },
  },
});

const Positive = z.coerce.number().positive();
const Count = z.coerce.number().int().min(1);
const Flags = z.object({
  arrivals: z.enum(['poisson', 'bursts', 'mixed']),
  sharing: z.enum(['sessions', 'templates']),
  n: Count,
  seed: z.coerce.number().int(),
  rate: Positive,
  'mean-burst': z.coerce.number().min(2),
  'prefix-blocks': z.coerce.number().int().min(0),
  prefixes: Count,
  'mean-new-blocks': Positive,
  'mean-output': Positive,
  'open-sessions': Count,
  'max-turns': Count,
});
const flags = Flags.safeParse(values);
if (!flags.success) {
  const issue = flags.error.issues[0];
  console.error(`synth-trace: --${issue?.path.join('.') ?? '?'}: ${issue?.message ?? 'invalid'}`);
  process.exit(2);
}
const f = flags.data;
const records = synthTrace(createRng(f.seed), {
  n: f.n,
  arrivals: f.arrivals,
  sharing: f.sharing,
  rate: f.rate,
  meanBurst: f['mean-burst'],
  prefixBlocks: f['prefix-blocks'],
  prefixes: f.prefixes,
  meanNewBlocks: f['mean-new-blocks'],
  meanOutput: f['mean-output'],
  openSessions: f['open-sessions'],
  maxTurns: f['max-turns'],
});
process.stdout.write(records.map((r) => JSON.stringify(r)).join('\n') + '\n');
