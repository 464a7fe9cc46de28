// A FailOpen Envoy follows its pool endpoints file: a new file renamed over it moves the fallback
// to other endpoints, with their keys, without a restart (bootstrap.ts, FailOpen part 2). The real
// Envoy 1.40, simulators started with --api-key as the runtimes, and a picker that is down: a
// port (bound on 0) whose connections are closed at once, so Envoy's health check marks it down
// and every request goes to the pool. Each simulator names itself in x-sim-worker.
import { createServer, type Server } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { startEnvoy, untilPickerMarkedDown, type RunningEnvoy } from '../../test/support/envoy.ts';
import { eventually } from '../../test/support/kubectl.ts';
import { startSim, type RunningSim } from '../../test/support/sim/testing.ts';
import { renderPoolEndpointsFile } from './bootstrap.ts';
import { replacePoolEndpointsFile } from './pool-endpoints-file.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function startDownPicker(): Promise<number> {
  const server: Server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

async function runtime(key: string): Promise<RunningSim> {
  const sim = await startSim(['--model-path', 'm', '--api-key', key]);
  cleanups.push(() => sim.close());
  return sim;
}

async function send(envoy: RunningEnvoy): Promise<{ status: number; worker: string | null }> {
  const r = await fetch(`${envoy.url}/generate`, {
    method: 'POST',
    // A tenant's key: the runtimes must never see it (Envoy overwrites it with theirs).
    headers: { 'content-type': 'application/json', authorization: 'Bearer wrong' },
    body: JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 1 } }),
  });
  await r.arrayBuffer();
  return { status: r.status, worker: r.headers.get('x-sim-worker') };
}

it('follows the pool endpoints file: new endpoints and their keys, Envoy never restarted', async () => {
  const [keyA, keyB] = ['a'.repeat(64), 'b'.repeat(64)];
  const [a, b] = await Promise.all([runtime(keyA), runtime(keyB)]);
  const [hostA, hostB] = [new URL(a.url).host, new URL(b.url).host];
  const picker = await startDownPicker();
  const envoy = await startEnvoy({
    kind: 'picker',
    pickerPort: picker,
    failOpen: { pool: [hostA], pickerHealthPort: picker, runtimeKeys: { [hostA]: keyA } },
  });
  cleanups.push(() => envoy.close());
  const file = envoy.poolEndpointsFile;
  if (file === undefined) throw new Error('a FailOpen Envoy has a pool endpoints file');
  await untilPickerMarkedDown(envoy);
  expect(await send(envoy)).toEqual({ status: 200, worker: hostA });

  // A rollout: A gone, B in with its own key. Envoy reloads the file on the rename.
  replacePoolEndpointsFile(file, renderPoolEndpointsFile([hostB], { [hostB]: keyB }));
  await eventually(async () => expect((await send(envoy)).worker).toBe(hostB), { timeoutMs: 10_000 });
  for (let i = 0; i < 3; i++) expect(await send(envoy)).toEqual({ status: 200, worker: hostB });

  // The key alone changes (a new identity's): followed too, seen as B refusing a key not its own.
  replacePoolEndpointsFile(file, renderPoolEndpointsFile([hostB], { [hostB]: 'c'.repeat(64) }));
  await eventually(async () => expect((await send(envoy)).status).toBe(401), { timeoutMs: 10_000 });
  // No Ready pod left: no endpoint, Envoy's own 503 (no healthy upstream) and no runtime's answer.
  replacePoolEndpointsFile(file, renderPoolEndpointsFile([], {}));
  await eventually(async () => expect(await send(envoy)).toEqual({ status: 503, worker: null }), {
    timeoutMs: 10_000,
  });
  expect(envoy.proc.isRunning(), 'the same Envoy throughout').toBe(true);
}, 60_000);
