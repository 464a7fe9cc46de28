// Ports bound on 0 and read back: what lets tests run simulators side by side
// without guessing free ports (README "Ports a test reads back").

import { afterEach, describe, expect, it } from 'vitest';
import { spawnSim } from '../support/sim/process.ts';
import { kvEventsConfigArgs, PLACEHOLDER_EVENT_PORTS } from '../support/kv-events-config.ts';
import { bootstrapPortOf, eventEndpoint, portOf, startSim, type RunningSim } from '../support/sim/testing.ts';

const running: RunningSim[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await s.close();
});

// The same configured event ports for every simulator: bound, they would collide.
const EVENTS = kvEventsConfigArgs(PLACEHOLDER_EVENT_PORTS);

interface KvEventsInfo {
  readonly endpoint_port_base: number;
  readonly replay_endpoint_port_base: number;
  readonly load_endpoint_port_base: number;
}

describe('--sim-ephemeral-event-ports', () => {
  it('binds the KV, replay and load sockets of two simulators with the same configured ports, and advertises the bound ones', async () => {
    for (let i = 0; i < 2; i++) {
      running.push(await startSim(['--model-path', 'm', ...EVENTS, '--load-publish-endpoint', 'auto']));
    }
    const bound = running.map((s) =>
      ['kv', 'replay', 'load'].map((k) => portOf(eventEndpoint(s, k as 'kv'))),
    );
    expect(new Set(bound.flat()).size).toBe(6);
    for (const [i, sim] of running.entries()) {
      const info = (await (await fetch(`${sim.url}/server_info`)).json()) as { kv_events: KvEventsInfo };
      const k = info.kv_events;
      expect([k.endpoint_port_base, k.replay_endpoint_port_base, k.load_endpoint_port_base]).toEqual(
        bound[i],
      );
    }
  });
});

describe('--disaggregation-bootstrap-port 0', () => {
  it('serves the bootstrap on a port the kernel picks, read back in process', async () => {
    const prefill = await startSim([
      '--model-path',
      'm',
      '--disaggregation-mode',
      'prefill',
      '--disaggregation-bootstrap-port',
      '0',
    ]);
    running.push(prefill);
    const port = bootstrapPortOf(prefill);
    expect(port).toBeGreaterThan(0);
    // The bootstrap server's own answer to a path it does not serve.
    expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(404);
  });

  it("is startSim's default for a prefill: two prefills without the flag start side by side, off SGLang's 8998", async () => {
    for (let i = 0; i < 2; i++)
      running.push(await startSim(['--model-path', 'm', '--disaggregation-mode', 'prefill']));
    const ports = running.map(bootstrapPortOf);
    expect(new Set(ports).size).toBe(2);
    expect(ports).not.toContain(8998);
  });

  it('says the bound ports on its start-up line (CLI)', async () => {
    const sim = await spawnSim([
      '--model-path',
      'm',
      '--disaggregation-mode',
      'prefill',
      '--disaggregation-bootstrap-port',
      '0',
    ]);
    try {
      expect(sim.bootstrapPort).toBeGreaterThan(0);
      expect((await fetch(`${sim.url}/health`)).status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${sim.bootstrapPort}/`)).status).toBe(404);
    } finally {
      sim.proc.kill('SIGKILL');
      await sim.exited;
    }
  });
});
