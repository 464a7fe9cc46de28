// The gateway tier's load, shared: each replica publishes its own share of
// every runtime's load (requests in flight from it, the prefill backlog and
// decode tokens its policy predicts there) and subscribes to every other
// replica's, so a policy weighs the tier's load, not one replica's part.
//
// Transport: ZeroMQ PUB/SUB, as the runtimes' KV events and load already are.
// Each replica binds one PUB socket (--load-exchange-port) and connects one
// SUB socket to every peer the gateway Service's EndpointSlices list
// (discovery/peer-slices.ts), terminating ones included: a draining replica's
// requests still load the runtimes.
//
// Messages carry a replica's whole share (absolute counts per endpoint), not
// per-request events: PUB drops at its high-water mark and a subscriber that
// joins late misses what came before, so each message must stand alone. A
// change goes out on the next event-loop turn (changes in one turn coalesce),
// an unchanged share once per heartbeat; a peer silent for staleAfterMs
// (three heartbeats) no longer counts, so a replica that died leaves no load
// behind. Frames: [b"share", JSON ShareMessage].
//
// Staleness: a message that carries a change says when (sender's wall clock)
// its oldest coalesced change happened; the receiver records now - changedAt
// (onLag), i.e. how old its view of that peer was when it caught up, and keeps
// the recent ones (lag-window.ts): a high quantile of them is how long a pick
// takes to reach the peers (unheardMs), which a policy waits out in a burst.

import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { Publisher, Subscriber } from 'zeromq';
import { monotonicClock, type Clock } from '#kube/clock.ts';
import type { PeerShare } from '../policies/index.ts';
import { LagWindow, type LagWindowOptions } from './lag-window.ts';
import { TierBursts } from './tier-bursts.ts';
import { UnheardPicks } from './unheard-picks.ts';

const TOPIC = 'share';
const MAX_MESSAGE_BYTES = 1024 * 1024;
const MAX_ENDPOINTS = 4096;
const MAX_PEERS = 256;
/** Pick times one message carries at most (more in one event-loop turn: the latest). */
const MAX_PICKS = 256;

const Count = z.number().finite().min(0);
const ShareMessage = z.object({
  from: z.string().min(1).max(253),
  /** Random per process: a restarted replica is a new life, its seq starts again. */
  life: z.string().min(1).max(64),
  seq: z.number().int().min(0),
  /** Sender's wall clock (ms) at its oldest change in this message; absent in a heartbeat. */
  changedAt: z.number().finite().optional(),
  /** Sender's wall clock (ms) at the arrival of each request it routed since its last message. */
  picks: z.array(z.number().finite()).max(MAX_PICKS).optional(),
  /** Endpoint id → [in flight, prefill tokens, decode tokens]. */
  endpoints: z
    .record(z.string().max(512), z.tuple([Count, Count, Count]))
    .refine((r) => Object.keys(r).length <= MAX_ENDPOINTS, `at most ${MAX_ENDPOINTS} endpoints`),
});
type ShareMessage = z.infer<typeof ShareMessage>;

/** A share message's fields, or null for anything else (a broken or foreign message is skipped, not fatal). */
export function decodeShareMessage(payload: Uint8Array): ShareMessage | null {
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(payload).toString('utf8'));
  } catch {
    return null;
  }
  const parsed = ShareMessage.safeParse(json);
  return parsed.success ? parsed.data : null;
}

interface Peer {
  readonly life: string;
  readonly shares: ReadonlyMap<string, PeerShare>;
  seq: number;
  at: number;
}

export interface LoadExchangeOptions {
  /** This replica's name (pod name): its own messages, heard back through a peer list that includes it, are ignored. */
  readonly self: string;
  readonly clock?: Clock;
  /** Wall clock for the staleness measure (ms, sub-ms resolution by default). */
  readonly wallClock?: () => number;
  readonly heartbeatMs?: number;
  readonly staleAfterMs?: number;
  /** Each caught-up change: how old the view of that peer was, in ms. */
  readonly onLag?: (ms: number) => void;
  /** How the recent lags make unheardMs (quantile, bounds, fallback). */
  readonly lagWindow?: LagWindowOptions;
}

