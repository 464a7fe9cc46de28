import { afterEach, describe, expect, it } from 'vitest';
import { Publisher } from 'zeromq';
import type { KvCacheEvent, StorageMedium } from '#sglang/kv-events.ts';
import { encodeEventBatch } from '../../../test/sim/kv-event-codec.ts';
import { ZmqEventPublisher } from '../../../test/sim/kv-event-publisher.ts';
import { reachableOnLoopback } from '../../../test/support/sim/testing.ts';
import type { RouteEndpoint } from '../routing/table.ts';
import { KvIndexFleet, type KvMatch } from './fleet.ts';
import { computeRequestBlockHashes } from './request-hashes.ts';
import { CLEARED, stored } from '../../../test/support/gateway/sim-stream.ts';
import { KvEventSubscriber } from './subscriber.ts';

// Real subscribers on publishers that publish nothing: the fleet's bookkeeping, not the feed.
let fleet: KvIndexFleet | undefined;
let publisher: ZmqEventPublisher | undefined;
const silent: Publisher[] = [];
afterEach(async () => {
  await fleet?.close();
  fleet = undefined;
  await publisher?.closed();
  publisher = undefined;
  for (const p of silent.splice(0)) p.close();
});

/** A PUB socket that never publishes, bound on a port the kernel picks; its address. */
async function silentPublisher(): Promise<string> {
  const p = new Publisher({ linger: 0 });
  silent.push(p);
  await p.bind('tcp://127.0.0.1:0');
  return reachableOnLoopback(p.lastEndpoint) ?? '';
}

async function endpoint(id: string, generation: string, ranks = 1): Promise<RouteEndpoint> {
  const kv: string[] = [];
  for (let r = 0; r < ranks; r++) kv.push(await silentPublisher());
  return {
    id,
    url: 'http://127.0.0.1:1',
    role: 'standalone',
    fingerprint: 'fp',
    verified: true,
    ready: true,
    generation,
    events: { kv, topic: 'kv', blockSize: 16 },
  };
}

function countingFleet(): { fleet: KvIndexFleet; opened: string[] } {
  const opened: string[] = [];
  const f = new KvIndexFleet({
    open: (o) => {
      opened.push(o.endpoint);
      return KvEventSubscriber.start(o);
    },
  });
  fleet = f;
  return { fleet: f, opened };
}

