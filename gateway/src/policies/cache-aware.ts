// cache-aware: route to the endpoint most likely to hold the prompt's prefix,
// unless the fleet is out of balance.
//
// SGLang's router (smg model_gateway/src/policies/cache_aware.rs), restated:
//   load(e)     = in-flight requests the router sent to e
//   imbalanced  = (max load - min load) > balanceAbsThreshold
//                 && max load > balanceRelThreshold * min load
//   imbalanced  → the least-loaded endpoint
//   otherwise   → match the request text in one approximate radix tree;
//                 match rate = matched chars / input chars;
//                 rate > matchThreshold → the endpoint owning the deepest match,
//                 else the least-loaded endpoint
//   either way, insert the text into the tree for the chosen endpoint;
//   a timer evicts each endpoint's LRU leaves down to maxTreeSize.
//
// What this policy changes:
// - The tree is keyed on token blocks (`blockTokens`), page-aligned like the
//   runtime's own cache, and rooted per cache salt (tenants never look shared).
// - load(e) = gateway in-flight + the runtime's queue from its /metrics, so
//   traffic from other gateways and long prefill queues count.
// - Matches are weighted by tier: a match the runtime last served from host
//   memory (HiCache) counts `hostWeight` of a device match, one in the
//   Deployment's shared L3 tier `storageWeight` (default hostWeight, ADR 0039). The tier share is
//   learned per endpoint from `cached_tokens_details` (an EWMA).
// - The tree is corrected from what the runtime reports: when cached_tokens
//   is below the predicted match, the endpoint evicted that tail and all
//   that hung below it; the tree drops it and re-inserts this prompt.
// - An endpoint's tree is dropped when its generation (pod uid, restarts,
//   identity fingerprint) changes: the runtime's cache is empty.
// - Ties among least-loaded endpoints go to the smaller tree (spreads cache).
// - Where the runtime publishes KV events and its index is sound, the match
//   is the index's exact one (EndpointView.cached, by tier) instead of the
//   tree's: every gateway replica then sees every replica's traffic. The tree
//   stays, fed and corrected as before, for endpoints without events, and
//   for a partial index (one that started late): there the larger of the
//   two counts.
// - Cost routing (costWeight > 0, the default) replaces the threshold step:
//     backlog(e)  = predicted uncached prompt tokens this policy sent to e
//                   that have not produced a first token yet ('first-token'
//                   outcome; 'completed'/'failed' also end it)
//     uncached(e) = prompt tokens - tier-weighted match on e
//     choose        argmin backlog(e) + costWeight x uncached(e),
//                   ties → least load (the tier's)
//   backlog/prefill rate is the queueing part of TTFT (the runtime prefills
//   FCFS, before decode), uncached/rate its own part; costWeight > 1 values
//   keeping a conversation's cache over one request's TTFT, so affinity
//   yields only to a backlog costWeight times the tokens it would save. The
//   imbalance guard above still applies first. Measured in virtual time
//   (test/bench/bench-virtual.ts): TTFT p50 -15..-35% against threshold
//   routing, hit rate within +-0.003.
// - The tier's load, not this replica's share: backlog(e) adds what the other
//   gateway replicas predict on e (EndpointView.peers, fleet/load-exchange.ts)
//   and is at least the runtime's own count of uncached prompt tokens waiting
//   (EndpointView.waitingUncachedTokens, SGLang's LoadStat); load(e) counts
//   the peers' in-flight requests too. With one replica both are absent.
// - Bursts across replicas (RouteInput.tier): while this replica's picks
//   come in bursts (RouteInput.tier.bursty, fleet/tier-bursts.ts: the tier's
//   requests arrive together more than a steady stream of their rate explains), a request no runtime holds waits rank x the
//   exchange's measured lag before select (holdMs), so replicas that take parts of one burst
//   choose in turn, each after hearing the lower ranks' picks, instead of
//   all sending their misses to the one least-loaded runtime.
// - The peers' picks in transit (RouteInput.tier.unheardPicks: their pick
//   rate x the exchange's mean lag): on a steady stream they went where this
//   replica would go now, so the cost is poured over by what they add (their
//   number x what this replica's own picks usually add) and the choice drawn
//   among the runtimes it reaches, in proportion to each one's fill, by a
//   hash of the request id and rank (unheard-fill.ts, ADR 0046); where the
//   decision's wall-clock instant is known, by a hash of the instant the
//   peers deciding with it share, shifted by rank, so a same-instant burst
//   spreads over a tie instead of drawing onto one runtime (ADR 0058). A lead
//   larger than that volume (a cache hit) keeps its runtime.
// - Decode, not only prefill (decodeWeight > 0):
//     decode(e)   = output tokens still to generate by the requests on e,
//                   this replica's and its peers', each predicted as
//                   min(max_tokens, the usual output: an EWMA of the runtime's
//                   completion_tokens), from 'routed' to 'completed', less
//                   what it has streamed so far ('decoding')
//     scale       = this request's predicted output / the usual output (1/4..4)
//     choose        argmin backlog(e) + costWeight x uncached(e)
//                          + decodeWeight x scale x decode(e)
//   A runtime decodes its running batch together, every step a little slower
//   per request in it: a request sent where many tokens are still to come
//   starts as soon (prefill goes first) but finishes later, and slows them;
//   the longer its own answer, the more of those steps it shares (scale).
// - An idle runtime (nothing in flight, waiting or decoding) that would
//   prefill the request's whole uncached part before the usual pick's backlog
//   is through takes it, if that discards at most a usual prompt's length of
//   cache, so a hot prefix's first holder does not keep it alone behind a
//   long queue; in a tier, while its picks come together, only the replica
//   its id hashes to does, so the tier spills once, not every replica at
//   once; otherwise whichever gets the request (idle-spill.ts, ADRs 0052, 0053).
// - What its prefill does to the answers streaming there (decode-stall.ts, ADR 0054): the
//   runtime prefills before its next decode step, so the n requests decoding on e when it
//   runs each wait uncached(e) / rate; cost adds decodeWeight x n x uncached(e) / (prefill
//   tokens per decode step), n counted fresh (the tier's in flight on e, queued ones too, or
//   the runtime's running count if larger). A miss goes where fewer answers would pause; a
//   hit, with little to prefill, stays.