export class LoadExchange {
  readonly #self: string;
  readonly #clock: Clock;
  readonly #wall: () => number;
  readonly #heartbeatMs: number;
  readonly #staleAfterMs: number;
  readonly #onLag: ((ms: number) => void) | undefined;
  readonly #lags: LagWindow;
  readonly #bursts = new TierBursts();
  readonly #peerPicks = new UnheardPicks();
  #picks: number[] = [];
  readonly #pub = new Publisher({ linger: 0, sendHighWaterMark: 64 });
  readonly #sub = new Subscriber({ linger: 0, maxMessageSize: MAX_MESSAGE_BYTES });
  readonly #connected = new Set<string>();
  readonly #local = new Map<string, PeerShare>();
  readonly #peers = new Map<string, Peer>();
  readonly #life = randomUUID();
  #seq = 0;
  #changedAt: number | undefined;
  #flushQueued = false;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  #closed = false;

  constructor(opts: LoadExchangeOptions) {
    this.#self = opts.self;
    this.#clock = opts.clock ?? monotonicClock;
    // Wall time with sub-millisecond resolution: on one host the lag is well under a millisecond.
    this.#wall = opts.wallClock ?? (() => performance.timeOrigin + performance.now());
    this.#heartbeatMs = opts.heartbeatMs ?? 1000;
    this.#staleAfterMs = opts.staleAfterMs ?? 3 * this.#heartbeatMs;
    this.#onLag = opts.onLag;
    this.#lags = new LagWindow(opts.lagWindow);
    this.#sub.subscribe(TOPIC);
  }

  /** Bind the PUB socket (`tcp://0.0.0.0:7100`, or port 0 / `*` for any); returns the address bound. */
  async bind(address: string): Promise<string> {
    await this.#pub.bind(address);
    this.#heartbeat = setInterval(() => this.#send(false), this.#heartbeatMs);
    this.#heartbeat.unref();
    void this.#receive();
    return this.#pub.lastEndpoint ?? address;
  }

