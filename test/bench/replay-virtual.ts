// Replay a trace slice through N simulator engines in virtual time (no HTTP,
// no wall clock): the model's own answer, immune to host CPU contention, to
// compare with a wall-clock replay (whose latencies x scale should match).
//
//   node test/bench/replay-virtual.ts --trace FILE [--workers 4] [--n 2000] [-- <simulator flags>]

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { VirtualClock } from '../sim/clock.ts';
import { buildEngineConfig, parseSimArgs } from '../sim/config.ts';
import { Engine, type RequestResult } from '../sim/engine.ts';
import { applyChatTemplate } from '../sim/generation.ts';
import { buildPromptText, computeBound, parseTrace } from './replay-trace.ts';
import { buildVirtualRecord, computeSummary, type RequestRecord } from './replay-stats.ts';
import { encode } from '../sim/tokenizer.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    trace: { type: 'string' },
    workers: { type: 'string', default: '4' },
    n: { type: 'string', default: '2000' },
  },
});
if (!values.trace) {
  console.error('replay-virtual: --trace is required');
  process.exit(2);
}
const cfg = parseSimArgs(['--model-path', 'sim', ...positionals]);
if (!cfg.ok) {
  console.error(`replay-virtual: ${cfg.error}`);
  process.exit(2);
}
const trace = parseTrace(readFileSync(values.trace, 'utf8'), Number(values.n));
if (!trace.ok) {
  console.error(`replay-virtual: ${trace.error}`);
  process.exit(2);
}
const clock = new VirtualClock();
const engines = Array.from(
  { length: Number(values.workers) },
  () => new Engine({ ...buildEngineConfig(cfg.value) }, clock),
);
const records: RequestRecord[] = [];
const t0 = trace.value[0]?.timestamp ?? 0;
trace.value.forEach((rec, i) => {
  clock.setTimer(rec.timestamp - t0, () => {
    const promptIds = applyChatTemplate([{ role: 'user', content: buildPromptText(rec) }]);
    const worker = i % engines.length;
    const out = Array.from({ length: Math.max(1, rec.output_length) }, () => encode(' ba')[0] ?? 0);
    engines[worker]?.submit(
      { rid: String(i), namespace: '', promptIds, outputIds: out },
      {
        onTokens: () => undefined,
        onFinish: (r: RequestResult) => records.push(buildVirtualRecord(i, `engine-${worker}`, r)),
      },
    );
  });
});
clock.runAll(Infinity);
console.log(JSON.stringify(computeSummary(records, computeBound(trace.value).hitRate, clock.now(), 1)));
