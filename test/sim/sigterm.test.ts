// SIGTERM as SGLang 0.5.23 takes it: readiness and health 503 at once,
// generation still served, the process gone at the first 5 s watchdog wake
// that finds no request left.

import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from './clock.ts';
import { silentLogger } from './server.ts';
import { SIGTERM_WATCHDOG_PERIOD_MS, SigtermWatchdog } from './sigterm.ts';
import { spawnSim } from '../support/sim/process.ts';
import { postJson, postSse, startSim } from '../support/sim/testing.ts';

describe('SigtermWatchdog', () => {
  const settle = (p: Promise<void>): { done: boolean } => {
    const state = { done: false };
    void p.then(() => (state.done = true));
    return state;
  };
  const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

  it('exits at the first wake of its own period after the signal, when nothing is open', async () => {
    const clock = new VirtualClock();
    const dog = new SigtermWatchdog(clock, silentLogger);
    clock.advanceTo(7_000); // wakes at 5 s, 10 s, ... since the start
    expect(dog.gracefullyExit).toBe(false);
    const exit = settle(dog.terminate());
    expect(dog.gracefullyExit).toBe(true);
    clock.advanceTo(9_999);
    await turn();
    expect(exit.done).toBe(false);
    clock.advanceTo(10_000);
    await turn();
    expect(exit.done).toBe(true);
  });

  it('waits, wake after wake, until the last open request closed', async () => {
    const clock = new VirtualClock();
    const dog = new SigtermWatchdog(clock, silentLogger);
    const [a, b] = [new EventEmitter(), new EventEmitter()];
    dog.track(a);
    dog.track(b);
    const exit = settle(dog.terminate());
    a.emit('close');
    clock.advanceTo(SIGTERM_WATCHDOG_PERIOD_MS);
    await turn();
    expect(exit.done).toBe(false);
    // Served after the signal too: it is one more to wait for.
    const c = new EventEmitter();
    dog.track(c);
    b.emit('close');
    clock.advanceTo(2 * SIGTERM_WATCHDOG_PERIOD_MS);
    await turn();
    expect(exit.done).toBe(false);
    c.emit('close');
    expect(dog.open).toBe(0);
    clock.advanceTo(3 * SIGTERM_WATCHDOG_PERIOD_MS - 1);
    await turn();
    expect(exit.done).toBe(false);
    clock.advanceTo(3 * SIGTERM_WATCHDOG_PERIOD_MS);
    await turn();
    expect(exit.done).toBe(true);
  });

  it('a second SIGTERM changes nothing; a stopped watchdog wakes no more', () => {
    const clock = new VirtualClock();
    const dog = new SigtermWatchdog(clock, silentLogger);
    dog.track(new EventEmitter());
    const first = dog.terminate();
    expect(dog.terminate()).toBe(first);
    dog.stop();
    clock.advanceBy(60_000);
    expect(clock.pendingTimers).toBe(0);
  });
});

describe('the simulator after SIGTERM', () => {
  it('answers 503 on /ready, /health and /health_generate at once, and still serves generation', async () => {
    const s = await startSim(['--model-path', 'm']);
    try {
      expect((await fetch(`${s.url}/ready`)).status).toBe(200);
      // In flight when the signal comes.
      const long = postSse(`${s.url}/generate`, {
        text: 'a',
        stream: true,
        sampling_params: { max_new_tokens: 500, ignore_eos: true },
      });
      for (let i = 0; i < 100_000 && s.server.engine.snapshot().numRunningReqs < 1; i++)
        await new Promise((r) => setImmediate(r));
      s.clock.hold(); // model time stands still until release: no watchdog wake in between
      let exited = false;
      const exit = s.server.terminate().then(() => (exited = true));
      for (const path of ['/ready', '/health', '/health_generate']) {
        const r = await fetch(`${s.url}${path}`);
        expect([path, r.status, await r.text()]).toEqual([path, 503, '']);
      }
      const late = postJson(`${s.url}/v1/completions`, { prompt: 'a', max_tokens: 3 });
      for (let i = 0; i < 100_000 && s.server.sigterm.open < 2; i++)
        await new Promise((r) => setImmediate(r));
      expect(s.server.sigterm.open).toBe(2);
      s.clock.release();
      expect((await late).status).toBe(200);
      expect((await long).events.at(-1)).toBe('[DONE]');
      expect(exited).toBe(false);
      await exit;
      // At a wake of the watchdog, the first after the long stream's last byte.
      expect(s.clock.now() % SIGTERM_WATCHDOG_PERIOD_MS).toBe(0);
    } finally {
      await s.close();
    }
  });

  it('/ready is 503 while the server is starting (--sim-unhealthy-for-ms), then 200', async () => {
    const s = await startSim(['--model-path', 'm', '--sim-unhealthy-for-ms', '50']);
    try {
      expect((await fetch(`${s.url}/ready`)).status).toBe(503);
      await postJson(`${s.url}/generate`, { text: 'a', sampling_params: { max_new_tokens: 10 } });
      expect((await fetch(`${s.url}/ready`)).status).toBe(200);
    } finally {
      await s.close();
    }
  });

  it(
    'the process finishes a stream in flight, then exits 0 on its own (CLI)',
    { timeout: 20_000 },
    async () => {
      // Model time 20x wall time: the 5 s watchdog wakes every 250 ms wall, a 100 ms decode step takes 5 ms.
      const { url, proc, exited } = await spawnSim([
        ...['--model-path', 'm'],
        ...['--sim-time-scale', '20', '--sim-decode-base-ms', '100'],
      ]);
      try {
        expect((await fetch(`${url}/ready`)).status).toBe(200);
        // 12 s of model time (600 ms wall): more than two watchdog periods.
        const stream = postSse(`${url}/generate`, {
          text: 'a',
          stream: true,
          sampling_params: { max_new_tokens: 120, ignore_eos: true },
        });
        await new Promise((r) => setTimeout(r, 50));
        proc.kill('SIGTERM');
        await new Promise((r) => setTimeout(r, 20));
        expect((await fetch(`${url}/ready`)).status).toBe(503);
        expect(
          (await postJson(`${url}/generate`, { text: 'b', sampling_params: { max_new_tokens: 2 } })).status,
        ).toBe(200);
        const answer = await stream;
        expect(answer.events.at(-1)).toBe('[DONE]');
        expect(await exited).toEqual([0, null]);
      } finally {
        proc.kill('SIGKILL');
      }
    },
  );
});
