// Every endpoint's KV index, following the routing table: one subscriber per
// data-parallel rank of each endpoint that publishes events, opened when the
// endpoint appears, replaced when it becomes another process (generation) or
// its addresses change, closed when it goes. Each gateway replica subscribes
// to every publisher, so all replicas route from the same view of the caches.
//
// match() answers only for an endpoint whose index can be trusted now: live
// (connected, not catching up, not stale) and not lagging past maxLagMs;
// otherwise it says why, and routing falls back to the response-corrected
// tree for that endpoint. An index that is not complete (it started after
// the publisher's replay had rolled over, feed.ts) answers as partial: it
// under-reports prefixes nothing was stored under since, so routing takes
// it as a floor beside the tree. Refusing it would leave a gateway that
// restarts on a busy fleet on the tree until the index converges (feed.ts).
// Ranks: a request reaches one rank, chosen by SGLang's DP controller, which
// the gateway cannot see; the best rank's match stands in.
//
// A Deployment whose status says its HiCache L3 tier is reachable (status.l3[])
// shares that tier among the replicas of a role and fingerprint: the fleet
// feeds every member's events into one model of it (shared-l3.ts) and credits
// what it holds past an endpoint's own match as storage tokens, on every
// member, including one whose own index cannot answer (then as a partial
// match: a floor beside the tree).

import type { KvCacheEvent, StorageMedium } from '#sglang/kv-events.ts';
import type { EndpointRole, RouteEndpoint } from '../routing/table.ts';
import type { Clock } from '#kube/clock.ts';
import { DEFAULT_GATEWAY_MAX_BLOCKS, KvBlockBudget } from './block-budget.ts';
import { OutputAttribution, type MeasuredOutput } from './output-attribution.ts';
import { PackedBlockHashes } from './packed-hashes.ts';
import { computeRequestPackedHashes } from './request-hashes.ts';
import { SharedL3Index, type L3Unit, type L3UnitStatus } from './shared-l3.ts';
import { KvEventSubscriber, KvIndexState, type KvIndexStatus } from './subscriber.ts';

/** Tokens of a request's prefix an endpoint holds, by tier (device = GPU, host = CPU_PINNED, storage = the rest). */
export interface KvMatch {
  readonly deviceTokens: number;
  readonly hostTokens: number;
  readonly storageTokens: number;
  /** The index is not complete: a floor (see above). */
  readonly partial: boolean;
}

export type KvUsability =
  | { readonly usable: true; readonly partial: false }
  /** `reason`: why the index may lack pages the runtime holds. */
  | { readonly usable: true; readonly partial: true; readonly reason: string }
  | { readonly usable: false; readonly reason: string };

export interface EndpointKvStatus {
  readonly endpoint: string;
  readonly usable: boolean;
  readonly reason: string;
  readonly ranks: readonly KvIndexStatus[];
}

/** The slowest rank's event lag, whole milliseconds; null while no rank has measured one. */
export function computeSlowestLagMs(status: EndpointKvStatus): number | null {
  const lags = status.ranks.map((r) => r.lagMs).filter((l): l is number => l !== null);
  return lags.length > 0 ? Math.round(Math.max(...lags)) : null;
}

/** A Deployment's shared L3 tiers, for sync: the roles whose tier its status says is reachable. */
export interface L3Scope {
  /** namespace/name of the Deployment. */
  readonly deployment: string;
  readonly reachableRoles: readonly EndpointRole[];
}

export interface KvIndexFleetOptions {
  readonly clock?: Clock;
  /** An index whose last batch trails the publisher by more than this is not trusted (default 5 s). */
  readonly maxLagMs?: number;
  readonly staleAfterMs?: number;
  readonly replayTimeoutMs?: number;
  /** Blocks all the indexes hold together (block-budget.ts); past it the largest gives up its oldest. */
  readonly maxBlocks?: number;
  /** Opens one rank's subscription (tests substitute nothing here; it is the real socket). */
  readonly open?: (opts: Parameters<typeof KvEventSubscriber.start>[0]) => KvEventSubscriber;
}

/** An output length measured from `endpoint`'s KV events; `cap`: the request's max_tokens. */
export type OutputListener = (endpoint: string, measured: MeasuredOutput) => void;

