import { afterEach, describe, expect, it } from 'vitest';
import { Dealer, Subscriber } from 'zeromq';
import { ZmqEventPublisher } from './kv-event-publisher.ts';
import { encodeSeq } from '#sglang/kv-events.ts';
import { portOf } from '../support/sim/testing.ts';

// Real libzmq on both ends: a SUB as routers subscribe, a DEALER on the replay ROUTER.
const open: { close(): void }[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});

async function startPublisher(bufferSteps = 10) {
  const pub = await ZmqEventPublisher.open({
    endpoint: 'tcp://127.0.0.1:0',
    bind: true,
    replayEndpoint: 'tcp://127.0.0.1:0',
    bufferSteps,
    hwm: 100,
    topic: 'kv',
  });
  open.push(pub);
  const replay = new Dealer({ linger: 0, receiveTimeout: 5000 });
  replay.connect(pub.boundReplayEndpoint ?? '');
  open.push(replay);
  return { pub, pubPort: portOf(pub.boundEndpoint ?? ''), replay };
}

async function askReplay(replay: Dealer, from: number): Promise<string[][]> {
  await replay.send([Buffer.alloc(0), encodeSeq(from)]);
  const answers: string[][] = [];
  for (;;) {
    const frames = await replay.receive();
    answers.push(frames.map((f) => f.toString('hex')));
    if (frames[2]?.toString('hex') === 'ffffffffffffffff') return answers;
  }
}

describe('ZmqEventPublisher (libzmq)', () => {
  it('publishes [topic, 8-byte big-endian seq, payload], seq counting up by one', async () => {
    const { pub, pubPort } = await startPublisher();
    const sub = new Subscriber({ linger: 0, receiveTimeout: 20 });
    open.push(sub);
    sub.connect(`tcp://127.0.0.1:${pubPort}`);
    sub.subscribe('kv');
    // A SUB joins asynchronously: publish until the first message arrives.
    let got: Buffer[] = [];
    for (let i = 0; got.length === 0 && i < 200; i++) {
      pub.publish(Buffer.from([i]));
      await pub.flushed();
      got = await sub.receive().catch(() => []);
    }
    // Drain what else got through, checking each frame set.
    let last = -1;
    for (let m = got; m.length > 0; m = await sub.receive().catch(() => [])) {
      const seq = Number(m[1]?.readBigInt64BE() ?? -1n);
      expect(m[0]?.toString()).toBe('kv');
      expect(m[1]).toHaveLength(8);
      expect(m[2]).toEqual(Buffer.from([seq])); // the i-th payload went out as seq i
      if (last >= 0) expect(seq).toBe(last + 1);
      last = seq;
    }
    sub.receiveTimeout = 5000;
    pub.publish(Buffer.from('next'));
    const next = await sub.receive();
    expect(Number(next[1]?.readBigInt64BE())).toBe(last + 1);
    expect(next[2]?.toString()).toBe('next');
  });

  it('replays every kept message from a sequence number, then the end marker', async () => {
    const { pub, replay } = await startPublisher();
    for (const p of ['a', 'b', 'c']) pub.publish(Buffer.from(p));
    await pub.flushed();
    const hex = (s: string) => Buffer.from(s).toString('hex');
    expect(await askReplay(replay, 1)).toEqual([
      ['', hex('kv'), '0000000000000001', hex('b')],
      ['', hex('kv'), '0000000000000002', hex('c')],
      ['', '', 'ffffffffffffffff', ''],
    ]);
    expect(await askReplay(replay, 3)).toEqual([['', '', 'ffffffffffffffff', '']]);
  });

  it('keeps only the last buffer_steps messages for replay', async () => {
    const { pub, replay } = await startPublisher(2);
    for (const p of ['a', 'b', 'c']) pub.publish(Buffer.from(p));
    await pub.flushed();
    const seqs = (await askReplay(replay, 0)).map((f) => f[2]);
    expect(seqs).toEqual(['0000000000000001', '0000000000000002', 'ffffffffffffffff']);
  });

  it('ignores a replay request of another shape and keeps serving', async () => {
    const { pub, replay } = await startPublisher();
    pub.publish(Buffer.from('a'));
    await pub.flushed();
    await replay.send([Buffer.alloc(0), encodeSeq(0), Buffer.from('extra')]);
    expect((await askReplay(replay, 0)).map((f) => f[2])).toEqual(['0000000000000000', 'ffffffffffffffff']);
  });
});
