import { afterEach, describe, expect, it } from 'vitest';
import { Publisher, Router, Subscriber } from 'zeromq';
import type { KvCacheEvent } from '#sglang/kv-events.ts';
import { decodeSeq } from '#sglang/kv-events.ts';
import { encodeEventBatch } from '../../../test/sim/kv-event-codec.ts';
import { ZmqEventPublisher } from '../../../test/sim/kv-event-publisher.ts';
import { portOf, postJson, startSimWithKvEvents } from '../../../test/support/sim/testing.ts';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { computeRequestBlockHashes } from './request-hashes.ts';
import { KvEventSubscriber, type KvEventSubscriberOptions, type KvIndexStatus } from './subscriber.ts';
import { CLEARED, stored } from '../../../test/support/gateway/sim-stream.ts';

// Real libzmq on both ends: the simulator's publisher (checked against SGLang's) and our SUB + DEALER.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Polls `cond` every few ms (the sockets work on libzmq's threads); fails after `ms`. */
async function until(what: string, cond: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

interface Ports {
  readonly pub: number;
  readonly replay: number;
}

/**
 * A publisher bound on ports the kernel picks, or, for a restart, on its predecessor's `ports`;
 * `ports` read back from libzmq.
 */
async function openPublisher(
  at: Ports | null = null,
  opts: { track?: boolean } = {},
): Promise<{ pub: ZmqEventPublisher; ports: Ports }> {
  const open = () =>
    ZmqEventPublisher.open({
      endpoint: `tcp://127.0.0.1:${at?.pub ?? 0}`,
      bind: true,
      replayEndpoint: `tcp://127.0.0.1:${at?.replay ?? 0}`,
      bufferSteps: 10_000,
      hwm: 100_000,
      topic: 'kv',
    });
  // A restarted publisher rebinds its predecessor's ports: libzmq releases them in its I/O thread, after close().
  let pub: ZmqEventPublisher | undefined;
  for (let attempt = 0; !pub; attempt++) {
    pub = await open().catch(async (e: unknown) => {
      if (at === null || attempt >= 50) throw e;
      await new Promise((r) => setTimeout(r, 20));
      return undefined;
    });
  }
  if (opts.track !== false) cleanups.push(() => pub.closed());
  const ports = { pub: portOf(pub.boundEndpoint ?? ''), replay: portOf(pub.boundReplayEndpoint ?? '') };
  return { pub, ports };
}

/** A replay endpoint that never answers: a ROUTER bound on a port the kernel picks that reads nothing. */
async function silentReplayPort(): Promise<number> {
  const router = new Router({ linger: 0 });
  await router.bind('tcp://127.0.0.1:0');
  cleanups.push(() => router.close());
  return portOf(router.lastEndpoint ?? '');
}

let ts = 1_700_000_000;
async function publish(pub: ZmqEventPublisher, events: readonly KvCacheEvent[]): Promise<number> {
  const seq = pub.nextSeq;
  pub.publish(encodeEventBatch(ts++, events, 0));
  await pub.flushed();
  return seq;
}

function subscribe(ports: Ports, over: Partial<KvEventSubscriberOptions> = {}): KvEventSubscriber {
  const s = KvEventSubscriber.start({
    endpoint: `tcp://127.0.0.1:${ports.pub}`,
    replayEndpoint: `tcp://127.0.0.1:${ports.replay}`,
    topic: 'kv',
    ...over,
  });
  cleanups.push(() => s.close());
  return s;
}

const caughtUpTo = (s: KvEventSubscriber, seq: number) => (): boolean => {
  const st: KvIndexStatus = s.status();
  return st.state === 'live' && st.lastSeq === seq;
};

/**
 * Publishes single-block batches until one reaches `s` live (a SUB's subscription takes effect
 * some time after its handshake); returns the hashes stored.
 */
async function untilLiveDelivery(pub: ZmqEventPublisher, s: KvEventSubscriber): Promise<void> {
  const replaysBefore = (): number => s.status().counters.replays;
  for (let i = 0; i < 200; i++) {
    const r = replaysBefore();
    const seq = await publish(pub, [stored([BigInt(1_000_000 + i)])]);
    try {
      await until('a live batch', caughtUpTo(s, seq), 100);
      if (replaysBefore() === r) return;
    } catch {
      // not yet subscribed: the next batch reveals the gap and the replay fills it
    }
  }
  throw new Error('no live delivery');
}

/** A SUB → PUB relay in front of the publisher that drops the batches it is told to. */
async function startRelay(upstream: number): Promise<{ port: number; drop: Set<number> }> {
  const up = new Subscriber({ linger: 0 });
  up.connect(`tcp://127.0.0.1:${upstream}`);
  up.subscribe('');
  const down = new Publisher({ linger: 0 });
  await down.bind('tcp://127.0.0.1:0');
  const port = portOf(down.lastEndpoint ?? '');
  const drop = new Set<number>();
  const loop = (async () => {
    try {
      for await (const frames of up) {
        const seq = frames[1] ? decodeSeq(frames[1]) : null;
        if (seq !== null && !drop.has(seq)) await down.send(frames);
      }
    } catch {
      // closed
    }
  })();
  cleanups.push(async () => {
    up.close();
    down.close();
    await loop;
  });
  return { port, drop };
}

describe('KvEventSubscriber (libzmq, against the simulator publisher)', () => {
  it('catches up from the replay on start, then applies live batches; lag from the batch timestamp; stale only when a batch is due', async () => {
    const { pub, ports } = await openPublisher();
    await publish(pub, [CLEARED, stored([1n, 2n])]); // before anyone subscribed
    const clock = new ManualClock();
    const s = subscribe(ports, { clock, wallNow: () => (ts - 1) * 1000 + 30, staleAfterMs: 1000 });
    expect(s.status().state).toBe('down');
    await until('caught up', caughtUpTo(s, 0));
    expect(s.status()).toMatchObject({ complete: true, reason: '', lagMs: null });
    expect(s.index.matchPrefix([1n, 2n]).pages).toBe(2);

    await untilLiveDelivery(pub, s);
    const seq = await publish(pub, [stored([3n], 2n)]);
    await until('live batch', caughtUpTo(s, seq));
    expect(s.status()).toMatchObject({ state: 'live', complete: true, lagMs: 30 });
    expect(s.index.matchPrefix([1n, 2n, 3n]).pages).toBe(3);

    // Idle is not stale; a request that stores pages makes a batch due.
    clock.advance(60_000);
    expect(s.status().state).toBe('live');
    s.expectBatch();
    clock.advance(1001);
    expect(s.status()).toMatchObject({
      state: 'stale',
      reason: expect.stringMatching(/no KV batch within 1000 ms/),
    });
    const next = await publish(pub, [stored([4n], 3n)]);
    await until('the due batch', caughtUpTo(s, next));
    expect(s.status().lastEventAt).toBe(61_001);
  });

  it('recovers a batch lost on the way through the replay endpoint (a gap in the live sequence)', async () => {
    const { pub, ports } = await openPublisher();
    const relay = await startRelay(ports.pub);
    await publish(pub, [CLEARED]);
    // The relay subscribes asynchronously too: publish until it forwards.
    const s = subscribe({ pub: relay.port, replay: ports.replay });
    await untilLiveDelivery(pub, s);
    const replays = s.status().counters.replays;

    relay.drop.add(pub.nextSeq);
    await publish(pub, [stored([7n])]);
    const after = await publish(pub, [stored([8n], 7n)]);
    await until('the gap filled', caughtUpTo(s, after));
    expect(s.index.matchPrefix([7n, 8n]).pages).toBe(2);
    expect(s.status()).toMatchObject({ complete: true, counters: { replays: replays + 1, restarts: 0 } });
  });

  it('drops the index when the publisher restarts (seq back to 0), and says down while it is away', async () => {
    const { pub: old, ports } = await openPublisher(null, { track: false });
    await publish(old, [CLEARED, stored([1n, 2n, 3n])]);
    const s = subscribe(ports);
    await untilLiveDelivery(old, s);
    expect(s.index.matchPrefix([1n, 2n, 3n]).pages).toBe(3);

    await old.closed();
    await until('down', () => s.status().state === 'down');
    // The new runtime's first batch, without the AllBlocksCleared SGLang would send: the drop is ours.
    const { pub: fresh } = await openPublisher(ports);
    await publish(fresh, [stored([9n])]);
    await until('the new publisher', caughtUpTo(s, 0));
    expect(s.index.matchPrefix([1n]).pages).toBe(0);
    expect(s.index.matchPrefix([9n]).pages).toBe(1);
    expect(s.status()).toMatchObject({ complete: true, counters: { restarts: 1 } });
  });

  it('drops the index when the restarted publisher has counted past our seq before we reconnect', async () => {
    const { pub: old, ports } = await openPublisher(null, { track: false });
    await publish(old, [CLEARED, stored([1n])]);
    await publish(old, [stored([2n], 1n)]);
    const s = subscribe(ports);
    await until('caught up', caughtUpTo(s, 1));
    await old.closed();
    const { pub: fresh } = await openPublisher(ports);
    for (let i = 0; i < 5; i++) await publish(fresh, i === 0 ? [CLEARED] : [stored([BigInt(20 + i)])]);
    await until('the new publisher', caughtUpTo(s, 4));
    expect(s.index.size).toBe(4);
    expect(s.index.matchPrefix([1n]).pages).toBe(0);
    expect(s.status().complete).toBe(true);
  });

  it(
    'reads a whole 10,000-batch replay: the ROUTER drops what a full pipe cannot take, so what is missed is asked again',
    { timeout: 60_000 },
    async () => {
      const { pub, ports } = await openPublisher();
      pub.publish(encodeEventBatch(ts, [CLEARED], 0));
      for (let i = 1; i < 10_000; i++)
        pub.publish(encodeEventBatch(ts, [stored([BigInt(i)], i === 1 ? null : BigInt(i - 1))], 0));
      await pub.flushed();
      const s = subscribe(ports);
      await until('caught up', caughtUpTo(s, 9_999), 50_000);
      expect(s.status()).toMatchObject({ complete: true, reason: '', counters: { restarts: 0 } });
      expect(s.index.size).toBe(9_999);
    },
  );

  it('measures lag when a batch is read, not after the catch-up it waited for', async () => {
    const { pub, ports } = await openPublisher();
    let wall = 1_800_000_000_000;
    // The replay never answers: the catch-up on connect holds the work queue for replayTimeoutMs.
    const s = subscribe(
      { pub: ports.pub, replay: await silentReplayPort() },
      { replayTimeoutMs: 1500, wallNow: () => wall },
    );
    await until('catching up', () => s.status().state === 'catching-up');
    await new Promise((r) => setTimeout(r, 300)); // the subscription reaches the publisher
    pub.publish(encodeEventBatch(wall / 1000 - 0.01, [CLEARED, stored([1n])], 0));
    await pub.flushed();
    await new Promise((r) => setTimeout(r, 300)); // read off the socket, queued behind the catch-up
    wall += 60_000; // a long catch-up on a busy machine
    await until('applied', caughtUpTo(s, 0));
    expect(s.status().lagMs).toBe(10);
  });

  it("forgets a late batch's lag once the runtime has gone quiet: an idle runtime is not lagging", async () => {
    const { pub, ports } = await openPublisher();
    await publish(pub, [CLEARED]);
    const clock = new ManualClock();
    let wall = 1_800_000_000_000;
    const s = subscribe(ports, { clock, wallNow: () => wall, lagHoldMs: 5000 });
    await untilLiveDelivery(pub, s);
    // A batch read 60 s after it was published: the gateway was busy (a long replay, a stalled loop).
    pub.publish(encodeEventBatch(wall / 1000 - 60, [stored([9n])], 0));
    await pub.flushed();
    await until('the late batch', caughtUpTo(s, pub.nextSeq - 1));
    expect(s.status().lagMs).toBe(60_000);
    clock.advance(4999);
    expect(s.status().lagMs).toBe(60_000);
    // Nothing since, nothing waiting: the index holds everything the runtime published.
    clock.advance(2);
    wall += 5001;
    expect(s.status()).toMatchObject({ state: 'live', lagMs: null });
    // The next batch measures again.
    pub.publish(encodeEventBatch(wall / 1000 - 0.02, [stored([10n], 9n)], 0));
    await pub.flushed();
    await until('the next batch', caughtUpTo(s, pub.nextSeq - 1));
    expect(s.status().lagMs).toBe(20);
  });

  it('starts over, incomplete, when the replay endpoint does not answer', async () => {
    const { pub, ports } = await openPublisher();
    await publish(pub, [CLEARED, stored([1n])]); // only the replay has this one
    const s = subscribe({ pub: ports.pub, replay: await silentReplayPort() }, { replayTimeoutMs: 100 });
    await untilLiveDelivery(pub, s);
    expect(s.status()).toMatchObject({ state: 'live', complete: false });
    expect(s.status().reason).toMatch(/the replay endpoint did not answer/);
    expect(s.index.matchPrefix([1n]).pages).toBe(0);
  });

  it('without a replay endpoint, starts from the first live batch, incomplete unless it is seq 0', async () => {
    const { pub, ports } = await openPublisher();
    await publish(pub, [CLEARED, stored([1n])]); // before anyone subscribed: lost
    const s = subscribe(ports, { replayEndpoint: null });
    await untilLiveDelivery(pub, s);
    expect(s.status()).toMatchObject({ state: 'live', complete: false, counters: { replays: 0 } });
    expect(s.status().reason).toMatch(/no replay endpoint; index restarted at seq/);
    expect(s.index.matchPrefix([1n]).pages).toBe(0);
  });

  it('close() closes both sockets, ends its loops and is idempotent', async () => {
    const { pub, ports } = await openPublisher();
    await publish(pub, [CLEARED]);
    const before = process.getActiveResourcesInfo().length;
    const s = KvEventSubscriber.start({
      endpoint: `tcp://127.0.0.1:${ports.pub}`,
      replayEndpoint: `tcp://127.0.0.1:${ports.replay}`,
      topic: 'kv',
    });
    await until('caught up', caughtUpTo(s, 0));
    await s.close();
    await s.close();
    expect(s.status()).toMatchObject({ state: 'down', reason: 'closed' });
    expect(process.getActiveResourcesInfo().length).toBeLessThanOrEqual(before);
    // Nothing listens any more: a publish after close is not applied.
    await publish(pub, [stored([5n])]);
    expect(s.index.size).toBe(0);
  });
});

describe('KvEventSubscriber on the simulator server (--kv-events-config)', () => {
  it("indexes a request's prompt pages under the request's salt, and empties on /flush_cache", async () => {
    const sim = await startSimWithKvEvents(['--model-path', 'm', '--page-size', '16']);
    cleanups.push(() => sim.close());
    const s = subscribe({ pub: portOf(sim.kv), replay: portOf(sim.replay) });
    await until('caught up', () => s.status().state === 'live' && s.status().complete);

    const prompt = Array.from({ length: 100 }, (_, i) => 200 + i);
    const r = await postJson(`${sim.url}/generate`, {
      input_ids: prompt,
      sampling_params: { max_new_tokens: 4, temperature: 0 },
      cache_salt: 'tenant-a',
    });
    expect(r.status).toBe(200);
    const pages = (salt: string | null) => s.index.matchPrefix(computeRequestBlockHashes(prompt, 16, salt));
    await until('the prompt pages', () => pages('tenant-a').pages === 6);
    expect(pages('tenant-a').byMedium.GPU).toBe(6);
    expect(pages(null).pages).toBe(0);
    expect(pages('tenant-b').pages).toBe(0);

    expect((await postJson(`${sim.url}/flush_cache`, {})).status).toBe(200);
    await until('the flush', () => s.index.size === 0);
    expect(s.status()).toMatchObject({
      state: 'live',
      complete: true,
      counters: { restarts: 0, malformed: 0 },
    });
  });
});