interface Subscription {
  readonly key: string;
  readonly blockSize: number;
  readonly ranks: readonly KvEventSubscriber[];
}

const DEFAULT_MAX_LAG_MS = 5_000;

export class KvIndexFleet {
  /** Every index's blocks together, bounded (for the metrics). */
  readonly budget: KvBlockBudget;
  /** What each Deployment's shared L3 tier holds (shared-l3.ts). */
  readonly l3: SharedL3Index;
  readonly #opts: KvIndexFleetOptions;
  readonly #open: NonNullable<KvIndexFleetOptions['open']>;
  readonly #subs = new Map<string, Subscription>();
  /** Routed requests' finishing stores (output-attribution.ts), followed while someone listens. */
  readonly #outputs = new OutputAttribution();
  #onOutput: OutputListener | undefined;
  /** Each prompt's packed page hashes by page size and salt, from the match to the pick's expectOutput. */
  readonly #promptHashes = new WeakMap<readonly number[], Map<string, PackedBlockHashes>>();
  #closed = false;

  constructor(opts: KvIndexFleetOptions = {}) {
    this.#opts = opts;
    this.budget = new KvBlockBudget(opts.maxBlocks ?? DEFAULT_GATEWAY_MAX_BLOCKS);
    this.l3 = new SharedL3Index({ budget: this.budget });
    this.#open = opts.open ?? ((o) => KvEventSubscriber.start(o));
  }

