// The scheduler and timing model: continuous batching after SGLang's
// Scheduler (python/sglang/srt/managers/scheduler.py), in simulated time.
//
// Each iteration:
//   1. Order the waiting queue as SGLang's schedule policy does
//      (schedule-policy.ts). Admit waiting requests in that order while the running set is below
//      maxRunningRequests, the batch's uncached tokens fit maxPrefillTokens,
//      it holds at most prefillMaxRequests
//      (the first request always fits) and the KV pool can hold them. A
//      request needs the host hits it loads back, its uncached prompt tokens
//      and room for all its new tokens; unlocked cache leaves are evicted to
//      make room. A request that cannot fit blocks those behind it.
//   2. If any were admitted, run one prefill step (prefill is prioritised over
//      decode, as in SGLang without mixed chunks):
//        uncached / prefillTps + hostLoaded / hostLoadTps + l3Loaded / l3.loadTps
//      It yields every admitted request's first token. With a shared L3 tier
//      (l3-tier.ts), the pages past the device and host match that L3 holds as
//      a leading run are loaded, not computed (at least 256 tokens, as SGLang).
//   3. Otherwise run one decode step for the running set:
//        decodeBaseMs + decodePerReqMs * running
//      It yields one token per running request.
//
// As in SGLang, a match is capped at prompt - 1 tokens (the last token is
// always computed to produce logits), page-aligned; the prompt is inserted
// into the radix tree when its prefill ends and prompt + output when the
// request finishes; the path stays locked while the request runs.
//
// After each prefill step, each decode step and whenever the engine falls
// fully idle (nothing waiting or running; a flush included) it tells the
// optional step listener: where SGLang's scheduler publishes its KV and load
// events (process_batch_result, on_idle).
//
// KV accounting: used = tree.deviceSize + Σ running.reserved, where reserved
// is the part of a request's KV not (yet) in the tree: uncached prompt tokens
// until its prefill ends, then its new tokens. With the radix cache disabled
// nothing is shared and the whole prompt is reserved.

import type { Clock } from './clock.ts';
import { L3Tier, type L3TierConfig } from './l3-tier.ts';
import { PriorityStats, type PriorityCounts, type StatsQueue } from './priority-stats.ts';
import { RadixTree, type MatchResult, type TreeNode, type WritePolicy } from './radix-tree.ts';
import { computeEffectivePriority, WaitingQueueOrder, type SchedulePolicyConfig } from './schedule-policy.ts';

/** The launch settings; the queue's order's own (priority scheduling, the policy) in SchedulePolicyConfig. */
export interface EngineConfig extends SchedulePolicyConfig {
  readonly maxRunningRequests: number;
  readonly maxTotalTokens: number;
  readonly maxPrefillTokens: number;
  readonly pageSize: number;
  readonly radixCache: boolean;
  /** Host tier capacity in tokens (HiCache); 0 = no host tier. */
  readonly hostCapacity: number;
  readonly writePolicy: WritePolicy;
  readonly prefillTps: number;
  readonly hostLoadTps: number;
  readonly decodeBaseMs: number;
  readonly decodePerReqMs: number;
  /** HiCache's shared L3 tier (`--hicache-storage-backend file`); absent or null: none. */
  readonly l3?: L3TierConfig | null;
  /** `--prefill-max-requests`: at most this many requests in a prefill batch; absent or null: no cap. */
  readonly prefillMaxRequests?: number | null;
}

export interface RequestSpec {
  readonly rid: string;
  /** cache_salt + extra_key; requests in different namespaces never share KV. */
  readonly namespace: string;
  readonly promptIds: readonly number[];
  /** Tokens this request will generate (max_new_tokens after stop truncation), >= 1. */
  readonly outputIds: readonly number[];
  /** PD decode: the KV arrives from the prefill server, no prefill step here. */
  readonly skipPrefill?: boolean;
  /**
   * Computed but never inserted in the radix cache: SGLang's requests with the
   * fake bootstrap host (managers/schedule_batch.py skip_radix_cache_insert).
   */
  readonly skipCacheInsert?: boolean;
  /** The request's `priority` field; read only with priority scheduling on. */
  readonly priority?: number | null | undefined;
  /** The scheduler's max_new_tokens (clipped), lof's sort key; absent: outputIds.length. */
  readonly maxNewTokens?: number;
  /** `routing_key` (the x-smg-routing-key header on the OpenAI routes), routing-key's sort key. */
  readonly routingKey?: string | null | undefined;
}

