// The runtime's pushed load, from the simulator's real load publisher (libzmq
// on both ends), as SGLang 0.5.23 publishes it with --load-publish-endpoint.
import { Encoder } from '@msgpack/msgpack';
import { afterEach, describe, expect, it } from 'vitest';
import { postJson, startSimWithKvEvents, type RunningSim } from '../../../test/support/sim/testing.ts';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import type { ModelRoute } from '../routing/table.ts';
import { decodeLoadStat, RuntimeLoadEvents } from './load-events.ts';

let sim: RunningSim | undefined;
let events: RuntimeLoadEvents | undefined;
afterEach(async () => {
  events?.close();
  await sim?.close();
});

describe('decodeLoadStat', () => {
  it('reads the counts of a LoadStat and refuses anything else', () => {
    const enc = new Encoder();
    expect(decodeLoadStat(enc.encode(['LoadStat', 2, 5, 300, 1000, 0, 40, 310, 64, 0, 0]))).toEqual({
      running: 2,
      waiting: 5,
      tokens: 300,
      maxTotalTokens: 1000,
      rank: 0,
      waitingUncachedTokens: 40,
    });
    // The older six-field shape: no uncached count.
    expect(decodeLoadStat(enc.encode(['LoadStat', 2, 5, 300, 1000, 0]))).toEqual({
      running: 2,
      waiting: 5,
      tokens: 300,
      maxTotalTokens: 1000,
      rank: 0,
    });
    expect(decodeLoadStat(enc.encode(['BlockStored', 1, 2, 3, 4, 5]))).toBeNull();
    expect(decodeLoadStat(enc.encode(['LoadStat', -1, 0, 0, 0, 0]))).toBeNull();
    expect(decodeLoadStat(Uint8Array.of(0xc1))).toBeNull();
  });
});

describe('RuntimeLoadEvents on the simulator', () => {
  it('gives the runtime its pushed queue and KV usage, and nothing once it falls silent', async () => {
    // The event sockets bind on ports the kernel picks; /server_info advertises the load one's.
    sim = await startSimWithKvEvents([
      '--model-path',
      'm',
      '--max-total-tokens',
      '4096',
      '--load-publish-endpoint',
      'auto',
    ]);
    const info = (await (await fetch(`${sim.url}/server_info`)).json()) as {
      kv_events: { load_endpoint_port_base: number; load_topic: string };
    };
    const clock = new ManualClock();
    const ev = new RuntimeLoadEvents({ clock, staleAfterMs: 3000 });
    events = ev;
    const route = {
      endpoints: [
        {
          id: 'sim0',
          events: {
            kv: [sim.events.kv],
            topic: 'kv',
            blockSize: 1,
            load: [`tcp://127.0.0.1:${info.kv_events.load_endpoint_port_base}`],
            loadTopic: info.kv_events.load_topic,
          },
        },
      ],
    } as unknown as ModelRoute;
    ev.sync([route]);
    expect(ev.get('sim0')).toBeUndefined();
    // A burst of long requests: the scheduler publishes at every prefill batch, its KV in use.
    const burst = Array.from({ length: 8 }, (_, i) =>
      postJson(`${sim?.url ?? ''}/generate`, {
        input_ids: Array.from({ length: 1500 }, (_, j) => 300 + i * 1500 + j),
        sampling_params: { max_new_tokens: 64 },
      }),
    );
    let busiest = 0;
    for (let i = 0; i < 500 && busiest === 0; i++) {
      busiest = ev.get('sim0')?.tokenUsage ?? 0;
      await new Promise((r) => setTimeout(r, 5));
    }
    await Promise.all(burst);
    expect(busiest).toBeGreaterThan(0);
    expect(busiest).toBeLessThanOrEqual(1);
    expect(ev.get('sim0')).toMatchObject({
      queued: expect.any(Number),
      running: expect.any(Number),
      waitingUncachedTokens: expect.any(Number),
    });
    clock.advance(3001);
    expect(ev.get('sim0')).toBeUndefined();
    ev.sync([]);
    expect(ev.get('sim0')).toBeUndefined();
  });
});