  /**
   * Follow one deployment's endpoints; `all` lists every endpoint id the table holds (others are
   * closed); `l3`: its shared L3 tiers, when its status reports any.
   */
  sync(endpoints: readonly RouteEndpoint[], all: ReadonlySet<string>, l3?: L3Scope): void {
    if (this.#closed) return;
    for (const e of endpoints) {
      this.l3.bind(e.id, l3UnitOf(e, l3));
      const key = subscriptionKey(e);
      const current = this.#subs.get(e.id);
      if (current?.key === key) continue;
      if (current) this.#closeSub(e.id, current);
      if (!e.events || key === '') continue;
      const ev = e.events;
      const id = e.id;
      const ranks = ev.kv.map((endpoint, r) =>
        this.#open({
          endpoint,
          onEvents: (events) => {
            this.l3.record(id, events);
            if (this.#onOutput) this.#measureOutputs(id, events);
          },
          replayEndpoint: ev.replay?.[r] ?? null,
          topic: ev.topic,
          budget: this.budget,
          ...(this.#opts.clock ? { clock: this.#opts.clock } : {}),
          ...(this.#opts.staleAfterMs !== undefined ? { staleAfterMs: this.#opts.staleAfterMs } : {}),
          // A lag past the bound holds as long as the bound, then a quiet runtime is not lagging.
          ...(this.#opts.maxLagMs !== undefined ? { lagHoldMs: this.#opts.maxLagMs } : {}),
          ...(this.#opts.replayTimeoutMs !== undefined
            ? { replayTimeoutMs: this.#opts.replayTimeoutMs }
            : {}),
        }),
      );
      this.#subs.set(e.id, { key, blockSize: ev.blockSize, ranks });
    }
    for (const [id, sub] of this.#subs) if (!all.has(id)) this.#closeSub(id, sub);
    for (const id of this.l3.boundEndpoints()) if (!all.has(id)) this.l3.unbind(id);
    this.l3.prune();
  }

  /** `endpointId` is followed and each rank's index is past its first catch-up (readiness.ts). */
  caughtUp(endpointId: string): boolean {
    const sub = this.#subs.get(endpointId);
    return sub !== undefined && sub.ranks.every((r) => r.caughtUpOnce);
  }

  /** Whether `endpointId`'s index may route now, and if not why. */
  usability(endpointId: string): KvUsability {
    const sub = this.#subs.get(endpointId);
    if (!sub) return { usable: false, reason: 'the runtime publishes no KV events' };
    const maxLag = this.#opts.maxLagMs ?? DEFAULT_MAX_LAG_MS;
    let partial: string | null = null;
    for (const s of sub.ranks.map((r) => r.health())) {
      if (s.state !== KvIndexState.live) return { usable: false, reason: `${s.state}: ${s.reason}` };
      if (s.lagMs !== null && s.lagMs > maxLag)
        return { usable: false, reason: `events lag ${Math.round(s.lagMs)} ms (bound ${maxLag} ms)` };
      if (!s.complete) partial ??= `partial: ${s.reason}`;
    }
    return partial === null
      ? { usable: true, partial: false }
      : { usable: true, partial: true, reason: partial };
  }

  /**
   * The prefix of `tokens` (exact token ids, as the runtime tokenizes) each usable endpoint
   * holds under `salt`; endpoints absent from the answer fall back to the tree.
   */
  match(endpoints: readonly RouteEndpoint[], tokens: readonly number[], salt: string): Map<string, KvMatch> {
    const out = new Map<string, KvMatch>();
    const hashesBySize = new Map<number, PackedBlockHashes>();
    const hashesOf = (blockSize: number): PackedBlockHashes => {
      let hashes = hashesBySize.get(blockSize);
      if (!hashes) {
        // SGLang matches at most all but the last prompt token (its logits are computed): the
        // prompt's pages are hashed once (expectOutput reads its last whole page), matched but the last.
        const whole = this.#promptHashesOf(tokens, blockSize, salt);
        const matchable = Math.floor(Math.max(0, tokens.length - 1) / blockSize);
        hashes =
          matchable === whole.length ? whole : new PackedBlockHashes(whole.halves.subarray(0, 2 * matchable));
        hashesBySize.set(blockSize, hashes);
      }
      return hashes;
    };
    for (const e of endpoints) {
      const sub = this.#subs.get(e.id);
      const usability = this.usability(e.id);
      let best: KvMatch | undefined;
      if (sub && usability.usable) {
        const hashes = hashesOf(sub.blockSize);
        for (const rank of sub.ranks) {
          const m = rank.index.matchPrefix(hashes);
          const candidate = toTokens(m.byMedium, sub.blockSize, usability.partial);
          if (!best || total(candidate) > total(best)) best = candidate;
        }
      }
      const withL3 = this.#creditL3(e.id, best, hashesOf);
      if (withL3) out.set(e.id, withL3);
    }
    return out;
  }

  /**
   * `own` (the endpoint's index match, if it could answer) with its shared L3 tier's leading pages
   * past it counted as storage; without `own`, the L3 part alone, partial (a floor beside the tree).
   */
  #creditL3(
    endpointId: string,
    own: KvMatch | undefined,
    hashesOf: (blockSize: number) => PackedBlockHashes,
  ): KvMatch | undefined {
    const blockSize = this.l3.blockSizeOf(endpointId);
    if (blockSize === undefined) return own;
    const l3Tokens = this.l3.matchPages(endpointId, hashesOf(blockSize).toBigInts()) * blockSize;
    const held = own ? total(own) : 0;
    if (l3Tokens <= held) return own;
    const base = own ?? { deviceTokens: 0, hostTokens: 0, storageTokens: 0, partial: true };
    return { ...base, storageTokens: base.storageTokens + l3Tokens - held };
  }

  /** Output lengths measured from the KV events go to `listener` (one; undefined: none are followed). */
  onOutput(listener: OutputListener | undefined): void {
    this.#onOutput = listener;
  }

  /**
   * Request `id` with prompt `tokens` (exact ids, as match took them) under `salt` went to
   * `endpointId`: its finishing store will say its output length (output-attribution.ts).
   * Nothing while no one listens, or the endpoint publishes no events.
   */
  expectOutput(
    endpointId: string,
    id: string,
    tokens: readonly number[],
    salt: string,
    maxTokens?: number,
  ): void {
    const sub = this.#subs.get(endpointId);
    if (!this.#onOutput || !sub) return;
    const bs = sub.blockSize;
    const hashes = this.#promptHashesOf(tokens, bs, salt);
    const pages = hashes.length;
    this.#outputs.expect(endpointId, {
      id,
      lastPage: pages > 0 ? hashes.at(pages - 1) : null,
      tail: tokens.slice(pages * bs),
      blockSize: bs,
      cacheSalt: salt,
      ...(maxTokens !== undefined ? { maxTokens } : {}),
    });
  }

  /**
   * Request `id`'s answer ended: its finishing store is still taken for a few seconds, and its
   * measurement hands back `streamedMs` (the picker's timing of its stream, first byte to end).
   */
  outputEnded(id: string, streamedMs?: number): void {
    this.#outputs.ended(id, this.#now(), streamedMs);
  }

  /** Request `id` will store no output (it failed before an answer). */
  outputDropped(id: string): void {
    this.#outputs.drop(id);
  }

  /** Finishing stores that could not be told apart (the same prompt twice at once), for tests and status. */
  get ambiguousOutputs(): number {
    return this.#outputs.ambiguous;
  }

  #measureOutputs(endpointId: string, events: readonly KvCacheEvent[]): void {
    const now = this.#now();
    for (const ev of events) {
      if (ev.type !== 'BlockStored') continue;
      const m = this.#outputs.stored(endpointId, ev, now);
      if (m) this.#onOutput?.(endpointId, m);
    }
  }

  #promptHashesOf(tokens: readonly number[], blockSize: number, salt: string): PackedBlockHashes {
    let bySize = this.#promptHashes.get(tokens);
    if (!bySize) this.#promptHashes.set(tokens, (bySize = new Map<string, PackedBlockHashes>()));
    const key = `${blockSize}:${salt}`;
    let hashes = bySize.get(key);
    if (!hashes) bySize.set(key, (hashes = computeRequestPackedHashes(tokens, blockSize, salt)));
    return hashes;
  }

  #now(): number {
    return this.#opts.clock?.now() ?? Date.now();
  }