export interface RequestListener {
  /** `generated` tokens are now out (1 after prefill, +1 per decode step); `cached` is the prompt's hit. */
  onTokens(generated: number, now: number, cached: CachedSplit): void;
  onFinish(result: RequestResult): void;
}

export const FinishKind = { length: 'length', abort: 'abort' } as const;
export type FinishKind = (typeof FinishKind)[keyof typeof FinishKind];

export interface CachedSplit {
  readonly device: number;
  readonly host: number;
  /** Loaded from the L3 tier; absent without one. */
  readonly storage?: number;
}

/** A request's cached tokens by tier, as its listener and a PD room carry them. */
export function splitOf(r: RequestResult): CachedSplit {
  return {
    device: r.cachedDevice,
    host: r.cachedHost,
    ...(r.cachedStorage === undefined ? {} : { storage: r.cachedStorage }),
  };
}

export interface RequestResult {
  readonly rid: string;
  readonly finish: FinishKind;
  readonly abortMessage?: string;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens: number;
  readonly cachedDevice: number;
  readonly cachedHost: number;
  /** Loaded from the L3 tier; absent without one. */
  readonly cachedStorage?: number;
  readonly arrivedAt: number;
  readonly queueMs: number;
  readonly ttftMs: number;
  readonly e2eMs: number;
}

interface Live {
  readonly spec: RequestSpec;
  readonly listener: RequestListener;
  readonly arrivedAt: number;
  /** Its effective priority with priority scheduling on, else 0 (unused). */
  readonly priority: number;
  readonly arrivalProcessedTokens: number;
  admittedAt: number;
  firstTokenAt: number;
  generated: number;
  reserved: number;
  uncached: number;
  hostLoaded: number;
  /** Tokens loaded from the L3 tier: KV the request holds until its prefill inserts it. */
  storageLoaded: number;
  cachedDevice: number;
  lockedNode: TreeNode | null;
  aborted: string | null;
}

export interface EngineSnapshot {
  readonly numRunningReqs: number;
  readonly numWaitingReqs: number;
  readonly numUsedTokens: number;
  readonly maxTotalNumTokens: number;
  readonly tokenUsage: number;
  readonly genThroughput: number;
  readonly cacheHitRate: number;
  readonly deviceCachedTokens: number;
  readonly hostCachedTokens: number;
  /** With priority scheduling on, the running and waiting requests by effective priority; else null. */
  readonly byPriority: PriorityCounts | null;
  readonly counters: EngineCounters;
}

export interface EngineCounters {
  promptTokens: number;
  generationTokens: number;
  cachedTokens: number;
  cachedHostTokens: number;
  cachedStorageTokens: number;
  requests: number;
  aborted: number;
  /** Requests that carried their own `priority` (a client's or a gateway's stamp), scheduled by it or not. */
  prioritized: number;
  evictedDeviceTokens: number;
  loadedBackTokens: number;
  /** Model time spent in prefill steps. */
  prefillBusyMs: number;
}

export const EngineStepKind = { prefill: 'prefill', decode: 'decode', idle: 'idle' } as const;
export type EngineStepKind = (typeof EngineStepKind)[keyof typeof EngineStepKind];

/** Told after each step's results are out, and when the engine falls fully idle. */
export type StepListener = (kind: EngineStepKind, now: number) => void;

/** All counters at zero: a new engine's, or the start of a sum. */
export function createEngineCounters(): EngineCounters {
  return {
    promptTokens: 0,
    generationTokens: 0,
    cachedTokens: 0,
    cachedHostTokens: 0,
    cachedStorageTokens: 0,
    requests: 0,
    aborted: 0,
    prioritized: 0,
    evictedDeviceTokens: 0,
    loadedBackTokens: 0,
    prefillBusyMs: 0,
  };
}

const THROUGHPUT_WINDOW_MS = 5_000;

