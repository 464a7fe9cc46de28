// Start a fleet of simulators, replay a trace slice round-robin over them, stop them.
//
//   node test/bench/replay-fleet.ts [--trace FILE] [--workers 4] [--n 2000] [--scale 20] [--base-port 31100]
//        [--mode chat|generate] [-- <extra simulator flags>]
//
// Without --trace, the conversation trace where default-trace.ts finds it.
//
// The simulators run with --sim-time-scale equal to --scale, so trace time and
// service time are compressed alike. Prints the replay's summary line.

import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { traceArgOrExit } from './default-trace.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    trace: { type: 'string' },
    workers: { type: 'string', default: '4' },
    n: { type: 'string', default: '2000' },
    scale: { type: 'string', default: '20' },
    'base-port': { type: 'string', default: '31100' },
    mode: { type: 'string', default: 'chat' },
  },
});
const TRACE = traceArgOrExit(values.trace, fileURLToPath(new URL('../../', import.meta.url)), 'replay-fleet');
const here = (p: string): string => fileURLToPath(new URL(p, import.meta.url));
const workers = Number(values.workers);
const basePort = Number(values['base-port']);
const scale = values.scale ?? '20';

async function waitHealthy(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${url}/health`)).status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not become healthy`);
}

const sims: ChildProcess[] = [];
try {
  const urls: string[] = [];
  for (let i = 0; i < workers; i++) {
    const port = basePort + i;
    const args = [
      '--model-path',
      'sim/llama-8b',
      '--port',
      String(port),
      '--enable-cache-report',
      '--enable-metrics',
    ];
    sims.push(
      spawn(process.execPath, [here('../sim/main.ts'), ...args, '--sim-time-scale', scale, ...positionals], {
        stdio: 'ignore',
      }),
    );
    urls.push(`http://127.0.0.1:${port}`);
  }
  await Promise.all(urls.map(waitHealthy));
  const replay = spawn(
    process.execPath,
    [
      here('replay.ts'),
      '--trace',
      TRACE,
      '--url',
      urls.join(','),
      '--n',
      values.n ?? '2000',
      '--scale',
      scale,
      '--mode',
      values.mode ?? 'chat',
    ],
    { stdio: 'inherit' },
  );
  const code = await new Promise<number>((resolve) => replay.on('exit', (c) => resolve(c ?? 1)));
  process.exitCode = code;
} finally {
  for (const s of sims) s.kill('SIGTERM');
}
