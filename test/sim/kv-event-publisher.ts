// SGLang 0.5.23's ZmqEventPublisher on libzmq (the zeromq package; ADR 0005):
//
// - a PUB socket, bound or connected (kv-events-config.ts shouldBind), high
//   water mark `hwm`; each batch goes out as [topic, seq (8 bytes, big
//   endian), payload], seq counting from 0 in publish order;
// - the last `bufferSteps` (seq, payload) pairs are kept for replay;
// - with a replay endpoint, a ROUTER socket answers a request
//   [identity, "", start seq (8 bytes, big endian)] with every kept message
//   whose seq >= start, as [identity, "", topic, seq, payload], then the end
//   marker [identity, "", "", -1 (8 bytes), ""]; a request of any other
//   shape is ignored.
//
// Sends are serialised through one queue (libzmq sockets take one send at a
// time), as SGLang's publisher thread drains its queue.

import { Publisher, Router } from 'zeromq';
import { buildFrames } from './kv-event-codec.ts';
import { encodeSeq } from '#sglang/kv-events.ts';

export interface EventPublisherOptions {
  readonly endpoint: string;
  readonly bind: boolean;
  readonly replayEndpoint: string | null;
  readonly bufferSteps: number;
  readonly hwm: number;
  readonly topic: string;
}

const END_SEQ = encodeSeq(-1);
const EMPTY = Buffer.alloc(0);

export class ZmqEventPublisher {
  readonly #opts: EventPublisherOptions;
  readonly #pub: Publisher;
  readonly #replay: Router | null;
  readonly #buffer: [number, Buffer][] = [];
  readonly #queue: Buffer[] = [];
  #nextSeq = 0;
  #pumping: Promise<void> = Promise.resolve();
  #replayLoop: Promise<void> = Promise.resolve();
  #closed = false;

  private constructor(opts: EventPublisherOptions) {
    this.#opts = opts;
    this.#pub = new Publisher({ sendHighWaterMark: opts.hwm, linger: 0 });
    this.#replay = opts.replayEndpoint === null ? null : new Router({ linger: 0 });
  }

  static async open(opts: EventPublisherOptions): Promise<ZmqEventPublisher> {
    const p = new ZmqEventPublisher(opts);
    try {
      if (opts.bind) await p.#pub.bind(opts.endpoint);
      else p.#pub.connect(opts.endpoint);
      if (p.#replay && opts.replayEndpoint !== null) await p.#replay.bind(opts.replayEndpoint);
    } catch (e) {
      p.close();
      throw new Error(`cannot open the KV event sockets at ${opts.endpoint}`, { cause: e });
    }
    p.#replayLoop = p.#serveReplay();
    return p;
  }

  /** The PUB socket's bound address (its port when bound on port 0); null when it connects. */
  get boundEndpoint(): string | null {
    return this.#opts.bind ? this.#pub.lastEndpoint : null;
  }

  /** The replay ROUTER's bound address; null without a replay endpoint. */
  get boundReplayEndpoint(): string | null {
    return this.#replay?.lastEndpoint ?? null;
  }

  /** Sequence number the next published batch gets. */
  get nextSeq(): number {
    return this.#nextSeq;
  }

  /** Queue one encoded batch; it is sent after every batch published before it. */
  publish(payload: Buffer): void {
    if (this.#closed) throw new Error('publisher is closed');
    this.#queue.push(payload);
    if (this.#queue.length === 1) this.#pumping = this.#pump();
  }

  /** Resolves once every batch published so far has been handed to libzmq. */
  flushed(): Promise<void> {
    return this.#pumping;
  }

  async #pump(): Promise<void> {
    for (let payload = this.#queue[0]; payload; payload = this.#queue[0]) {
      const seq = this.#nextSeq++;
      try {
        await this.#pub.send(buildFrames(this.#opts.topic, seq, payload));
      } catch {
        if (this.#closed) return;
      }
      this.#buffer.push([seq, payload]);
      if (this.#buffer.length > this.#opts.bufferSteps) this.#buffer.shift();
      this.#queue.shift();
    }
  }

  async #serveReplay(): Promise<void> {
    const router = this.#replay;
    if (!router) return;
    const topic = Buffer.from(this.#opts.topic, 'utf8');
    try {
      for await (const frames of router) {
        const [id, , start] = frames;
        if (frames.length !== 3 || !id || !start) continue;
        const from = start.length === 0 ? 0n : BigInt(`0x${start.toString('hex')}`);
        for (const [seq, payload] of this.#buffer.filter(([s]) => BigInt(s) >= from)) {
          await router.send([id, EMPTY, topic, encodeSeq(seq), payload]);
        }
        await router.send([id, EMPTY, EMPTY, END_SEQ, EMPTY]);
      }
    } catch {
      // The socket was closed under the loop: replay ends with the publisher.
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#pub.close();
    this.#replay?.close();
  }

  /** Closes and waits for the replay loop to end. */
  async closed(): Promise<void> {
    this.close();
    await this.#replayLoop;
  }
}