import type { z } from 'zod';
import type { CacheAwareSettings } from '#api';
import { hashToUnit } from '#kube/seeded-random.ts';
import { computeBlockKeys, PrefixTree, type BlockKey, type PrefixKey } from '../radix/index.ts';
import {
  indexOfMin,
  loadOf,
  type CachedPrefix,
  type CacheReport,
  type EndpointView,
  type PickExplanation,
  type PickReason,
  type Policy,
  type RouteInput,
  type RouteOutcome,
} from './policy.ts';
import { stallCost } from './decode-stall.ts';
import { chooseSpill } from './idle-spill.ts';
import { pickByFill, pourOver, rankedDrawPoint } from './unheard-fill.ts';

export type CacheAwareConfig = Omit<z.output<typeof CacheAwareSettings>, 'hostWeight'> & {
  /** Weight of a host-tier (HiCache) match relative to a device match, 0..1 (CachePolicy default 0.5). */
  readonly hostWeight?: number;
  /** Drop tree entries idle longer than this (same unit as `now`). */
  readonly maxIdle?: number;
  /** Prefill tokens a runtime computes in one decode step's time (decode-stall.ts; default 80). */
  readonly prefillTokensPerDecodeStep?: number;
};

const HOST_SHARE_ALPHA = 0.2;
const OUTPUT_ALPHA = 0.05;
const PICK_ALPHA = 0.05;
/** Output tokens assumed before the runtime reported any and with no max_tokens (OpenAI's usual answers). */
const DEFAULT_OUTPUT_TOKENS = 256;
const MAX_PENDING = 100_000;
/** A prompt whose best match is under this share of it is a free choice (holdMs). */
const FREE_MATCH = 0.5;