  /** A request that will store pages went to `endpointId`: its events are now due (stale detection). */
  expectEvents(endpointId: string): void {
    for (const rank of this.#subs.get(endpointId)?.ranks ?? []) rank.expectBatch();
  }

  /** The shared L3 directories modelled now (shared-l3.ts), for /status. */
  l3Status(): L3UnitStatus[] {
    return this.l3.list();
  }

  status(): EndpointKvStatus[] {
    return [...this.#subs].map(([endpoint, sub]) => {
      const u = this.usability(endpoint);
      return {
        endpoint,
        usable: u.usable,
        reason: u.usable && !u.partial ? '' : u.reason,
        ranks: sub.ranks.map((r) => r.status()),
      };
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    const subs = [...this.#subs.values()];
    this.#subs.clear();
    await Promise.all(subs.flatMap((s) => s.ranks.map((r) => r.close())));
  }

  #closeSub(id: string, sub: Subscription): void {
    this.#subs.delete(id);
    this.#outputs.forget(id);
    for (const r of sub.ranks) void r.close();
  }
}

/** The L3 directory `e` shares, when its Deployment's tier for its role is reachable and its page size known. */
function l3UnitOf(e: RouteEndpoint, scope: L3Scope | undefined): L3Unit | null {
  if (!scope?.reachableRoles.includes(e.role) || !e.events) return null;
  return {
    deployment: scope.deployment,
    role: e.role,
    fingerprint: e.fingerprint,
    blockSize: e.events.blockSize,
  };
}

/** What makes a subscription the same one: the process (generation) and where it publishes. */
function subscriptionKey(e: RouteEndpoint): string {
  if (!e.events) return '';
  return JSON.stringify([e.generation ?? '', e.fingerprint, e.events]);
}

const DEVICE: readonly StorageMedium[] = ['GPU'];
const HOST: readonly StorageMedium[] = ['CPU_PINNED'];

function toTokens(
  byMedium: Readonly<Record<StorageMedium, number>>,
  blockSize: number,
  partial: boolean,
): KvMatch {
  let device = 0;
  let host = 0;
  let storage = 0;
  for (const [medium, pages] of Object.entries(byMedium) as [StorageMedium, number][]) {
    if (DEVICE.includes(medium)) device += pages;
    else if (HOST.includes(medium)) host += pages;
    else storage += pages;
  }
  return {
    deviceTokens: device * blockSize,
    hostTokens: host * blockSize,
    storageTokens: storage * blockSize,
    partial,
  };
}

function total(m: KvMatch): number {
  return m.deviceTokens + m.hostTokens + m.storageTokens;
}
