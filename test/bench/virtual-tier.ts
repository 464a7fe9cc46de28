// A tier of R gateway replicas over N simulator engines, in virtual time: the
// routing benchmark's slice through the gateway's own policies with no HTTP
// and no wall clock, so eight processes' worth of routing fits two cores and
// host CPU contention cannot move the figures.
//
// What each replica sees, as in production:
// - its own requests (in flight, the policy's predicted prefill and decode);
// - the KV index (`cached`), exact and shared: every replica subscribes to
//   every runtime's KV events, emulated by peeking the engine's radix tree;
// - the runtime's pushed load (LoadStat: running, waiting, waiting uncached
//   tokens), refreshed every `runtimeLoadMs` as the publisher's throttle
//   allows (five scheduler steps);
// - with `exchangeMs` set, the other replicas' shares (fleet/load-exchange.ts)
//   as they were when the last message reached it: each change (and the pick
//   that made it) goes to each peer after a delay, a constant or drawn per
//   message and receiver (exchange-delay.ts), and a link delivers in order, as
//   the real exchange's per-peer TCP connection does. Staleness is sampled at
//   every decision: for each peer and endpoint, how long the oldest change not
//   yet delivered to the deciding replica has waited (0 when its view is
//   current); the sample is the worst over peers and endpoints.
// - with the exchange on, its rank in the tier (RouteInput.tier), the
//   exchange's lag as it measured it (fleet/lag-window.ts) and the peers'
//   picks in transit (fleet/unheard-picks.ts): a policy
//   may hold a choice (Policy.holdMs, as the gateway's picker sleeps it), and
//   the hold counts in the request's TTFT and e2e.
// Request i goes to replica i mod R (a Service spreading connections), or one drawn at random.

import {
  buildPolicy,
  type EndpointView,
  type PeerShare,
  type Policy,
  type RouteInput,
} from '../../gateway/src/policies/index.ts';
import type { RoutingSettings } from '#api';
import { hashToUnit } from '#kube/seeded-random.ts';
import { LagWindow } from '../../gateway/src/fleet/lag-window.ts';
import { TierBursts } from '../../gateway/src/fleet/tier-bursts.ts';
import { UnheardPicks } from '../../gateway/src/fleet/unheard-picks.ts';
import { PROGRESS_EVENTS } from '../../gateway/src/upstream/report.ts';
import { OrderedLink } from './exchange-delay.ts';
import type { z } from 'zod';
import { VirtualClock } from '../sim/clock.ts';
import { buildEngineConfig, parseSimArgs } from '../sim/config.ts';
import { Engine, type RequestResult } from '../sim/engine.ts';
import { applyChatTemplate } from '../sim/generation.ts';
import { encode } from '../sim/tokenizer.ts';
import { buildVirtualRecord, type RequestRecord } from './replay-stats.ts';
import { buildPromptText, type TraceRecord } from './replay-trace.ts';
import type { DumpDecision, DumpLine, EndpointSeen, EndpointTruth } from './request-dump.ts';
import { SglangRouterEmulation } from './virtual-sglang-router.ts';
import { computeUncachedTokens } from '../../gateway/src/picker/runtime-priority.ts';
import { computeUncachedPriority, isLowValuesFirst, type UncachedBucketing } from './uncached-priority.ts';

