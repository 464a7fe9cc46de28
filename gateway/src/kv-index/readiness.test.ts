import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { encodeEventBatch } from '../../../test/sim/kv-event-codec.ts';
import { ZmqEventPublisher } from '../../../test/sim/kv-event-publisher.ts';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { portOf } from '../../../test/support/sim/testing.ts';
import { CLEARED, stored } from '../../../test/support/gateway/sim-stream.ts';
import { StaticRoutingTable, type RouteEndpoint } from '../routing/table.ts';
import { KvIndexFleet } from './fleet.ts';
import { KvIndexReadiness } from './readiness.ts';

// Real subscribers on the simulator's publisher: readiness waits for the replay, not for a timer.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tableOf(endpoints: RouteEndpoint[]): StaticRoutingTable {
  return new StaticRoutingTable([
    {
      model: 'm',
      deployment: 'ns/m',
      fingerprint: 'fp',
      salt: 's',
      routing: RoutingSettings.parse({ policy: 'cache-aware' }),
      admission: Admission.parse({}),
      reuse: ResultReuse.parse({}),
      endpoints,
    },
  ]);
}

function endpointAt(id: string, kv: string, replay: string): RouteEndpoint {
  return {
    id,
    url: 'http://127.0.0.1:1',
    role: 'standalone',
    fingerprint: 'fp',
    verified: true,
    ready: true,
    generation: 'g1',
    events: { kv: [kv], replay: [replay], topic: 'kv', blockSize: 1 },
  };
}

function followed(table: StaticRoutingTable, opts: { replayTimeoutMs?: number } = {}): KvIndexFleet {
  const fleet = new KvIndexFleet(opts);
  cleanups.push(() => fleet.close());
  const all = new Set(table.list().flatMap((r) => r.endpoints.map((e) => e.id)));
  for (const r of table.list()) fleet.sync(r.endpoints, all);
  return fleet;
}

/** A TCP listener that accepts and never speaks ZMTP: a publisher that never answers. */
async function mutePort(): Promise<number> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => sockets.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  );
  const address = server.address();
  return typeof address === 'object' && address ? address.port : 0;
}

async function until(what: string, cond: () => boolean, ms = 25_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('KvIndexReadiness', () => {
  // Reading a 2,000-batch replay over real sockets takes well under a second on a quiet
  // machine; the bound is generous for a loaded one (it failed once at vitest's 5 s default).
  it(
    'is ready once every publisher was replayed, and stays ready when one goes away',
    { timeout: 30_000 },
    async () => {
      const pub = await ZmqEventPublisher.open({
        endpoint: 'tcp://127.0.0.1:0',
        bind: true,
        replayEndpoint: 'tcp://127.0.0.1:0',
        bufferSteps: 10_000,
        hwm: 100_000,
        topic: 'kv',
      });
      let open = true;
      cleanups.push(() => (open ? pub.closed() : undefined));
      pub.publish(encodeEventBatch(1, [CLEARED], 0));
      for (let i = 1; i <= 2000; i++)
        pub.publish(encodeEventBatch(1, [stored([BigInt(i)], BigInt(i - 1))], 0));
      await pub.flushed();
      const kv = `tcp://127.0.0.1:${portOf(pub.boundEndpoint ?? '')}`;
      const replay = `tcp://127.0.0.1:${portOf(pub.boundReplayEndpoint ?? '')}`;
      const table = tableOf([endpointAt('a', kv, replay)]);
      table.ready = false;
      const fleet = followed(table);
      const readiness = new KvIndexReadiness(table, fleet, new ManualClock(), 30_000);
      expect(readiness.ready()).toBe(false); // the table itself is not ready
      table.ready = true;
      expect(readiness.ready()).toBe(false); // connecting, then reading the replay
      await until('ready', () => readiness.ready());
      expect(fleet.status()[0]?.ranks[0]).toMatchObject({ lastSeq: 2000, complete: true });
      open = false;
      await pub.closed();
      await until('down', () => fleet.status()[0]?.ranks[0]?.state === 'down');
      expect(readiness.ready()).toBe(true);
    },
  );

  it('is ready after the grace when a publisher never answers, and not before', async () => {
    const mute = await mutePort();
    const table = tableOf([endpointAt('a', `tcp://127.0.0.1:${mute}`, `tcp://127.0.0.1:${mute}`)]);
    const fleet = followed(table);
    const clock = new ManualClock();
    const readiness = new KvIndexReadiness(table, fleet, clock, 30_000);
    expect(readiness.ready()).toBe(false);
    await new Promise((r) => setTimeout(r, 200));
    clock.advance(29_999);
    expect(readiness.ready()).toBe(false);
    clock.advance(1);
    expect(readiness.ready()).toBe(true);
  });

  it('does not wait for endpoints that publish no events', () => {
    const { events: _none, ...plain } = endpointAt('a', 'tcp://127.0.0.1:1', '');
    const table = tableOf([plain]);
    const readiness = new KvIndexReadiness(table, followed(table), new ManualClock(), 30_000);
    expect(readiness.ready()).toBe(true);
  });
});
