// The load exchange over real ZeroMQ sockets on loopback, each bound to a port
// the kernel picks (`*`) and read back. Delivery is awaited, never timed.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { decodeShareMessage, LoadExchange, type LoadExchangeOptions } from './load-exchange.ts';

const open: LoadExchange[] = [];
afterEach(() => {
  for (const x of open.splice(0)) x.close();
});

async function replica(
  self: string,
  opts: Partial<LoadExchangeOptions> = {},
): Promise<[LoadExchange, string]> {
  const x = new LoadExchange({ self, heartbeatMs: 20, ...opts });
  open.push(x);
  const address = await x.bind('tcp://127.0.0.1:*');
  return [x, address];
}

const until = (check: () => void): Promise<void> => vi.waitFor(check, { timeout: 4_000, interval: 10 });
const share = (inFlight: number, prefillTokens: number, decodeTokens: number) => ({
  inFlight,
  prefillTokens,
  decodeTokens,
});

describe('LoadExchange', () => {
  it('binds a port the kernel chose and reads it back', async () => {
    const [, address] = await replica('gw-a');
    expect(address).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
    expect(address).not.toMatch(/:0$|\*$/);
  });

  it("gives each replica the others' shares of an endpoint, summed, and not its own", async () => {
    const [a, addrA] = await replica('gw-a');
    const [b, addrB] = await replica('gw-b');
    const [c, addrC] = await replica('gw-c');
    const all = [addrA, addrB, addrC];
    for (const x of [a, b, c]) x.connect(all); // every list includes self, as the Service's slices do
    a.update('w0', share(2, 1000, 300));
    b.update('w0', share(1, 500, 100));
    b.update('w1', share(4, 0, 900));
    await until(() => {
      expect(c.peersOf('w0')).toEqual(share(3, 1500, 400));
      expect(c.peersOf('w1')).toEqual(share(4, 0, 900));
      expect(a.peersOf('w0')).toEqual(share(1, 500, 100));
      expect(b.peersOf('w1')).toEqual(share(0, 0, 0)); // a and c have nothing on w1; b's own is not counted
    });
  });

  it('measures how long a pick takes to reach it: the fallback until enough lags were seen', async () => {
    // A fallback no real lag reaches and a ceiling below it: the answer moves only by measuring.
    const lagWindow = { minSamples: 3, fallbackMs: 10_000, ceilingMs: 5_000 };
    const [a, addrA] = await replica('gw-a');
    const [b] = await replica('gw-b', { lagWindow });
    b.connect([addrA]);
    expect(b.unheardMs()).toBe(10_000);
    let n = 0;
    await until(() => {
      a.update('w0', share(++n, 0, 0));
      expect(b.unheardMs()).toBeLessThanOrEqual(5_000);
    });
  });

  it("hears when the peers' requests arrived: a burst split between replicas shows in each", async () => {
    const [a, addrA] = await replica('gw-a');
    const [b] = await replica('gw-b');
    const [c] = await replica('gw-c');
    b.connect([addrA]);
    expect(b.bursty()).toBe(false);
    // a took four requests at each of four instants 3 s apart (its clock: performance.now()).
    // A subscriber misses what came before it joined: a notes them again until b heard them.
    const now = performance.now();
    let n = 0;
    await until(() => {
      for (let k = 0; k < 4; k++) for (let j = 0; j < 4; j++) a.notePick(now - (3 - k) * 3000);
      a.update('w0', share(++n, 0, 0));
      expect(b.bursty()).toBe(true);
    });
    expect(c.bursty()).toBe(false); // not connected: it heard nothing
  });

  it('follows a share down to zero', async () => {
    const [a, addrA] = await replica('gw-a');
    const [b] = await replica('gw-b');
    b.connect([addrA]);
    a.update('w0', share(5, 10, 10));
    await until(() => expect(b.peersOf('w0')).toEqual(share(5, 10, 10)));
    a.update('w0', share(0, 0, 0));
    await until(() => expect(b.peersOf('w0')).toEqual(share(0, 0, 0)));
  });

  it('brings a replica that joins late up to date with the next heartbeat', async () => {
    const [a, addrA] = await replica('gw-a');
    a.update('w0', share(7, 70, 700));
    const [late] = await replica('gw-late');
    late.connect([addrA]);
    await until(() => expect(late.peersOf('w0')).toEqual(share(7, 70, 700)));
  });

  it('forgets a peer that went silent, and one it disconnected from', async () => {
    const clock = new ManualClock();
    const [a, addrA] = await replica('gw-a');
    const [b] = await replica('gw-b', { clock, staleAfterMs: 3000 });
    b.connect([addrA]);
    a.update('w0', share(1, 1, 1));
    await until(() => expect(b.livePeers()).toEqual(['gw-a']));
    a.close();
    clock.advance(3001);
    expect(b.peersOf('w0')).toBeUndefined();
    expect(b.livePeers()).toEqual([]);
  });

  it("measures how old a view of a peer's change is when it catches up", async () => {
    const lags: number[] = [];
    const [a, addrA] = await replica('gw-a', { wallClock: () => 1_000 });
    const [b] = await replica('gw-b', { wallClock: () => 1_250, onLag: (ms) => lags.push(ms) });
    b.connect([addrA]);
    await until(() => expect(b.peersOf('w0')).toBeDefined()); // heartbeats flow: b is subscribed
    a.update('w0', share(1, 2, 3));
    await until(() => expect(lags).toContain(250));
  });

  it('skips messages that are not a share (bad JSON, wrong shape, negative counts)', () => {
    const enc = (v: unknown): Uint8Array => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v));
    expect(decodeShareMessage(enc('{'))).toBeNull();
    expect(decodeShareMessage(enc({ from: 'a', life: 'l', seq: 0, endpoints: { w: [1, 2] } }))).toBeNull();
    expect(
      decodeShareMessage(enc({ from: 'a', life: 'l', seq: 0, endpoints: { w: [-1, 0, 0] } })),
    ).toBeNull();
    expect(decodeShareMessage(enc({ from: '', life: 'l', seq: 0, endpoints: {} }))).toBeNull();
    expect(decodeShareMessage(enc({ from: 'a', life: 'l', seq: 3, endpoints: { w: [1, 0, 2] } }))).toEqual({
      from: 'a',
      life: 'l',
      seq: 3,
      endpoints: { w: [1, 0, 2] },
    });
  });
});