export interface TierRunOptions {
  readonly records: readonly TraceRecord[];
  /** Arrival gaps are multiplied by this. */
  readonly stretch: number;
  readonly workers: number;
  readonly maxTotalTokens: number;
  readonly prefillTps: number;
  readonly replicas: number;
  readonly router: 'cache-aware' | 'sglang-router';
  readonly routing: z.output<typeof RoutingSettings>;
  /**
   * Delay of the replicas' load exchange (virtual ms): a constant, or a draw per message and
   * receiver (exchange-delay.ts); undefined: no exchange (each sees its own share).
   */
  readonly exchangeMs?: number | (() => number);
  /** How often a runtime's pushed load is refreshed (virtual ms); undefined: not used. */
  readonly runtimeLoadMs?: number;
  /**
   * Spread requests that share a timestamp evenly over the gap to the next timestamp (the
   * conversation trace's stamps come in steps of about 3 s), instead of all at one instant.
   */
  readonly spreadBursts?: boolean;
  /**
   * Prefixes each request's id, which the policy's draws hash (cache-aware's in-transit draw):
   * the same trace, another draw (draw-spread.ts). Undefined: the index alone.
   */
  readonly drawSalt?: string;
  /**
   * How requests reach the replicas: 'round-robin' (the default, request i to replica i mod R:
   * a burst's requests at consecutive ranks) or 'random' (a hash of the draw salt and i, as a
   * Service picking a replica at random per request would).
   */
  readonly assign?: 'round-robin' | 'random';
  /**
   * What-if (no gateway does this yet; ADR 0056): a replica holds its request for an endpoint
   * while a request of the tier, as it knows (its own at once, the peers' as the exchange
   * delivers them), is in prefill there, and releases the held request with the fewest uncached
   * tokens (by the KV index at release) when its own first token arrives or a peer reports its
   * prefills there over: the runtime prefills one request at a time, shortest first, instead of
   * batching whatever queued behind a long prefill.
   */
  readonly gatewayQueue?: boolean;
  /**
   * Keep one line per request (request-dump.ts): where it went and why, what the deciding
   * replica knew of each runtime against the tier's truth then, and its timeline.
   */
  readonly dumpRequests?: boolean;
  /**
   * The runtimes run SGLang's priority scheduling (preemption off) and the replicas stamp each
   * request's priority from its uncached tokens on the endpoint picked, by this bucketing
   * (uncached-priority.ts): `two` is the product's stamp (spec.serving.priorityScheduling, ADR
   * 0057), the others what-ifs (ADR 0056). Undefined: FCFS runtimes.
   */
  readonly runtimePriority?: UncachedBucketing;
  /** The runtimes' `--prefill-max-requests` (every row's: a runtime flag); undefined: no cap. */
  readonly prefillMaxRequests?: number;
}

/** Each record's arrival offset (trace ms, before stretch): its stamp, or spread within its burst. */
export function computeArrivals(stamps: readonly number[], spread: boolean): number[] {
  const t0 = stamps[0] ?? 0;
  const out = stamps.map((t) => t - t0);
  if (!spread) return out;
  let i = 0;
  while (i < stamps.length) {
    let j = i;
    while (j < stamps.length && stamps[j] === stamps[i]) j++;
    const next = stamps[j];
    const gap = next !== undefined ? next - (stamps[i] as number) : 0;
    for (let k = i; k < j; k++) out[k] = (out[k] as number) + (gap * (k - i)) / (j - i);
    i = j;
  }
  return out;
}

export interface TierRunResult {
  readonly records: RequestRecord[];
  /** Gaps between consecutive output tokens, ms, per request index. */
  readonly itl: Map<number, number[]>;
  /** Per decision, how stale the deciding replica's view of its peers was (ms). */
  readonly staleness: number[];
  /**
   * After the run, how many (replica, peer, endpoint) views differ from the peer's own share:
   * 0 when every message arrived and none overtook an earlier one on its link.
   */
  readonly unsettledViews: number;
  readonly durationMs: number;
  /** With dumpRequests: one line per request, in trace order. */
  readonly dump?: DumpLine[];
}

interface Replica {
  readonly policy: Policy;
  readonly inFlight: number[];
  /** What this replica last heard from each peer, per endpoint: heard[peer][endpoint]. */
  readonly heard: PeerShare[][];
  /** Each peer's change times not yet delivered here, per endpoint, oldest first: unheard[peer][endpoint]. */
  readonly unheard: number[][][];
  /** The lags of the peers' changes as they reached this replica: its unheardMs, as the gateway's. */
  readonly lags: LagWindow;
  /** The tier's arrivals as this replica knows them: its own at once, the peers' as their messages arrive. */
  readonly bursts: TierBursts;
  /** The peers' picks as they reach this replica: how many are in transit (fleet/unheard-picks.ts). */
  readonly peerPicks: UnheardPicks;
}

const ZERO: PeerShare = { inFlight: 0, prefillTokens: 0, decodeTokens: 0 };

