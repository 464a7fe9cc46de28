import { describe, expect, it } from 'vitest';
import type { KvCacheEvent } from '#sglang/kv-events.ts';
import { encodeEventBatch } from '../../../test/sim/kv-event-codec.ts';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { createRng, pickInt } from '../../../test/support/gateway/rng.ts';
import { KvBlockIndex } from './block-index.ts';
import { KvEventFeed } from './feed.ts';
import { computeRequestBlockHashes } from './request-hashes.ts';
import { CLEARED, SimCache, stored } from '../../../test/support/gateway/sim-stream.ts';

/** A publisher's side, in memory: numbered batches and the last `bufferSteps` of them for replay. */
class FakePublisher {
  readonly kept: [number, Buffer][] = [];
  #next = 0;
  #ts = 1_000;
  readonly bufferSteps: number;
  constructor(bufferSteps = 10_000) {
    this.bufferSteps = bufferSteps;
  }

  publish(events: readonly KvCacheEvent[]): [number, Buffer] {
    const msg: [number, Buffer] = [this.#next++, encodeEventBatch(this.#ts++, events, 0)];
    this.kept.push(msg);
    if (this.kept.length > this.bufferSteps) this.kept.shift();
    return msg;
  }

  replay(from: number): [number, Buffer][] {
    return this.kept.filter(([s]) => s >= from);
  }
}

/** The wall clock when the subscriber reads a live batch off the socket. */
let wall = 5_000_000;
const read = (extra: { afterReplay?: boolean } = {}) => ({ receivedAt: wall, ...extra });

function setup() {
  const clock = new ManualClock();
  wall = 5_000_000;
  const index = new KvBlockIndex();
  const feed = new KvEventFeed(index, { clock });
  return { clock, index, feed, setWall: (ms: number) => (wall = ms) };
}

/** What the subscriber does with a live batch: apply, or replay and offer it again. */
function deliver(feed: KvEventFeed, pub: FakePublisher, [seq, payload]: [number, Buffer]): string {
  const step = feed.live(seq, payload, read());
  if (step !== 'gap') return step;
  catchUp(feed, pub);
  return `gap, then ${feed.live(seq, payload, read({ afterReplay: true }))}`;
}

function catchUp(feed: KvEventFeed, pub: FakePublisher): void {
  for (let round = 0; round < 3; round++) {
    for (const [s, p] of pub.replay(feed.beginReplay())) feed.replayed(s, p);
    if (feed.endReplay() === 'done') return;
  }
}

describe('KvEventFeed', () => {
  it('applies batches in sequence from seq 0: complete, with lag against the wall clock and the time applied', () => {
    const { feed, index, clock, setWall } = setup();
    const pub = new FakePublisher();
    clock.advance(42);
    setWall(1_000_250); // the batch's ts is 1000 s
    expect(deliver(feed, pub, pub.publish([CLEARED, stored([1n, 2n])]))).toBe('applied');
    expect(deliver(feed, pub, pub.publish([stored([3n], 2n)]))).toBe('applied');
    expect(feed.state).toEqual({
      lastSeq: 1,
      complete: true,
      converged: false,
      note: '',
      lastEventAt: 42,
      lagMs: -750,
    });
    expect(index.matchPrefix([1n, 2n, 3n]).pages).toBe(3);
  });

  it('fills a gap from the replay, then skips the batch that revealed it as already applied', () => {
    const { feed, index } = setup();
    const pub = new FakePublisher();
    deliver(feed, pub, pub.publish([stored([1n])]));
    pub.publish([stored([2n], 1n)]); // lost on the way
    const third = pub.publish([stored([3n], 2n)]);
    expect(deliver(feed, pub, third)).toBe('gap, then duplicate');
    expect(feed.state).toMatchObject({ lastSeq: 2, complete: true });
    expect(index.matchPrefix([1n, 2n, 3n]).pages).toBe(3);
    expect(feed.counters).toMatchObject({ replays: 1, restarts: 0, applied: 3 });
  });

  it('starts from the replay on a late join: complete when it still holds seq 0, incomplete when it rolled over', () => {
    const full = new FakePublisher();
    const rolled = new FakePublisher(2);
    for (const pub of [full, rolled]) {
      pub.publish([CLEARED, stored([1n])]);
      pub.publish([stored([2n], 1n)]);
      pub.publish([stored([3n], 2n)]);
    }
    const a = setup();
    catchUp(a.feed, full);
    expect(a.feed.state).toMatchObject({ lastSeq: 2, complete: true });
    expect(a.index.matchPrefix([1n, 2n, 3n]).pages).toBe(3);
    const b = setup();
    catchUp(b.feed, rolled);
    expect(b.feed.state).toMatchObject({ lastSeq: 2, complete: false, note: 'replay starts at seq 1' });
    // Block 1 was stored before what was kept: the store of block 2 under it says the runtime holds it.
    expect(b.index.get(1n)).toEqual({ parent: null, media: 1 });
    expect(b.index.matchPrefix([1n]).pages).toBe(1);
    expect(b.index.matchPrefix([1n, 2n, 3n]).pages).toBe(3);
    expect(b.index.size).toBe(3);
    // A flush makes the index exact again.
    deliver(b.feed, rolled, rolled.publish([CLEARED]));
    expect(b.feed.state).toMatchObject({ complete: true, note: '' });
  });

  it('converges after a late join, without a flush: complete once a page it saw stored left every tier stored to (LRU)', () => {
    const pub = new FakePublisher(2);
    pub.publish([CLEARED, stored([1n])]);
    pub.publish([stored([2n], 1n)]);
    pub.publish([stored([3n], 2n)]);
    const { feed, index } = setup();
    catchUp(feed, pub);
    expect(feed.state).toMatchObject({ complete: false, converged: false, note: 'replay starts at seq 1' });
    const host = (hashes: bigint[], parent: bigint | null): KvCacheEvent => {
      const e = stored(hashes, parent);
      return e.type === 'BlockStored' ? { ...e, medium: 'CPU_PINNED' } : e;
    };
    const removed = (hashes: bigint[], medium: 'GPU' | 'CPU_PINNED' = 'GPU'): KvCacheEvent => ({
      type: 'BlockRemoved',
      blockHashes: hashes,
      medium,
    });
    // Block 1, older than the index, taken as held from its child's store: its eviction proves nothing newer went.
    deliver(feed, pub, pub.publish([removed([1n])]));
    expect(feed.state.complete).toBe(false);
    // The host tier gets a copy of block 2; then the device evicts block 3, stored since the index started.
    deliver(feed, pub, pub.publish([host([2n], 1n)]));
    deliver(feed, pub, pub.publish([removed([3n])]));
    expect(feed.state.complete).toBe(false); // the host tier has not turned over yet
    deliver(feed, pub, pub.publish([removed([2n], 'CPU_PINNED')]));
    expect(feed.state).toMatchObject({ complete: true, converged: true, note: '' });
    expect(feed.counters.converged).toBe(1);
    expect(index.matchPrefix([1n, 2n]).byMedium).toMatchObject({ GPU: 2, CPU_PINNED: 0 });
    // A flush: exact from there.
    deliver(feed, pub, pub.publish([CLEARED]));
    expect(feed.state).toMatchObject({ complete: true, converged: false });
  });

  it('asks again from where an answer broke: a hole after its first batch was dropped on the way, not rolled over', () => {
    const pub = new FakePublisher();
    for (let i = 0; i < 6; i++)
      pub.publish(i === 0 ? [CLEARED, stored([1n])] : [stored([BigInt(i + 1)], BigInt(i))]);
    const { feed, index } = setup();
    const rounds: number[] = [];
    let outcome = 'again';
    for (let round = 0; outcome === 'again' && round < 5; round++) {
      const from = feed.beginReplay();
      rounds.push(from);
      // The first answer loses seq 3 (a full pipe at the ROUTER); the second, its end marker.
      const answer = pub.replay(from).filter(([s]) => round > 0 || s !== 3);
      for (const [s, p] of round === 1 ? answer.slice(0, 2) : answer) feed.replayed(s, p);
      outcome = feed.endReplay({ cut: round === 1 });
    }
    expect(rounds).toEqual([0, 2, 3]);
    expect(feed.state).toMatchObject({ lastSeq: 5, complete: true, note: '' });
    expect(feed.counters).toMatchObject({ restarts: 0, replays: 3 });
    expect(index.matchPrefix([1n, 2n, 3n, 4n, 5n, 6n]).pages).toBe(6);
  });

  it('drops the index when the replay no longer covers a gap (the buffer rolled over)', () => {
    const { feed, index } = setup();
    const pub = new FakePublisher(2);
    deliver(feed, pub, pub.publish([CLEARED, stored([1n])]));
    pub.publish([stored([2n], 1n)]);
    pub.publish([stored([3n], 2n)]);
    const last = pub.publish([stored([4n], 3n)]);
    expect(deliver(feed, pub, last)).toBe('gap, then duplicate');
    expect(feed.state).toMatchObject({
      lastSeq: 3,
      complete: false,
      note: 'replay could not cover seq 1..1',
    });
    expect(index.size).toBe(3); // 3 and 4: what the replay still had, and 2, their parent
    expect(feed.counters.restarts).toBe(1);
  });

  it('drops the index when the publisher restarts (seq back to 0), and applies the new seq 0', () => {
    const { feed, index } = setup();
    const old = new FakePublisher();
    for (let i = 0; i < 3; i++) deliver(feed, old, old.publish([stored([BigInt(10 + i)])]));
    const fresh = new FakePublisher();
    expect(deliver(feed, fresh, fresh.publish([stored([1n])]))).toBe('applied');
    expect(feed.state).toMatchObject({ lastSeq: 0, complete: true });
    expect(feed.state.note).toMatch(/publisher restarted/);
    expect(index.matchPrefix([10n]).pages).toBe(0);
    expect(index.matchPrefix([1n]).pages).toBe(1);
  });

  it('drops the index when the restarted publisher has passed seq 0: its replay has other bytes for our last seq', () => {
    const { feed, index } = setup();
    const old = new FakePublisher();
    for (let i = 0; i < 3; i++) deliver(feed, old, old.publish([stored([BigInt(10 + i)])]));
    const fresh = new FakePublisher();
    for (let i = 0; i < 5; i++) fresh.publish([stored([BigInt(20 + i)])]);
    // A reconnect: the subscriber verifies before going on.
    catchUp(feed, fresh);
    expect(feed.counters).toMatchObject({ replays: 2, restarts: 1 });
    expect(feed.state).toMatchObject({ lastSeq: 4, complete: true });
    expect(index.size).toBe(5);
    expect(index.matchPrefix([10n]).pages).toBe(0);
  });

  it('verifies an unchanged publisher on reconnect without touching the index', () => {
    const { feed, index } = setup();
    const pub = new FakePublisher();
    for (let i = 0; i < 3; i++) deliver(feed, pub, pub.publish([stored([BigInt(i)])]));
    catchUp(feed, pub);
    expect(feed.counters).toMatchObject({ replays: 1, restarts: 0, applied: 3 });
    expect(index.size).toBe(3);
  });

  it('with no replay, adopts the next live batch after a gap and says the index is incomplete', () => {
    const { feed, index } = setup();
    const pub = new FakePublisher();
    feed.live(...pub.publish([stored([1n])]), read());
    pub.publish([stored([2n], 1n)]);
    const [seq, payload] = pub.publish([stored([3n], 2n)]);
    expect(feed.live(seq, payload, read())).toBe('gap');
    feed.failReplay('no replay endpoint');
    expect(feed.live(seq, payload, read({ afterReplay: true }))).toBe('applied');
    expect(feed.state).toMatchObject({
      lastSeq: 2,
      complete: false,
      note: 'no replay endpoint; index restarted at seq 2',
    });
    expect(index.size).toBe(2); // 3 and its parent 2
  });

  it('restarts the index after a batch that does not decode, and recovers on the next AllBlocksCleared', () => {
    const { feed, index } = setup();
    const pub = new FakePublisher();
    deliver(feed, pub, pub.publish([stored([1n])]));
    expect(feed.live(1, Buffer.from([0x93, 0xc0]), read())).toBe('applied');
    expect(feed.state).toMatchObject({ lastSeq: 1, complete: false });
    expect(feed.state.note).toMatch(/^batch 1 did not decode/);
    expect(feed.counters).toMatchObject({ malformed: 1, restarts: 1 });
    expect(index.size).toBe(0);
    pub.publish([]); // the publisher's seq 1, which we got mangled
    deliver(feed, pub, pub.publish([CLEARED, stored([5n])]));
    expect(feed.state).toMatchObject({ lastSeq: 2, complete: true });
  });

  it.each([
    { seed: 11, bufferSteps: 10_000 },
    { seed: 12, bufferSteps: 10_000 },
    { seed: 13, bufferSteps: 3 },
    { seed: 14, bufferSteps: 1 },
  ])(
    'over a lossy delivery of a random stream: exact with a big enough replay, never over-reporting without (seed $seed, buffer $bufferSteps)',
    ({ seed, bufferSteps }) => {
      const rng = createRng(seed);
      const sim = new SimCache(
        { pageSize: 2, hostCapacity: 64, writePolicy: 'write_through', deviceCapacity: 120 },
        rng,
      );
      const { feed, index } = setup();
      const pub = new FakePublisher(bufferSteps);
      let lost = 0;
      for (let step = 0; step < 300; step++) {
        sim.step(rng);
        const events = sim.drain();
        if (events.length === 0) continue;
        const msg = pub.publish(events);
        // Lose a run of batches now and then (a slow subscriber past the high-water mark).
        if (lost > 0 || pickInt(rng, 0, 12) === 0) {
          lost = lost > 0 ? lost - 1 : pickInt(rng, 0, 4);
          continue;
        }
        deliver(feed, pub, msg);
        for (let q = 0; q < 3; q++) {
          const req = sim.randomRequest(rng);
          const got = index.matchPrefix(computeRequestBlockHashes(req.tokens, 2, req.salt));
          const want = sim.cachedPages(req);
          if (feed.state.complete && !feed.state.converged) {
            expect([step, got.byMedium.GPU, got.byMedium.CPU_PINNED]).toEqual([step, want.gpu, want.host]);
          } else {
            // Converged: what was hit since the start and had nothing stored under it may be missing.
            expect(got.pages).toBeLessThanOrEqual(want.gpu + want.host);
          }
        }
      }
      expect(feed.counters.replays).toBeGreaterThan(5);
      if (bufferSteps > 100) expect(feed.counters.restarts).toBe(0);
      // Lost batches restart the index; the runtime's evictions make it complete again before any flush.
      else
        expect(feed.counters).toMatchObject({ restarts: expect.any(Number), converged: expect.any(Number) });
      if (bufferSteps <= 100)
        expect(Math.min(feed.counters.restarts, feed.counters.converged)).toBeGreaterThan(0);
    },
  );
});