/** A request's predicted output tokens still to generate. */
function toCome(p: Pending): number {
  return Math.max(0, p.decode - p.decoded);
}

interface Pending {
  readonly endpoint: string;
  readonly predictedBlocks: number;
  /** Predicted uncached prompt tokens (route units), counted in the backlog until the first token. */
  readonly uncached: number;
  /** Predicted output tokens, counted in the endpoint's decode load until the request ends. */
  readonly decode: number;
  /** Output tokens streamed so far ('decoding'): the load counts only decode - decoded still to come. */
  decoded: number;
  started: boolean;
}

export class CacheAwarePolicy implements Policy {
  readonly name = 'cache-aware';
  readonly #cfg: CacheAwareConfig;
  readonly #maxBlocks: number;
  readonly #hostWeight: number;
  readonly #storageWeight: number;
  readonly #tree = new PrefixTree();
  readonly #keys = new WeakMap<RouteInput, PrefixKey>();
  /** Each request's match per endpoint as select saw it (index or tree, in blocks): its predicted uncached part. */
  readonly #seen = new WeakMap<RouteInput, Map<string, number>>();
  readonly #pending = new Map<string, Pending>();
  readonly #hostShare = new Map<string, number>();
  readonly #generations = new Map<string, string>();
  /** Predicted uncached prompt tokens sent to each endpoint and not yet past prefill. */
  readonly #backlog = new Map<string, number>();
  /** Predicted output tokens still to generate by the requests this replica sent to each endpoint. */
  readonly #decode = new Map<string, number>();
  /** The usual output length (EWMA of completion tokens); undefined until the runtime reported one. */
  #meanOutput: number | undefined;
  /** What a pick usually adds to its runtime: predicted uncached prompt tokens and output tokens (EWMAs). */
  #pickUncached = 0;
  #pickDecode = 0;
  /** The usual prompt's length, in tokens (EWMA): the most cache a spill onto an idle runtime discards. */
  #pickPrompt = 0;
  #picks = 0;
  /** The last select's rule and costs, kept as they are (no object a pick) for explainLastPick. */
  #lastReason: PickReason = 'no-prefix';
  #lastCost: readonly number[] | undefined;

  constructor(cfg: CacheAwareConfig) {
    this.#cfg = cfg;
    this.#maxBlocks = Math.max(1, Math.floor(cfg.maxTreeTokens / cfg.blockTokens));
    this.#hostWeight = Math.min(1, Math.max(0, cfg.hostWeight ?? 0.5));
    // Storage is read back through host memory: worth at most a host page, and measured on the real
    // engine an L3 load costs what a host load does (docs/l3-timing.md, ADR 0039): as much, by default.
    this.#storageWeight = Math.min(1, Math.max(0, cfg.storageWeight ?? this.#hostWeight));
  }