export class Engine {
  readonly #cfg: EngineConfig;
  readonly #clock: Clock;
  readonly tree: RadixTree;
  /** The shared L3 tier, when the server has one. */
  readonly l3: L3Tier | null;
  readonly #waiting: Live[] = [];
  readonly #running: Live[] = [];
  readonly #byRid = new Map<string, Live>();
  #busy = false;
  /** Bumped whenever KV or running slots are released; admission retries only after a bump. */
  #releaseEpoch = 0;
  #blockedAtEpoch = -1;
  #reservedTotal = 0;
  #lastHitRate = 0;
  /** With priority scheduling on, what its stats reports know; else null. */
  readonly #priorityStats: PriorityStats | null;
  readonly #order: WaitingQueueOrder;
  /** Prefill tokens computed so far, counted as each prefill step starts (hrrn's clock). */
  #processedTokens = 0;
  readonly #genLog: [number, number][] = [];
  readonly counters: EngineCounters = createEngineCounters();
  /**
   * SGLang's decode step-time moment sums (scheduler._accumulate_decode_moment,
   * /v1/loads decode_moments): steps, Σ batch size, Σ step µs, Σ batch², Σ batch·µs,
   * Σ generated tokens.
   */
  readonly decodeMoments: number[] = [0, 0, 0, 0, 0, 0];
  onStep: StepListener | null = null;

  constructor(cfg: EngineConfig, clock: Clock) {
    this.#cfg = cfg;
    this.#clock = clock;
    this.tree = new RadixTree({
      pageSize: cfg.pageSize,
      hostCapacity: cfg.hostCapacity,
      writePolicy: cfg.writePolicy,
    });
    this.l3 = cfg.l3 && cfg.radixCache ? new L3Tier(this.tree, cfg.l3) : null;
    this.#order = new WaitingQueueOrder(cfg);
    const p = cfg.priorityScheduling;
    this.#priorityStats = p ? new PriorityStats(p.decodeLogInterval ?? 0) : null;
  }

  get config(): EngineConfig {
    return this.#cfg;
  }

  /** The priority the scheduler holds a request at: its effective one with priority scheduling on, else 0. */
  effectivePriorityOf(own: number | null | undefined): number {
    const p = this.#cfg.priorityScheduling;
    return p ? computeEffectivePriority(own, p) : 0;
  }

  submit(spec: RequestSpec, listener: RequestListener): void {
    if (spec.outputIds.length < 1) throw new RangeError('a request generates at least one token');
    const live: Live = {
      spec,
      listener,
      arrivedAt: this.#clock.now(),
      priority: this.effectivePriorityOf(spec.priority),
      arrivalProcessedTokens: this.#processedTokens,
      admittedAt: -1,
      firstTokenAt: -1,
      generated: 0,
      reserved: 0,
      uncached: 0,
      hostLoaded: 0,
      storageLoaded: 0,
      cachedDevice: 0,
      lockedNode: null,
      aborted: null,
    };
    this.#byRid.set(spec.rid, live);
    this.#waiting.push(live);
    this.#kick();
  }

  /** Abort a request (client gone); its KV is released now or at the end of the current step. */
  abort(rid: string, message = 'Abort request'): void {
    const live = this.#byRid.get(rid);
    if (!live || live.aborted !== null) return;
    live.aborted = message;
    const w = this.#waiting.indexOf(live);
    if (w >= 0) {
      this.#waiting.splice(w, 1);
      this.#finish(live, this.#clock.now());
    }
    // Running requests are finished at the end of the step they are in.
  }