  /** Follow the peers: connect to new addresses (`tcp://host:port`), disconnect from the ones gone. */
  connect(addresses: readonly string[]): void {
    if (this.#closed) return;
    const want = new Set(addresses.slice(0, MAX_PEERS));
    for (const a of this.#connected)
      if (!want.has(a)) {
        this.#sub.disconnect(a);
        this.#connected.delete(a);
      }
    for (const a of want)
      if (!this.#connected.has(a)) {
        this.#sub.connect(a);
        this.#connected.add(a);
      }
  }

  /** This replica's share of an endpoint's load changed: the peers hear of it on the next turn. */
  update(endpointId: string, share: PeerShare): void {
    const prev = this.#local.get(endpointId);
    if (
      prev?.inFlight === share.inFlight &&
      prev.prefillTokens === share.prefillTokens &&
      prev.decodeTokens === share.decodeTokens
    )
      return;
    this.#local.set(endpointId, share);
    this.#changedAt ??= this.#wall();
    if (this.#flushQueued || this.#closed) return;
    this.#flushQueued = true;
    setImmediate(() => {
      this.#flushQueued = false;
      this.#send(true);
    });
  }

  /** The other replicas' shares of an endpoint, summed; undefined when no live peer has spoken. */
  peersOf(endpointId: string): PeerShare | undefined {
    const now = this.#clock.now();
    let out: { inFlight: number; prefillTokens: number; decodeTokens: number } | undefined;
    for (const [name, p] of this.#peers) {
      if (now - p.at > this.#staleAfterMs) {
        this.#peers.delete(name);
        continue;
      }
      const s = p.shares.get(endpointId);
      out ??= { inFlight: 0, prefillTokens: 0, decodeTokens: 0 };
      if (!s) continue;
      out.inFlight += s.inFlight;
      out.prefillTokens += s.prefillTokens;
      out.decodeTokens += s.decodeTokens;
    }
    return out;
  }

  /**
   * How long a pick takes to reach the peers (ms): a high quantile of the lags measured lately,
   * bounded; a fixed fallback until enough were measured.
   */
  unheardMs(): number {
    return this.#lags.unheardMs(this.#clock.now());
  }

  /**
   * A request this replica routed arrived at `arrivedAt` (its clock's ms): noted for the tier's
   * burst test here, and sent to the peers with the next share (wall clock: theirs to compare).
   */
  notePick(arrivedAt: number): void {
    const at = this.#wall() - Math.max(0, this.#clock.now() - arrivedAt);
    this.#bursts.note(at);
    if (this.#picks.length >= MAX_PICKS) this.#picks.shift();
    this.#picks.push(at);
  }

  /** The peers' picks expected in transit to this replica now: their rate x the mean lag (unheard-picks.ts). */
  unheardPicks(): number {
    return this.#peerPicks.expected(this.#wall(), this.#lags.meanMs(this.#clock.now()));
  }

  /** Whether the tier's requests arrive together, within the exchange's lag (tier-bursts.ts). */
  bursty(): boolean {
    return this.#bursts.bursty(this.unheardMs());
  }

  /** Peers heard from within staleAfterMs, by name. */
  livePeers(): string[] {
    const now = this.#clock.now();
    return [...this.#peers].filter(([, p]) => now - p.at <= this.#staleAfterMs).map(([n]) => n);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    this.#pub.close();
    this.#sub.close();
  }

  #send(changed: boolean): void {
    if (this.#closed) return;
    const endpoints: ShareMessage['endpoints'] = {};
    for (const [id, s] of this.#local) {
      endpoints[id] = [s.inFlight, s.prefillTokens, s.decodeTokens];
      // A zero share goes out once, then leaves the message.
      if (s.inFlight === 0 && s.prefillTokens === 0 && s.decodeTokens === 0) this.#local.delete(id);
    }
    const msg: ShareMessage = {
      from: this.#self,
      life: this.#life,
      seq: this.#seq++,
      ...(changed && this.#changedAt !== undefined ? { changedAt: this.#changedAt } : {}),
      ...(this.#picks.length > 0 ? { picks: this.#picks } : {}),
      endpoints,
    };
    if (changed) this.#changedAt = undefined;
    this.#picks = [];
    // PUB never blocks while the queue has room; a full queue sheds, and the next message supersedes.
    this.#pub.send([TOPIC, JSON.stringify(msg)]).catch(() => undefined);
  }

  async #receive(): Promise<void> {
    try {
      for await (const [, payload] of this.#sub) {
        if (!payload) continue;
        const msg = decodeShareMessage(payload);
        if (!msg || msg.from === this.#self) continue;
        const known = this.#peers.get(msg.from);
        if (known?.life === msg.life && msg.seq <= known.seq) continue;
        if (!known && this.#peers.size >= MAX_PEERS) continue;
        const shares = new Map<string, PeerShare>();
        for (const [id, [inFlight, prefillTokens, decodeTokens]] of Object.entries(msg.endpoints))
          if (inFlight > 0 || prefillTokens > 0 || decodeTokens > 0)
            shares.set(id, { inFlight, prefillTokens, decodeTokens });
        this.#peers.set(msg.from, { life: msg.life, shares, seq: msg.seq, at: this.#clock.now() });
        for (const at of msg.picks ?? []) {
          this.#bursts.note(at);
          this.#peerPicks.note(at);
        }
        if (msg.changedAt !== undefined) {
          const lag = Math.max(0, this.#wall() - msg.changedAt);
          this.#lags.add(lag, this.#clock.now());
          this.#onLag?.(lag);
        }
      }
    } catch {
      // closed
    }
  }
}