  select(endpoints: readonly EndpointView[], req: RouteInput): number | undefined {
    this.#lastCost = undefined;
    if (endpoints.length === 0) return undefined;
    const loads = endpoints.map(loadOf);
    const max = Math.max(...loads);
    const min = Math.min(...loads);
    const imbalanced = max - min > this.#cfg.balanceAbsThreshold && max > this.#cfg.balanceRelThreshold * min;
    if (imbalanced) return this.#because('imbalanced', this.#leastLoaded(endpoints));
    const key = this.#keyOf(req);
    if (key.blocks.length === 0) return this.#because('no-prefix', this.#leastLoaded(endpoints));
    const scores = this.#matchBlocks(endpoints, key);
    this.#seen.set(req, new Map(endpoints.map((e, i) => [e.id, scores[i] as number])));
    const w = this.#cfg.costWeight;
    if (w > 0) {
      const total = req.tokens.length;
      const bt = this.#cfg.blockTokens;
      // A long answer decodes in e's batch for many steps: it is the one whose e2e the batch decides.
      const d = this.#cfg.decodeWeight * this.#outputScale(req);
      const uncached = scores.map((s) => Math.max(0, total - s * bt));
      const cost = endpoints.map((e, i) => {
        const u = uncached[i] as number;
        return (
          this.#tierBacklog(e) +
          w * u +
          (d > 0 ? d * this.#tierDecode(e) : 0) +
          stallCost(e, u, this.#cfg.decodeWeight, this.#cfg.prefillTokensPerDecodeStep)
        );
      });
      this.#lastCost = cost;
      const bestCost = Math.min(...cost);
      // Ties go to the tier's least load: this replica's tree holds only its own share of the traffic.
      const usual = indexOfMin(endpoints, (_e, i) =>
        (cost[i] as number) > bestCost ? Infinity : (loads[i] as number),
      ) as number;
      const spill = chooseSpill(
        endpoints.map((e, i) => ({
          id: e.id,
          idle: this.#idle(e),
          uncached: uncached[i] as number,
          cached: total - (uncached[i] as number),
          backlog: this.#tierBacklog(e),
        })),
        usual,
        req.tier,
        this.#picks > 0 ? this.#pickPrompt : total,
      );
      if (spill !== undefined) return this.#because('spill', spill);
      const drawn = this.#pickInTransit(endpoints, cost, req, d);
      return drawn === undefined ? this.#because('cheapest', usual) : this.#because('in-transit', drawn);
    }
    const best = Math.max(...scores);
    if (best / key.blocks.length <= this.#cfg.matchThreshold)
      return this.#because('below-threshold', this.#leastLoaded(endpoints));
    return this.#because(
      'deepest-match',
      indexOfMin(endpoints, (_e, i) => (scores[i] === best ? (loads[i] as number) : Infinity)),
    );
  }

  explainLastPick(): PickExplanation {
    return { reason: this.#lastReason, ...(this.#lastCost ? { cost: this.#lastCost } : {}) };
  }

  #because(reason: PickReason, pick: number | undefined): number | undefined {
    this.#lastReason = reason;
    return pick;
  }

  /**
   * With the peers' latest picks still in transit (RouteInput.tier.unheardPicks), the cheapest
   * runtime is the one they all just took: pour what those picks add over the costs and draw
   * among the runtimes it reaches, in proportion (unheard-fill.ts, ADR 0046). Undefined when
   * nothing is in transit, or it reaches one runtime only: the cheapest then, as before.
   */
  #pickInTransit(
    endpoints: readonly EndpointView[],
    cost: readonly number[],
    req: RouteInput,
    decodeWeight: number,
  ): number | undefined {
    const unheard = req.tier?.unheardPicks ?? 0;
    const perPick = this.#pickUncached + decodeWeight * this.#pickDecode;
    if (!(unheard > 0) || !(perPick > 0)) return undefined;
    const fills = pourOver(cost, unheard * perPick);
    const k = fills.filter((f) => f > 0).length;
    if (k < 2) return undefined;
    const tier = req.tier;
    if (tier?.instant === undefined) return pickByFill(fills, hashToUnit(`${tier?.rank ?? 0}:${req.id}`));
    // Peers deciding at this instant share its hash and spread by rank over the runtimes in one
    // order every replica derives (by id), not by the order of this replica's table.
    const ids = endpoints.map((e) => e.id);
    const order = [...ids.keys()].sort((a, b) => (ids[a]! < ids[b]! ? -1 : ids[a]! > ids[b]! ? 1 : 0));
    const drawn = pickByFill(
      order.map((i) => fills[i] as number),
      rankedDrawPoint(tier.rank, k, hashToUnit(`instant:${tier.instant}`)),
    );
    return drawn === undefined ? undefined : order[drawn];
  }

  /**
   * How long to wait before select while picks come in bursts: a request no runtime holds
   * (its best match under half the prompt) is a free choice, and replicas that take parts of
   * one burst would all make it at one instant on the same view, sending every miss to the
   * same least-loaded runtime. Waiting rank x (the time a pick takes to reach the peers, and
   * a millisecond), each replica chooses after the lower ranks' picks reached it, as one
   * router would in turn. Hits go at once: their holder wins whatever the load. 0 alone in the
   * tier, outside bursts, or without cost routing.
   */
  holdMs(endpoints: readonly EndpointView[], req: RouteInput): number {
    const tier = req.tier;
    if (!tier || tier.size <= 1 || tier.rank <= 0 || this.#cfg.costWeight <= 0) return 0;
    if (!tier.bursty) return 0;
    const key = this.#keyOf(req);
    if (key.blocks.length === 0) return 0;
    const best = Math.max(0, ...this.#matchBlocks(endpoints, key));
    if (best * this.#cfg.blockTokens >= FREE_MATCH * req.tokens.length) return 0;
    return tier.rank * (tier.unheardMs + 1);
  }

  observe(outcome: RouteOutcome): void {
    const { endpoint, input } = outcome;
    switch (outcome.kind) {
      case 'routed':
        this.#routed(endpoint, input);
        return;
      case 'first-token': {
        const pending = this.#pending.get(input.id);
        if (pending?.endpoint === endpoint) this.#settle(pending);
        return;
      }
      case 'decoding': {
        const pending = this.#pending.get(input.id);
        if (pending?.endpoint !== endpoint || !(outcome.tokens > pending.decoded)) return;
        const before = toCome(pending);
        pending.decoded = outcome.tokens;
        this.#addDecode(endpoint, toCome(pending) - before);
        return;
      }
      case 'completed':
        this.#completed(endpoint, input, outcome.report);
        return;
      case 'failed': {
        // Nothing was prefilled: the endpoint holds no more than predicted.
        const pending = this.#takePending(input.id, endpoint);
        if (pending) this.#tree.trim(endpoint, this.#keyOf(input), pending.predictedBlocks);
        return;
      }
    }
  }

  #routed(endpoint: string, input: RouteInput): void {
    const key = this.#keyOf(input);
    const predictedBlocks = this.#tree.matchByEndpoint(key).get(endpoint) ?? 0;
    if (this.#pending.size >= MAX_PENDING) {
      const [oldest, p] = this.#pending.entries().next().value as [string, Pending];
      this.#takePending(oldest, p.endpoint);
    }
    // The match select weighed (the KV index's, exact and every replica's) over this replica's tree.
    const matched = this.#seen.get(input)?.get(endpoint) ?? predictedBlocks;
    const uncached = Math.max(0, input.tokens.length - matched * this.#cfg.blockTokens);
    const decode = this.expectedOutput(input);
    this.#pending.set(input.id, { endpoint, predictedBlocks, uncached, decode, decoded: 0, started: false });
    this.#learnPick(uncached, decode, input.tokens.length);
    this.#backlog.set(endpoint, (this.#backlog.get(endpoint) ?? 0) + uncached);
    this.#addDecode(endpoint, decode);
    this.#tree.insert(key, endpoint, input.now);
    // Between timer runs, keep one endpoint from growing without bound.
    if (this.#tree.sizeOf(endpoint) > 2 * this.#maxBlocks)
      this.#tree.evict(this.#maxBlocks, input.now, this.#cfg.maxIdle);
  }

  #completed(endpoint: string, input: RouteInput, report: CacheReport | undefined): void {
    const pending = this.#takePending(input.id, endpoint);
    if (!report) return;
    this.#learnOutput(report.completionTokens);
    this.#learnTier(endpoint, report.deviceTokens, report.hostTokens);
    if (!pending || report.promptTokens <= 0) return;
    // The runtime counts real tokens; the tree may count pseudo-tokens.
    const scale = input.tokens.length / report.promptTokens;
    const cachedBlocks = Math.floor((report.cachedTokens * scale) / this.#cfg.blockTokens);
    if (cachedBlocks < pending.predictedBlocks) {
      const key = this.#keyOf(input);
      this.#tree.trim(endpoint, key, cachedBlocks);
      this.#tree.insert(key, endpoint, input.now); // it holds this prompt now
    }
  }

  syncEndpoints(endpoints: readonly EndpointView[]): void {
    const seen = new Set<string>();
    for (const e of endpoints) {
      seen.add(e.id);
      const prev = this.#generations.get(e.id);
      if (prev !== undefined && prev !== e.generation) this.#forget(e.id);
      this.#generations.set(e.id, e.generation);
    }
    for (const id of [...this.#generations.keys()]) if (!seen.has(id)) this.#forget(id);
  }

  maintain(now: number): void {
    this.#tree.evict(this.#maxBlocks, now, this.#cfg.maxIdle);
  }

  /** Each endpoint's match of the prompt, in tier-weighted blocks: the KV index's, or the tree's guess. */
  #matchBlocks(endpoints: readonly EndpointView[], key: PrefixKey): number[] {
    const matches = this.#tree.matchByEndpoint(key);
    return endpoints.map((e) => {
      const guessed = () => this.#effectiveMatch(e, matches.get(e.id) ?? 0);
      if (!e.cached) return guessed();
      const indexed = this.#indexedMatch(e.cached);
      return e.cached.partial ? Math.max(indexed, guessed()) : indexed;
    });
  }

  /**
   * An exact match from the runtime's KV events, in blocks, weighted by tier like the tree's
   * learned split: a host page counts hostWeight, a storage page (the Deployment's shared L3,
   * kv-index/shared-l3.ts) storageWeight, by default hostWeight (it is read back through host
   * memory first, and costs what a host load does: ADR 0039).
   */
  #indexedMatch(c: CachedPrefix): number {
    const w = this.#hostWeight;
    return (
      (c.deviceTokens + w * c.hostTokens + this.#storageWeight * c.storageTokens) / this.#cfg.blockTokens
    );
  }

  /** Predicted cached prompt tokens on `endpointId` (for decision records). */
  matchedTokens(endpointId: string, req: RouteInput): number {
    return (this.#tree.matchByEndpoint(this.#keyOf(req)).get(endpointId) ?? 0) * this.#cfg.blockTokens;
  }

  /** Predicted uncached prompt tokens sent to `endpointId` and not yet past prefill. */
  backlogTokens(endpointId: string): number {
    return this.#backlog.get(endpointId) ?? 0;
  }

  /** Predicted output tokens still to generate by the requests this replica sent to `endpointId`. */
  decodeTokens(endpointId: string): number {
    return this.#decode.get(endpointId) ?? 0;
  }

  shareOf(endpointId: string): { prefillTokens: number; decodeTokens: number } {
    return { prefillTokens: this.backlogTokens(endpointId), decodeTokens: this.decodeTokens(endpointId) };
  }

  /** A request's predicted output: its max_tokens, or the usual output when that is shorter or unset. */
  expectedOutput(input: RouteInput): number {
    const usual = this.#meanOutput ?? (input.maxTokens === undefined ? DEFAULT_OUTPUT_TOKENS : Infinity);
    return Math.max(1, Math.round(Math.min(input.maxTokens ?? Infinity, usual)));
  }

  /** Tokens the tree believes `endpointId` holds. */
  treeTokens(endpointId: string): number {
    return this.#tree.sizeOf(endpointId) * this.#cfg.blockTokens;
  }

  #effectiveMatch(e: EndpointView, blocks: number): number {
    const known = this.#generations.get(e.id);
    if (known !== undefined && known !== e.generation) return 0; // restarted: cache is empty
    const hostShare = this.#hostShare.get(e.id) ?? 0;
    return blocks * (1 - hostShare * (1 - this.#hostWeight));
  }

  /** This request's predicted output against the usual one (1 before any is known), within 1/4..4. */
  #outputScale(req: RouteInput): number {
    const usual = this.#meanOutput;
    if (usual === undefined || usual <= 0) return 1;
    return Math.min(4, Math.max(0.25, this.expectedOutput(req) / usual));
  }

  /** The tier's predicted prefill backlog on e, at least what the runtime says is waiting. */
  #tierBacklog(e: EndpointView): number {
    const predicted = (this.#backlog.get(e.id) ?? 0) + (e.peers?.prefillTokens ?? 0);
    return Math.max(predicted, e.waitingUncachedTokens ?? 0);
  }

  /** Nothing in flight, queued, waiting or decoding on e, by the tier's counts and the runtime's own. */
  #idle(e: EndpointView): boolean {
    return (
      loadOf(e) === 0 && !((e.running ?? 0) > 0) && !(this.#tierBacklog(e) > 0) && !(this.#tierDecode(e) > 0)
    );
  }

  #tierDecode(e: EndpointView): number {
    return (this.#decode.get(e.id) ?? 0) + (e.peers?.decodeTokens ?? 0);
  }

  /** The usual pick's load, from this replica's own: the mean while few, then an EWMA. */
  #learnPick(uncached: number, decode: number, prompt: number): void {
    this.#picks++;
    const a = Math.max(PICK_ALPHA, 1 / this.#picks);
    this.#pickUncached += a * (uncached - this.#pickUncached);
    this.#pickDecode += a * (decode - this.#pickDecode);
    this.#pickPrompt += a * (prompt - this.#pickPrompt);
  }

  #learnOutput(tokens: number | undefined): void {
    if (tokens === undefined || !Number.isFinite(tokens) || tokens <= 0) return;
    const prev = this.#meanOutput;
    this.#meanOutput = prev === undefined ? tokens : prev + OUTPUT_ALPHA * (tokens - prev);
  }

  /** Least load; among equals the smaller tree (the fraction stays below 0.5). */
  #leastLoaded(endpoints: readonly EndpointView[]): number | undefined {
    return indexOfMin(endpoints, (e) => {
      const size = this.#tree.sizeOf(e.id);
      return loadOf(e) + (0.5 * size) / (size + 1);
    });
  }

  #keyOf(input: RouteInput): PrefixKey {
    let key = this.#keys.get(input);
    if (!key) {
      const blocks: BlockKey[] = computeBlockKeys(input.tokens, this.#cfg.blockTokens);
      key = { salt: input.salt, blocks };
      this.#keys.set(input, key);
    }
    return key;
  }

  #takePending(id: string, endpoint: string): Pending | undefined {
    const pending = this.#pending.get(id);
    if (pending?.endpoint !== endpoint) return undefined;
    this.#pending.delete(id);
    this.#settle(pending);
    this.#addDecode(pending.endpoint, -toCome(pending));
    return pending;
  }

  #addDecode(endpoint: string, delta: number): void {
    const left = (this.#decode.get(endpoint) ?? 0) + delta;
    if (left > 0) this.#decode.set(endpoint, left);
    else this.#decode.delete(endpoint);
  }

  /** The request's prefill is over (or it ended): it leaves its endpoint's backlog. */
  #settle(pending: Pending | undefined): void {
    if (!pending || pending.started) return;
    pending.started = true;
    const left = (this.#backlog.get(pending.endpoint) ?? 0) - pending.uncached;
    if (left > 0) this.#backlog.set(pending.endpoint, left);
    else this.#backlog.delete(pending.endpoint);
  }

  #learnTier(endpoint: string, device: number | undefined, host: number | undefined): void {
    if (device === undefined || host === undefined || device + host <= 0) return;
    const prev = this.#hostShare.get(endpoint) ?? 0;
    this.#hostShare.set(endpoint, prev + HOST_SHARE_ALPHA * (host / (device + host) - prev));
  }

  #forget(id: string): void {
    this.#tree.removeEndpoint(id);
    this.#hostShare.delete(id);
    this.#generations.delete(id);
    this.#backlog.delete(id);
    this.#decode.delete(id);
    for (const [rid, p] of this.#pending) if (p.endpoint === id) this.#pending.delete(rid);
  }
}
