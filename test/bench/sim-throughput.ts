// Simulator throughput: how many tiny /generate requests one simulator
// process serves a second on one core.
//
//   node test/bench/sim-throughput.ts [--seconds 10] [--concurrency 64] [--port 31999] [--max-new-tokens 1]
//        [--sim-time-scale 100]
//
// Pins the simulator to CPU 0 and this load generator to CPU 1 with taskset
// when available, so the figure is the simulator's, not the client's.
// Prints one JSON line: {rps, requests, errors, seconds, p50_ms, p99_ms, pinned}.

import { spawn, spawnSync } from 'node:child_process';
import http from 'node:http';
import { parseArgs } from 'node:util';
import { percentile } from './replay-stats.ts';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '64' },
    port: { type: 'string', default: '31999' },
    'max-new-tokens': { type: 'string', default: '1' },
    'sim-time-scale': { type: 'string', default: '100' },
  },
});
const seconds = Number(values.seconds);
const concurrency = Number(values.concurrency);
const port = Number(values.port);

const hasTaskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
if (hasTaskset) spawnSync('taskset', ['-pc', '1', String(process.pid)]);
const simArgs = [
  'test/sim/main.ts',
  '--model-path',
  'bench/tiny',
  '--port',
  String(port),
  '--sim-time-scale',
  values['sim-time-scale'] ?? '100',
];
const sim = hasTaskset
  ? spawn('taskset', ['-c', '0', process.execPath, ...simArgs], { stdio: 'ignore' })
  : spawn(process.execPath, simArgs, { stdio: 'ignore' });

const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
const body = JSON.stringify({
  text: 'hi',
  sampling_params: { max_new_tokens: Number(values['max-new-tokens']) },
});

function once(path = '/generate', payload = body): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0));
    req.end(payload);
  });
}

async function waitReady(): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if ((await once()) === 200) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('simulator did not start');
}

async function main(): Promise<void> {
  await waitReady();
  // Warm up, then measure.
  const run = async (ms: number, latencies: number[] | null): Promise<{ ok: number; errors: number }> => {
    const end = performance.now() + ms;
    let ok = 0;
    let errors = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < end) {
          const t = performance.now();
          const status = await once();
          if (status === 200) ok++;
          else errors++;
          latencies?.push(performance.now() - t);
        }
      }),
    );
    return { ok, errors };
  };
  await run(1000, null);
  const latencies: number[] = [];
  const t0 = performance.now();
  const { ok, errors } = await run(seconds * 1000, latencies);
  const elapsed = (performance.now() - t0) / 1000;
  console.log(
    JSON.stringify({
      rps: Number((ok / elapsed).toFixed(0)),
      requests: ok,
      errors,
      seconds: Number(elapsed.toFixed(2)),
      concurrency,
      p50_ms: Number(percentile(latencies, 50).toFixed(2)),
      p99_ms: Number(percentile(latencies, 99).toFixed(2)),
      pinned: hasTaskset,
    }),
  );
}

try {
  await main();
} finally {
  sim.kill('SIGTERM');
  agent.destroy();
}