  /** Drop the whole cache; refused while requests are queued or running (as SGLang's /flush_cache). */
  flushCache(): boolean {
    if (this.#waiting.length > 0 || this.#running.length > 0 || this.#busy) return false;
    this.#releaseEpoch++;
    const flushed = this.tree.reset();
    this.onStep?.('idle', this.#clock.now());
    return flushed;
  }

  /** Prompt tokens of the requests still waiting for admission. */
  get waitingPromptTokens(): number {
    return this.#waiting.reduce((s, l) => s + l.spec.promptIds.length, 0);
  }

  get usedTokens(): number {
    return this.tree.sizes().deviceSize + this.#reservedTotal;
  }

  snapshot(): EngineSnapshot {
    const now = this.#clock.now();
    while (this.#genLog.length > 0 && (this.#genLog[0]?.[0] ?? now) < now - THROUGHPUT_WINDOW_MS)
      this.#genLog.shift();
    const tokens = this.#genLog.reduce((s, [, n]) => s + n, 0);
    const span = Math.min(THROUGHPUT_WINDOW_MS, Math.max(now, 1));
    const sizes = this.tree.sizes();
    // SGLang's _get_token_info: max_total - (available + evictable); cache no request holds is not "used".
    const used = this.usedTokens - this.tree.evictableDeviceSize;
    return {
      numRunningReqs: this.#running.length,
      numWaitingReqs: this.#waiting.length,
      numUsedTokens: used,
      maxTotalNumTokens: this.#cfg.maxTotalTokens,
      tokenUsage: used / this.#cfg.maxTotalTokens,
      genThroughput: (tokens * 1000) / span,
      cacheHitRate: this.#lastHitRate,
      deviceCachedTokens: sizes.deviceSize,
      hostCachedTokens: sizes.hostSize,
      byPriority: this.#priorityStats?.count(this.#running, this.#waiting) ?? null,
      counters: { ...this.counters },
    };
  }

  /**
   * PrefillStats.from_adder: the running batch as a prefill batch forms (a PD decode server, the
   * only one whose requests skip prefill, forms none), kept only where its priorities are.
   */
  #runningForStats(): readonly Live[] {
    return this.#priorityStats ? [...this.#running] : [];
  }

  /** A queue the server holds outside the engine that SGLang's stats reports count (priority-stats.ts). */
  countInStatsReports(queue: StatsQueue): void {
    this.#priorityStats?.countInStatsReports(queue);
  }

  #accumulateDecodeMoment(batchSize: number, stepUs: number): void {
    const m = this.decodeMoments;
    const add = [1, batchSize, stepUs, batchSize * batchSize, batchSize * stepUs, batchSize];
    add.forEach((v, i) => (m[i] = (m[i] ?? 0) + v));
  }

  #kick(): void {
    if (this.#busy) return;
    this.#busy = true;
    // Run on the next timer turn so requests arriving together batch together.
    this.#clock.setTimer(0, () => {
      this.#busy = false;
      this.#iterate(this.#clock.now());
    });
  }

  #free(): number {
    return this.#cfg.maxTotalTokens - this.usedTokens;
  }

  #match(live: Live, now: number): MatchResult | null {
    if (!this.#cfg.radixCache || live.spec.skipPrefill) return null;
    const ids = live.spec.promptIds;
    return this.tree.match(live.spec.namespace, ids.slice(0, Math.max(0, ids.length - 1)), now);
  }

  /** Try to admit the head of the queue; returns false when it must wait. */
  #admit(live: Live, budget: number, isFirst: boolean, now: number): boolean {
    const prompt = live.spec.promptIds.length;
    const m = this.#match(live, now);
    const device = m?.deviceTokens ?? 0;
    const host = m?.hostTokens ?? 0;
    const ids = live.spec.promptIds;
    // Past the device and host match, the leading run the L3 tier holds (prefetched, then loaded).
    const storage =
      this.l3 && m
        ? this.l3.lookup(live.spec.namespace, ids.slice(0, Math.max(0, ids.length - 1)), device + host)
        : 0;
    const uncached = live.spec.skipPrefill ? 0 : prompt - device - host - storage;
    const own = live.spec.skipPrefill ? prompt : uncached + storage;
    if (!isFirst && uncached > budget) return false;
    const need = host + own + live.spec.outputIds.length;
    if (m) this.tree.lock(m.node);
    let free = this.#free();
    if (free < need) {
      this.counters.evictedDeviceTokens += this.tree.evictDevice(need - free, now);
      free = this.#free();
    }
    // An oversized request alone on an idle server is admitted over budget rather than never.
    const alone = this.#running.length === 0 && isFirst;
    if (free < need && !alone) {
      if (m) this.tree.unlock(m.node);
      return false;
    }
    const loaded = m ? this.tree.loadBack(m) : 0;
    this.counters.loadedBackTokens += loaded;
    live.lockedNode = m?.node ?? null;
    live.admittedAt = now;
    live.uncached = uncached;
    live.hostLoaded = loaded;
    live.storageLoaded = storage;
    live.cachedDevice = device;
    live.reserved = own + live.spec.outputIds.length;
    this.#reservedTotal += live.reserved;
    return true;
  }

  /** Before each prefill batch forms (schedule-policy.ts), unless no request could join it. */
  #orderWaiting(now: number): void {
    if (this.#running.length >= this.#cfg.maxRunningRequests) return;
    const tree = this.#cfg.radixCache ? this.tree : null;
    const view = { tree, running: this.#running, processedTokens: this.#processedTokens, now };
    this.#order.order(this.#waiting, view);
  }

  /** PrefillAdder.add_one_req's first check (--prefill-max-requests): the batch closes, nothing is blocked. */
  #isPrefillBatchClosed(admitted: number): boolean {
    const cap = this.#cfg.prefillMaxRequests;
    return cap !== undefined && cap !== null && admitted >= cap;
  }

  #iterate(now: number): void {
    if (this.#busy) return;
    const admitted: Live[] = [];
    let budget = this.#cfg.maxPrefillTokens;
    // A head that did not fit cannot fit before something is released: skip re-matching it every
    // step (SGLang's batch_is_full, cleared only by a leaving request).
    const blocked = this.#blockedAtEpoch === this.#releaseEpoch;
    if (!blocked) this.#orderWaiting(now);
    while (!blocked && this.#waiting.length > 0) {
      const head = this.#waiting[0];
      if (!head) break;
      if (this.#isPrefillBatchClosed(admitted.length)) break;
      if (this.#running.length + admitted.length >= this.#cfg.maxRunningRequests) {
        this.#blockedAtEpoch = this.#releaseEpoch;
        break;
      }
      if (!this.#admit(head, budget, admitted.length === 0, now)) {
        if (admitted.length === 0) this.#blockedAtEpoch = this.#releaseEpoch;
        break;
      }
      this.#waiting.shift();
      budget -= head.uncached;
      admitted.push(head);
    }
    const prefill = admitted.filter((l) => !l.spec.skipPrefill);
    for (const l of admitted) if (l.spec.skipPrefill) this.#running.push(l);
    // Requests that arrived after the previous step ended start no earlier than their arrival.
    const start = admitted.reduce((t, l) => Math.max(t, l.arrivedAt), now);
    for (const l of admitted) l.admittedAt = start;
    if (prefill.length > 0) {
      const uncached = prefill.reduce((s, l) => s + l.uncached, 0);
      // Scheduler.run_batch adds the batch's extend tokens as it launches it.
      this.#processedTokens += uncached;
      const hits = prefill.reduce((s, l) => s + l.cachedDevice + l.hostLoaded + l.storageLoaded, 0);
      this.#lastHitRate = hits / Math.max(1, hits + uncached);
      const loaded = prefill.reduce((s, l) => s + l.hostLoaded, 0);
      const fromL3 = prefill.reduce((s, l) => s + l.storageLoaded, 0);
      const duration =
        (uncached / this.#cfg.prefillTps) * 1000 +
        (loaded / this.#cfg.hostLoadTps) * 1000 +
        (fromL3 > 0 ? (fromL3 / (this.#cfg.l3?.loadTps ?? Infinity)) * 1000 : 0);
      this.counters.prefillBusyMs += duration;
      this.#runStep(start, duration, this.#endPrefill(prefill, this.#runningForStats()), 'prefill');
    } else if (this.#running.length > 0) {
      const duration = this.#cfg.decodeBaseMs + this.#cfg.decodePerReqMs * this.#running.length;
      const batch = [...this.#running];
      this.#accumulateDecodeMoment(batch.length, duration * 1000);
      this.#runStep(now, duration, this.#endDecode(batch), 'decode');
    } else if (this.#waiting.length === 0) {
      this.onStep?.('idle', now);
    }
  }

  /**
   * Steps run back to back on the model's own timeline: the next step starts
   * when this one ends, even if the timer fired late (a busy host), so wall
   * lag does not accumulate into model time. A step never starts before the
   * requests in it arrived.
   */
  #runStep(start: number, duration: number, done: (end: number) => void, kind: EngineStepKind): void {
    this.#busy = true;
    const end = start + duration;
    this.#clock.setTimer(Math.max(0, end - this.#clock.now()), () => {
      done(end);
      this.onStep?.(kind, end);
      this.#busy = false;
      this.#iterate(end);
    });
  }

  #endPrefill(batch: readonly Live[], runningAtStart: readonly Live[]): (end: number) => void {
    return (end) => {
      this.#priorityStats?.report(runningAtStart, this.#waiting);
      for (const l of batch) {
        this.counters.promptTokens += l.spec.promptIds.length;
        this.counters.cachedTokens += l.cachedDevice + l.hostLoaded + l.storageLoaded;
        this.counters.cachedHostTokens += l.hostLoaded;
        this.counters.cachedStorageTokens += l.storageLoaded;
        if (l.aborted === null) this.#insert(l, l.spec.promptIds, end);
        // The prompt's KV (computed or loaded from L3) now lives in the tree (or is freed as a duplicate).
        this.#reservedTotal -= l.uncached + l.storageLoaded;
        l.reserved -= l.uncached + l.storageLoaded;
        if (l.aborted === null) this.#emitTokens(l, end);
        if (l.aborted !== null || l.generated >= l.spec.outputIds.length) this.#finish(l, end);
        else this.#running.push(l);
      }
    };
  }

  #endDecode(batch: readonly Live[]): (end: number) => void {
    return (end) => {
      this.#priorityStats?.afterDecode(batch, this.#waiting);
      for (const l of batch) {
        if (l.aborted === null) this.#emitTokens(l, end);
        if (l.aborted !== null || l.generated >= l.spec.outputIds.length) {
          this.#running.splice(this.#running.indexOf(l), 1);
          this.#finish(l, end);
        }
      }
    };
  }

  #emitTokens(l: Live, now: number): void {
    l.generated++;
    this.counters.generationTokens++;
    this.#genLog.push([now, 1]);
    if (this.#genLog.length > 100_000) this.#genLog.splice(0, 50_000);
    if (l.firstTokenAt < 0) l.firstTokenAt = now;
    l.listener.onTokens(l.generated, now, this.#cachedSplit(l));
  }

  #cachedSplit(l: Live): CachedSplit {
    return {
      device: l.cachedDevice,
      host: l.hostLoaded,
      ...(this.l3 ? { storage: l.storageLoaded } : {}),
    };
  }

  #insert(l: Live, ids: readonly number[], now: number): void {
    if (!this.#cfg.radixCache || l.spec.skipCacheInsert) return;
    const { node } = this.tree.insert(l.spec.namespace, ids, now);
    this.tree.lock(node);
    if (l.lockedNode) this.tree.unlock(l.lockedNode);
    l.lockedNode = node;
  }

  #finish(l: Live, now: number): void {
    this.#byRid.delete(l.spec.rid);
    this.#releaseEpoch++;
    if (l.admittedAt >= 0) {
      if (l.aborted === null && !l.spec.skipPrefill) {
        // SGLang caches prompt + output (minus the last token, which has no KV yet).
        const seq = [...l.spec.promptIds, ...l.spec.outputIds.slice(0, Math.max(0, l.generated - 1))];
        this.#insert(l, seq, now);
      }
      if (l.lockedNode) this.tree.unlock(l.lockedNode);
      l.lockedNode = null;
      this.#reservedTotal -= l.reserved;
      l.reserved = 0;
    }
    this.counters.requests++;
    if (l.aborted !== null) this.counters.aborted++;
    if (typeof l.spec.priority === 'number') this.counters.prioritized++;
    const admitted = l.admittedAt >= 0 ? l.admittedAt : now;
    const result: RequestResult = {
      rid: l.spec.rid,
      finish: l.aborted === null ? 'length' : 'abort',
      ...(l.aborted === null ? {} : { abortMessage: l.aborted }),
      promptTokens: l.spec.promptIds.length,
      completionTokens: l.generated,
      cachedTokens: l.cachedDevice + l.hostLoaded + l.storageLoaded,
      cachedDevice: l.cachedDevice,
      cachedHost: l.hostLoaded,
      ...(this.l3 ? { cachedStorage: l.storageLoaded } : {}),
      arrivedAt: l.arrivedAt,
      queueMs: admitted - l.arrivedAt,
      ttftMs: l.firstTokenAt >= 0 ? l.firstTokenAt - l.arrivedAt : now - l.arrivedAt,
      e2eMs: now - l.arrivedAt,
    };
    l.listener.onFinish(result);
  }
}