describe('KvIndexFleet', () => {
  it('subscribes once per rank, keeps a subscription while the process is the same, and replaces it when not', async () => {
    const { fleet: f, opened } = countingFleet();
    const a = await endpoint('a', 'ip#0', 2);
    f.sync([a], new Set(['a']));
    f.sync([a], new Set(['a']));
    expect(opened).toEqual(a.events?.kv);
    const restarted = { ...a, generation: 'ip#1' };
    f.sync([restarted], new Set(['a']));
    expect(opened).toHaveLength(4);
    expect(f.status().map((s) => [s.endpoint, s.ranks.length])).toEqual([['a', 2]]);
  });

  it('closes the subscription of an endpoint the table no longer holds', async () => {
    const { fleet: f } = countingFleet();
    const a = await endpoint('a', 'g');
    f.sync([a], new Set(['a']));
    f.sync([], new Set());
    expect(f.status()).toEqual([]);
    expect(f.usability('a')).toEqual({ usable: false, reason: 'the runtime publishes no KV events' });
  });

  it('an index that is not live is not used, and says why; match leaves the endpoint to the tree', async () => {
    const { fleet: f } = countingFleet();
    const a = await endpoint('a', 'g');
    const plain: RouteEndpoint = { ...a, id: 'b' };
    delete (plain as { events?: unknown }).events;
    f.sync([a, plain], new Set(['a', 'b']));
    const u = f.usability('a');
    expect(u.usable).toBe(false);
    expect(u.usable ? '' : u.reason).toMatch(/^(down|catching-up)/);
    expect(f.usability('b')).toEqual({ usable: false, reason: 'the runtime publishes no KV events' });
    expect(f.match([a, plain], [1, 2, 3], 's').size).toBe(0);
  });

  it("takes an index that started after the publisher's replay rolled over as partial: usable, a floor, and says why", async () => {
    const pub = await ZmqEventPublisher.open({
      endpoint: 'tcp://127.0.0.1:0',
      bind: true,
      replayEndpoint: 'tcp://127.0.0.1:0',
      bufferSteps: 1,
      hwm: 1000,
      topic: 'kv',
    });
    publisher = pub;
    // Three pages cached by the runtime before this gateway started; its replay keeps the last batch only.
    const tokens = Array.from({ length: 49 }, (_, i) => i);
    const [h0, h1, h2] = computeRequestBlockHashes(tokens.slice(0, 48), 16, 's') as [bigint, bigint, bigint];
    for (const events of [[CLEARED, stored([h0])], [stored([h1], h0)], [stored([h2], h1)]]) {
      pub.publish(encodeEventBatch(Date.now() / 1000, events, 0));
      await pub.flushed();
    }
    const f = new KvIndexFleet();
    fleet = f;
    const a: RouteEndpoint = {
      ...(await endpoint('a', 'g')),
      events: {
        kv: [pub.boundEndpoint ?? ''],
        replay: [pub.boundReplayEndpoint ?? ''],
        topic: 'kv',
        blockSize: 16,
      },
    };
    f.sync([a], new Set(['a']));
    for (let i = 0; i < 200 && f.status()[0]?.ranks[0]?.lastSeq !== 2; i++)
      await new Promise((r) => setTimeout(r, 25));
    expect(f.usability('a')).toEqual({
      usable: true,
      partial: true,
      reason: 'partial: replay starts at seq 2',
    });
    expect(f.status()[0]).toMatchObject({ usable: true, reason: 'partial: replay starts at seq 2' });
    // It holds one page of the three, and infers the two before it.
    expect(f.match([a], tokens, 's').get('a')).toEqual({
      deviceTokens: 48,
      hostTokens: 0,
      storageTokens: 0,
      partial: true,
    });
  });

  it("credits what one replica wrote through to the Deployment's shared L3 on the others of its fingerprint, while the status says it is reachable", async () => {
    const pub = await ZmqEventPublisher.open({
      endpoint: 'tcp://127.0.0.1:0',
      bind: true,
      replayEndpoint: 'tcp://127.0.0.1:0',
      bufferSteps: 10,
      hwm: 1000,
      topic: 'kv',
    });
    publisher = pub;
    // Replica a computed three pages: stored on its device, then acked on its host (and so backed up to L3).
    const tokens = Array.from({ length: 49 }, (_, i) => i);
    const pages = computeRequestBlockHashes(tokens.slice(0, 48), 16, 's');
    const on = (medium: StorageMedium): KvCacheEvent => ({
      type: 'BlockStored',
      blockHashes: pages,
      parentBlockHash: null,
      tokenIds: tokens.slice(0, 48),
      blockSize: 16,
      loraId: null,
      medium,
      cacheSalt: 's',
    });
    pub.publish(encodeEventBatch(Date.now() / 1000, [CLEARED, on('GPU'), on('CPU_PINNED')], 0));
    await pub.flushed();
    const f = new KvIndexFleet();
    fleet = f;
    const a: RouteEndpoint = {
      ...(await endpoint('a', 'g')),
      events: {
        kv: [pub.boundEndpoint ?? ''],
        replay: [pub.boundReplayEndpoint ?? ''],
        topic: 'kv',
        blockSize: 16,
      },
    };
    const b = await endpoint('b', 'g');
    const c = { ...(await endpoint('c', 'g')), fingerprint: 'fp-next' };
    const all = new Set(['a', 'b', 'c']);
    const scope = { deployment: 'ns/chat', reachableRoles: ['standalone' as const] };
    f.sync([a, b, c], all, scope);
    for (let i = 0; i < 200 && f.status().find((s) => s.endpoint === 'a')?.ranks[0]?.lastSeq !== 0; i++)
      await new Promise((r) => setTimeout(r, 25));
    const matches = f.match([a, b, c], tokens, 's');
    // a holds it itself: L3 adds nothing past its own match.
    expect(matches.get('a')).toEqual({ deviceTokens: 48, hostTokens: 0, storageTokens: 0, partial: false });
    // b never computed it and its own index is not live: the L3 part, as a floor beside the tree.
    expect(matches.get('b')).toEqual({ deviceTokens: 0, hostTokens: 0, storageTokens: 48, partial: true });
    // c is another identity: another directory.
    const storageOf = (m: Map<string, KvMatch>, id: string): number => m.get(id)?.storageTokens ?? 0;
    expect(storageOf(matches, 'c')).toBe(0);
    expect(storageOf(f.match([b], tokens, 'another-salt'), 'b')).toBe(0);
    // The status no longer says the tier is reachable: nothing is credited, the model is dropped.
    f.sync([a, b, c], all);
    expect(storageOf(f.match([b], tokens, 's'), 'b')).toBe(0);
    expect(f.l3.units).toBe(0);
  });

  it("measures a routed request's output from the store that extends its prompt, once someone listens", async () => {
    const pub = await ZmqEventPublisher.open({
      endpoint: 'tcp://127.0.0.1:0',
      bind: true,
      replayEndpoint: 'tcp://127.0.0.1:0',
      bufferSteps: 100,
      hwm: 1000,
      topic: 'kv',
    });
    publisher = pub;
    const f = new KvIndexFleet();
    fleet = f;
    const a: RouteEndpoint = {
      ...(await endpoint('a', 'g')),
      events: {
        kv: [pub.boundEndpoint ?? ''],
        replay: [pub.boundReplayEndpoint ?? ''],
        topic: 'kv',
        blockSize: 16,
      },
    };
    f.sync([a], new Set(['a']));
    const measured: unknown[] = [];
    // 40 prompt tokens: two whole pages, a tail of 8.
    const prompt = Array.from({ length: 40 }, (_, i) => 100 + i);
    const output = Array.from({ length: 30 }, (_, i) => 300 + i);
    f.expectOutput('a', 'before-listening', prompt, 's', 64);
    f.onOutput((endpoint, m) => measured.push({ endpoint, ...m }));
    f.match([a], prompt, 's');
    f.expectOutput('a', 'r1', prompt, 's', 64);
    // As SGLang stores it: the prompt's whole pages at prefill, prompt + output - 1 (69 tokens: 4 pages) at the end.
    const seq = [...prompt, ...output.slice(0, -1)];
    const [h0, h1, h2, h3] = computeRequestBlockHashes(seq, 16, 's') as [bigint, bigint, bigint, bigint];
    const page = (p: number): number[] => seq.slice(16 * p, 16 * (p + 1));
    const store = (hashes: bigint[], parent: bigint | null, tokenIds: number[]): KvCacheEvent => ({
      type: 'BlockStored',
      blockHashes: hashes,
      parentBlockHash: parent,
      tokenIds,
      blockSize: 16,
      loraId: null,
      medium: 'GPU',
      cacheSalt: 's',
    });
    for (const events of [
      [CLEARED, store([h0, h1], null, [...page(0), ...page(1)])],
      [store([h2, h3], h1, [...page(2), ...page(3)])],
    ]) {
      pub.publish(encodeEventBatch(Date.now() / 1000, events, 0));
      await pub.flushed();
    }
    for (let i = 0; i < 200 && measured.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
    // 40 + output - 1 in [64, 80): output in [25, 40], at most max_tokens.
    expect(measured).toEqual([{ endpoint: 'a', id: 'r1', min: 25, max: 40, cap: 64 }]);
  });
});