export function runTier(o: TierRunOptions): TierRunResult {
  const simCfg = parseSimArgs(['--model-path', 'sim', '--max-total-tokens', String(o.maxTotalTokens)]);
  if (!simCfg.ok) throw new Error(simCfg.error);
  const clock = new VirtualClock();
  const engines = Array.from(
    { length: o.workers },
    () =>
      new Engine(
        {
          ...buildEngineConfig(simCfg.value),
          prefillTps: o.prefillTps,
          prefillMaxRequests: o.prefillMaxRequests ?? null,
          ...(o.runtimePriority === undefined
            ? {}
            : {
                priorityScheduling: {
                  lowValuesFirst: isLowValuesFirst(o.runtimePriority),
                  defaultPriority: null,
                },
              }),
        },
        clock,
      ),
  );
  const ids = engines.map((_e, i) => `w${i}`);
  const texts = new Map<string, string>();
  const replicas: Replica[] = Array.from({ length: o.replicas }, () => ({
    policy:
      o.router === 'sglang-router'
        ? new SglangRouterEmulation((req) => texts.get(req.id) ?? '')
        : buildPolicy(o.routing),
    inFlight: engines.map(() => 0),
    heard: Array.from({ length: o.replicas }, () => engines.map(() => ZERO)),
    unheard: Array.from({ length: o.replicas }, () => engines.map(() => [])),
    lags: new LagWindow(),
    bursts: new TierBursts(),
    peerPicks: new UnheardPicks(),
  }));

  /** Per replica and endpoint: its requests sent and not yet past prefill (o.gatewayQueue). */
  const unstarted = replicas.map(() => engines.map(() => 0));
  /** Per replica and endpoint: the requests it holds back (o.gatewayQueue). */
  const held = replicas.map(() => engines.map((): { uncached: () => number; send: () => void }[] => []));
  /** What each replica last heard of each peer's `unstarted`: heardUnstarted[to][from][w]. */
  const heardUnstarted = replicas.map(() => replicas.map(() => engines.map(() => 0)));
  /** Some request of the tier, as this replica knows, is in prefill on w: the next one waits. */
  const gateShut = (self: number, w: number): boolean =>
    (unstarted[self]![w] ?? 0) > 0 ||
    heardUnstarted[self]!.some((fromPeer, k) => k !== self && (fromPeer[w] ?? 0) > 0);
  const shareOf = (r: Replica, w: number): PeerShare => {
    const s = r.policy.shareOf?.(ids[w] ?? '') ?? { prefillTokens: 0, decodeTokens: 0 };
    return { inFlight: r.inFlight[w] ?? 0, ...s };
  };
  const exchangeOn = o.exchangeMs !== undefined && o.replicas > 1;
  const exchangeMs = o.exchangeMs;
  const drawDelay: () => number = typeof exchangeMs === 'function' ? exchangeMs : () => exchangeMs ?? 0;
  /** links[from][to]: in order, as one TCP connection per publisher and subscriber. */
  const links = replicas.map(() => replicas.map(() => new OrderedLink()));
  /**
   * A change on replica `from` for worker w, with the arrival of the request it routed if a pick
   * made it (the gateway's book sends it with the share): each peer hears of it after its delay.
   */
  const changed = (from: number, w: number, pickAt?: number): void => {
    if (!exchangeOn) return;
    const snap = shareOf(replicas[from] as Replica, w);
    const snapUnstarted = unstarted[from]![w] ?? 0;
    const at = clock.now();
    replicas.forEach((to, k) => {
      if (k === from) return;
      const queue = (to.unheard[from] as number[][])[w] as number[];
      queue.push(at);
      const deliverAt = (links[from]?.[k] as OrderedLink).deliverAt(at, drawDelay());
      clock.setTimer(deliverAt - at, () => {
        if (pickAt !== undefined) {
          to.bursts.note(pickAt);
          to.peerPicks.note(pickAt);
        }
        (to.heard[from] as PeerShare[])[w] = snap;
        heardUnstarted[k]![from]![w] = snapUnstarted;
        if (o.gatewayQueue === true && snapUnstarted === 0) release(k, w);
        queue.shift();
        to.lags.add(clock.now() - at, clock.now());
      });
    });
  };

  const runtime = engines.map(() => ({ at: -Infinity, running: 0, waiting: 0, uncached: 0 }));
  const runtimeLoad = (w: number) => {
    const cur = runtime[w] as { at: number; running: number; waiting: number; uncached: number };
    const now = clock.now();
    if (o.runtimeLoadMs !== undefined && now - cur.at >= o.runtimeLoadMs) {
      const e = engines[w] as Engine;
      const snap = e.snapshot();
      cur.at = now;
      cur.running = snap.numRunningReqs;
      cur.waiting = snap.numWaitingReqs;
      cur.uncached = Math.floor(e.waitingPromptTokens * (1 - snap.cacheHitRate));
    }
    return cur;
  };

  const view = (self: number, w: number, tokens: readonly number[]): EndpointView => {
    const r = replicas[self] as Replica;
    let peers: PeerShare | undefined;
    if (exchangeOn) {
      let inFlight = 0;
      let prefillTokens = 0;
      let decodeTokens = 0;
      r.heard.forEach((fromPeer, k) => {
        if (k === self) return;
        const d = fromPeer[w] as PeerShare;
        inFlight += d.inFlight;
        prefillTokens += d.prefillTokens;
        decodeTokens += d.decodeTokens;
      });
      peers = { inFlight, prefillTokens, decodeTokens };
    }
    const rt = o.runtimeLoadMs !== undefined ? runtimeLoad(w) : undefined;
    const hit = (engines[w] as Engine).tree.peek(
      'bench-salt',
      tokens.slice(0, Math.max(0, tokens.length - 1)),
    );
    return {
      id: ids[w] ?? '',
      inFlight: r.inFlight[w] ?? 0,
      queued: rt?.waiting ?? 0,
      generation: 'g',
      cached: { deviceTokens: hit.deviceTokens, hostTokens: hit.hostTokens, storageTokens: 0 },
      ...(peers ? { peers } : {}),
      ...(rt ? { running: rt.running, waitingUncachedTokens: rt.uncached } : {}),
    };
  };

  const staleness: number[] = [];
  const sampleStaleness = (self: number): void => {
    if (!exchangeOn) return;
    const now = clock.now();
    let worst = 0;
    (replicas[self] as Replica).unheard.forEach((fromPeer, k) => {
      if (k === self) return;
      for (const q of fromPeer) if (q.length > 0) worst = Math.max(worst, now - (q[0] as number));
    });
    staleness.push(worst);
  };

  for (const r of replicas) r.policy.syncEndpoints?.(engines.map((_e, w) => view(0, w, [])));
  const maintain = (): void => {
    clock.setTimer(60_000, () => {
      for (const r of replicas) r.policy.maintain?.(clock.now());
      if (clock.pendingTimers > 0) maintain();
    });
  };
  maintain();

  /** The priority a replica stamps for endpoint w (o.runtimePriority), by the KV index as the pick saw it. */
  const stampPriority = (w: number, promptIds: readonly number[]): number | undefined => {
    if (o.runtimePriority === undefined) return undefined;
    const hit = (engines[w] as Engine).tree.peek('bench-salt', promptIds.slice(0, -1));
    // The bench's runtimes have no storage tier (the tree's peek reports device and host).
    const uncached = computeUncachedTokens(promptIds.length, { ...hit, storageTokens: 0 });
    return computeUncachedPriority(uncached, o.runtimePriority);
  };
  const out: RequestRecord[] = [];
  const itl = new Map<number, number[]>();
  const dump: DumpLine[] = [];
  /** What the replica's view said of each runtime (as the policy read it). */
  const seenOf = (self: number, w: number, v: EndpointView): EndpointSeen => ({
    cached: v.cached?.deviceTokens ?? 0,
    backlog: shareOf(replicas[self] as Replica, w).prefillTokens + (v.peers?.prefillTokens ?? 0),
    inFlight: v.inFlight + (v.peers?.inFlight ?? 0),
    ...(v.waitingUncachedTokens === undefined ? {} : { waitingUncached: v.waitingUncachedTokens }),
    ...(v.running === undefined ? {} : { running: v.running }),
  });
  /** The tier's truth of runtime w now: every replica's shares summed, the engine's own queue. */
  const truthOf = (w: number): EndpointTruth => {
    const snap = (engines[w] as Engine).snapshot();
    let backlog = 0;
    let inFlight = 0;
    for (const r of replicas) {
      const share = shareOf(r, w);
      backlog += share.prefillTokens;
      inFlight += share.inFlight;
    }
    return { backlog, inFlight, waiting: snap.numWaitingReqs, running: snap.numRunningReqs };
  };
  const release = (self: number, w: number): void => {
    const q = held[self]![w]!;
    if (q.length === 0 || gateShut(self, w)) return;
    let best = 0;
    let bestCost = Infinity;
    q.forEach((h, k) => {
      const c = h.uncached();
      if (c < bestCost) {
        best = k;
        bestCost = c;
      }
    });
    const [h] = q.splice(best, 1);
    unstarted[self]![w] = (unstarted[self]![w] ?? 0) + 1;
    changed(self, w);
    h?.send();
  };
  const arrivals = computeArrivals(
    o.records.map((r) => r.timestamp),
    o.spreadBursts === true,
  );
  const filler = encode(' ba')[0] ?? 0;
  const instantShift = o.drawSalt === undefined ? 0 : Math.floor(hashToUnit(o.drawSalt) * 2 ** 40);
  /** A decision's part of its dump line: who picked what, by which rule, knowing what. */
  const describeDecision = (
    i: number,
    self: number,
    w: number,
    views: readonly EndpointView[],
    input: RouteInput,
  ): DumpDecision => {
    const why = (replicas[self] as Replica).policy.explainLastPick?.();
    const tier = input.tier;
    return {
      i,
      id: input.id,
      arrivalMs: input.now,
      replica: self,
      runtime: ids[w] ?? '',
      ...(why ? { reason: why.reason, ...(why.cost ? { cost: [...why.cost] } : {}) } : {}),
      ...(tier
        ? {
            unheardMs: tier.unheardMs,
            bursty: tier.bursty,
            ...(tier.unheardPicks === undefined ? {} : { unheardPicks: tier.unheardPicks }),
          }
        : {}),
      runtimes: ids,
      knew: views.map((v, k) => seenOf(self, k, v)),
      truth: engines.map((_e, k) => truthOf(k)),
    };
  };
  o.records.forEach((rec, i) => {
    clock.setTimer((arrivals[i] as number) * o.stretch, () => {
      const self =
        o.assign === 'random'
          ? Math.floor(hashToUnit(`assign:${o.drawSalt ?? ''}:${i}`) * o.replicas)
          : i % o.replicas;
      const r = replicas[self] as Replica;
      const text = buildPromptText(rec);
      const promptIds = applyChatTemplate([{ role: 'user', content: text }]);
      const requestId = o.drawSalt === undefined ? String(i) : `${o.drawSalt}:${i}`;
      if (o.router === 'sglang-router') texts.set(requestId, text);
      const maxTokens = Math.max(1, rec.output_length);
      const input: RouteInput = {
        id: requestId,
        salt: 'bench-salt',
        tokens: promptIds,
        now: clock.now(),
        maxTokens,
        ...(exchangeOn
          ? {
              tier: {
                rank: self,
                size: o.replicas,
                unheardMs: r.lags.unheardMs(clock.now()),
                bursty: r.bursts.bursty(r.lags.unheardMs(clock.now())),
                unheardPicks: r.peerPicks.expected(clock.now(), r.lags.meanMs(clock.now())),
                // As the gateway's wall-clock millisecond, which same-instant peers share; a draw
                // salt moves it so that each salt is another draw of the rank spread too.
                instant: Math.floor(clock.now()) + instantShift,
              },
            }
          : {}),
      };
      // As the gateway: a policy may hold a free choice until the peers' simultaneous picks arrive.
      const defer =
        r.policy.holdMs?.(
          engines.map((_e, k) => view(self, k, promptIds)),
          input,
        ) ?? 0;
      const decide = (): void => {
        sampleStaleness(self);
        const views = engines.map((_e, k) => view(self, k, promptIds));
        const w = r.policy.select(views, input) ?? 0;
        const id = ids[w] ?? '';
        // Taken before the pick changes any share: what the replica knew, and what was true.
        const decision = o.dumpRequests === true ? describeDecision(i, self, w, views, input) : undefined;
        const priority = stampPriority(w, promptIds);
        r.policy.observe?.({ kind: 'routed', endpoint: id, input });
        r.inFlight[w] = (r.inFlight[w] ?? 0) + 1;
        // As the gateway's book: the arrival counts here at once, at the peers with the share.
        r.bursts.note(input.now);
        const gated = o.gatewayQueue === true && gateShut(self, w);
        if (o.gatewayQueue === true && !gated) unstarted[self]![w] = (unstarted[self]![w] ?? 0) + 1;
        changed(self, w, input.now);
        const gaps: number[] = [];
        itl.set(i, gaps);
        let last = 0;
        let heldMs = 0;
        let sentMs = 0;
        let firstTokenMs = 0;
        const send = (): void => {
          sentMs = clock.now();
          (engines[w] as Engine).submit(
            {
              rid: String(i),
              namespace: 'bench-salt',
              promptIds,
              outputIds: Array.from({ length: maxTokens }, () => filler),
              ...(priority === undefined ? {} : { priority }),
            },
            {
              onTokens: (generated: number, now: number) => {
                if (generated > 1) gaps.push(now - last);
                last = now;
                // As the gateway's stream relay: progress every 16 events, so the decode load falls.
                if (generated > 1 && generated % PROGRESS_EVENTS === 0) {
                  r.policy.observe?.({ kind: 'decoding', endpoint: id, input, tokens: generated });
                  changed(self, w);
                }
                if (generated !== 1) return;
                firstTokenMs = now;
                r.policy.observe?.({ kind: 'first-token', endpoint: id, input });
                if (o.gatewayQueue === true) unstarted[self]![w] = (unstarted[self]![w] ?? 1) - 1;
                changed(self, w);
                // The next held request reaches the runtime a moment later (the stream's relay, the
                // connection), after the decode step the runtime starts meanwhile.
                if (o.gatewayQueue === true) clock.setTimer(1, () => release(self, w));
              },
              onFinish: (res: RequestResult) => {
                r.inFlight[w] = (r.inFlight[w] ?? 1) - 1;
                r.policy.observe?.({
                  kind: 'completed',
                  endpoint: id,
                  input: { ...input, now: clock.now() },
                  report: {
                    promptTokens: res.promptTokens,
                    cachedTokens: res.cachedTokens,
                    completionTokens: res.completionTokens,
                  },
                });
                changed(self, w);
                texts.delete(requestId);
                if (decision)
                  dump.push({
                    ...decision,
                    holdMs: defer + heldMs,
                    sentMs,
                    prefillStartMs: res.arrivedAt + res.queueMs,
                    firstTokenMs,
                    promptTokens: res.promptTokens,
                    cachedTokens: res.cachedTokens,
                    outputTokens: res.completionTokens,
                    ttftMs: res.ttftMs + defer + heldMs,
                    e2eMs: res.e2eMs + defer + heldMs,
                  });
                out.push(
                  buildVirtualRecord(i, id, {
                    ...res,
                    ttftMs: res.ttftMs + defer + heldMs,
                    e2eMs: res.e2eMs + defer + heldMs,
                  }),
                );
              },
            },
          );
        };
        if (gated) {
          const heldAt = clock.now();
          held[self]![w]!.push({
            uncached: () =>
              promptIds.length -
              (engines[w] as Engine).tree.peek('bench-salt', promptIds.slice(0, -1)).deviceTokens,
            send: () => {
              heldMs = clock.now() - heldAt;
              send();
            },
          });
        } else send();
      };
      if (defer > 0) clock.setTimer(defer, decide);
      else decide();
    });
  });
  clock.runAll(Infinity);
  let unsettledViews = 0;
  if (exchangeOn)
    replicas.forEach((to, k) =>
      to.heard.forEach((fromPeer, from) => {
        if (from === k) return;
        fromPeer.forEach((seen, w) => {
          const own = shareOf(replicas[from] as Replica, w);
          if (
            seen.inFlight !== own.inFlight ||
            seen.prefillTokens !== own.prefillTokens ||
            seen.decodeTokens !== own.decodeTokens
          )
            unsettledViews++;
        });
      }),
    );
  dump.sort((a, b) => a.i - b.i);
  return {
    records: out,
    itl,
    staleness,
    unsettledViews,
    durationMs: clock.now(),
    ...(o.dumpRequests === true ? { dump } : {}),
  };
}
