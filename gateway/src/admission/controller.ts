// Admission control for one deployment: a concurrency limit, a bounded
// priority queue with a timeout, and an adaptive limit.
//
// - acquire(signal, { priority, weight }): a permit when the request's weight
//   fits under the limit beside what is in flight; else a place in the queue
//   when it has room; else `overloaded` (429 + Retry-After). The weight is
//   what the runtime serves for it (a batch's prompts x n, each a request of
//   its own there); in flight counts weights. A request heavier than the
//   limit is admitted alone (nothing else in flight), never refused for its
//   weight: the policy's maxBatchSize and maxN bound it. The queue holds
//   requests, whatever their weight. A queued request gets a permit highest priority first
//   (an integer, default 0), in arrival order within one priority, or
//   `queue-timeout` (503 + Retry-After) after queueTimeoutMs, or `aborted`
//   when its signal fires. The next in line waits until its weight fits;
//   lighter requests behind it wait too, so a batch is not starved.
// - A full queue still takes an arrival of strictly higher priority than the
//   lowest waiting: the newest waiter of that lowest priority gives up its
//   place and gets the `overloaded` a refused arrival would have got. An
//   arrival no higher than everyone waiting is refused. maxQueue 0 means no
//   queue at all, whatever the priority.
// - drain(): queued requests and new arrivals get `draining` (503); permits
//   already held finish normally.
// - Adaptive limit (gradient, after Netflix concurrency-limits' Gradient2):
//     short = EWMA(latency, 0.3)     long = EWMA(latency, 0.02)
//     short > tolerance × long, a failed request, or reportPressure()
//        → limit = max(minConcurrency, limit × backoff), at most once per
//          cooldown (so one burst of slow answers is one decrease)
//     otherwise, when the limit is what holds requests back (queue non-empty
//        or in-flight at the limit) → limit += 1 / limit (≈ +1 per window)
//     limit never exceeds maxConcurrency.
//   `latency` is time to the first upstream byte: it grows with the runtime's
//   queue and is far less dependent on output length than end-to-end time.
// - Each deployment has its own controller; nothing is shared, so a slow
//   deployment fills only its own queue.

import type { Clock, Timer } from '#kube/clock.ts';
import { PriorityQueue } from './priority-queue.ts';

export interface AdmissionConfig {
  readonly maxConcurrency: number;
  readonly maxQueue: number;
  readonly queueTimeoutMs: number;
  readonly adaptive: boolean;
  readonly minConcurrency?: number;
  /** short/long latency ratio above which the limit decreases. */
  readonly tolerance?: number;
  /** Multiplicative decrease factor. */
  readonly backoff?: number;
  readonly cooldownMs?: number;
}

export interface AcquireOptions {
  /** An integer; higher is served first and may displace lower when the queue is full. Default 0. */
  readonly priority?: number | undefined;
  /** What the runtime serves for the request: prompts x n (a positive integer). Default 1. */
  readonly weight?: number | undefined;
}

export type Rejection =
  | { readonly code: 'overloaded'; readonly retryAfterSeconds: number }
  | { readonly code: 'queue-timeout'; readonly retryAfterSeconds: number }
  | { readonly code: 'draining' }
  | { readonly code: 'aborted' };

export interface ReleaseInfo {
  /** Milliseconds to the first upstream byte; omit when there was none. */
  readonly latencyMs?: number;
  /** false on an upstream failure (timeout, 5xx): treated as pressure. */
  readonly ok: boolean;
}

export interface Permit {
  /** Milliseconds the request waited in the queue. */
  readonly queuedMs: number;
  /** Idempotent: only the first call counts. */
  release(info?: ReleaseInfo): void;
}

export type AdmissionResult =
  { readonly ok: true; readonly value: Permit } | { readonly ok: false; readonly error: Rejection };

interface Waiter {
  readonly enqueuedAt: number;
  readonly weight: number;
  readonly resolve: (r: AdmissionResult) => void;
  timer: Timer | undefined;
  done: boolean;
  onAbort: (() => void) | undefined;
  signal: AbortSignal | undefined;
}

export interface AdmissionSnapshot {
  readonly limit: number;
  /** The weights of the permits held: what the runtimes serve for them (prompts x n). */
  readonly inFlight: number;
  readonly queued: number;
  readonly draining: boolean;
}

export class AdmissionController {
  #cfg: Required<AdmissionConfig>;
  readonly #clock: Clock;
  #limit: number;
  #inFlight = 0;
  readonly #queue = new PriorityQueue<Waiter>();
  #draining = false;
  #shortLatency: number | undefined;
  #longLatency: number | undefined;
  #lastDecrease = -Infinity;
  #serviceMs: number | undefined;
  #idleWaiters: (() => void)[] = [];

  constructor(cfg: AdmissionConfig, clock: Clock) {
    this.#cfg = {
      minConcurrency: 1,
      tolerance: 1.5,
      backoff: 0.8,
      cooldownMs: 1000,
      ...cfg,
    };
    this.#clock = clock;
    this.#limit = cfg.maxConcurrency;
  }

  snapshot(): AdmissionSnapshot {
    return {
      limit: this.limit,
      inFlight: this.#inFlight,
      queued: this.#queue.size,
      draining: this.#draining,
    };
  }

  /** The whole-number concurrency limit in force. */
  get limit(): number {
    return Math.max(this.#cfg.minConcurrency, Math.floor(this.#limit));
  }

  /** Throws a RangeError when the priority is not an integer: a caller's bug, not a client's. */
  acquire(signal?: AbortSignal, opts: AcquireOptions = {}): Promise<AdmissionResult> {
    const priority = opts.priority ?? 0;
    if (!Number.isInteger(priority))
      throw new RangeError(`admission priority must be an integer: ${priority}`);
    const weight = opts.weight ?? 1;
    if (!Number.isInteger(weight) || weight < 1)
      throw new RangeError(`admission weight must be a positive integer: ${weight}`);
    if (this.#draining) return Promise.resolve({ ok: false, error: { code: 'draining' } });
    if (signal?.aborted) return Promise.resolve({ ok: false, error: { code: 'aborted' } });
    if (this.#fits(weight) && this.#queue.size === 0) return Promise.resolve(this.#grant(0, weight));
    if (this.#queue.size >= this.#cfg.maxQueue && !this.#displaceBelow(priority))
      return Promise.resolve(this.#overloaded());
    return new Promise((resolve) => this.#enqueue(resolve, signal, priority, weight));
  }

  /**
   * New bounds in place (a CachePolicy edit, or the gateway tier growing or
   * shrinking): permits held and requests queued stay counted, so the bound
   * holds across the change. The adaptive limit keeps its place relative to
   * the ceiling; a queue longer than the new bound keeps its waiters but takes
   * no new ones, save a higher priority displacing a lower one for one.
   */
  resize(bounds: Pick<AdmissionConfig, 'maxConcurrency' | 'maxQueue'>): void {
    const ratio = this.#limit / this.#cfg.maxConcurrency;
    this.#cfg = { ...this.#cfg, ...bounds };
    this.#limit = Math.min(
      bounds.maxConcurrency,
      Math.max(this.#cfg.minConcurrency, ratio * bounds.maxConcurrency),
    );
    this.#dispatch();
  }

  /** Stop admitting: queued and new requests get `draining`. */
  drain(): void {
    this.#draining = true;
    for (const w of this.#queue.takeAll()) this.#finish(w, { ok: false, error: { code: 'draining' } });
  }

  resume(): void {
    this.#draining = false;
  }

  /** Resolves when no permit is held (after drain, for a graceful shutdown). */
  idle(): Promise<void> {
    if (this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** An outside signal of pressure (e.g. the runtime's queue climbing in /metrics). */
  reportPressure(): void {
    if (this.#cfg.adaptive) this.#decrease();
  }

  /**
   * Frees a place in a full queue for an arrival of `priority` by turning away
   * the newest waiter of the lowest priority, when that is strictly lower.
   */
  #displaceBelow(priority: number): boolean {
    const lowest = this.#queue.lowestPriority;
    if (this.#cfg.maxQueue === 0 || lowest === undefined || priority <= lowest) return false;
    // Computed while the queue is full, so it matches what a refused arrival hears.
    const overloaded = this.#overloaded();
    const displaced = this.#queue.popNewestOfLowest();
    if (displaced) this.#finish(displaced, overloaded);
    return true;
  }

  #overloaded(): AdmissionResult {
    return { ok: false, error: { code: 'overloaded', retryAfterSeconds: this.#retryAfterSeconds() } };
  }

  #enqueue(
    resolve: (r: AdmissionResult) => void,
    signal: AbortSignal | undefined,
    priority: number,
    weight: number,
  ): void {
    const w: Waiter = {
      enqueuedAt: this.#clock.now(),
      weight,
      resolve,
      timer: undefined,
      done: false,
      onAbort: undefined,
      signal,
    };
    const place = this.#queue.push(w, priority);
    w.timer = this.#clock.setTimer(this.#cfg.queueTimeoutMs, () => {
      if (!this.#queue.remove(place)) return;
      this.#finish(w, {
        ok: false,
        error: { code: 'queue-timeout', retryAfterSeconds: this.#retryAfterSeconds() },
      });
    });
    if (signal) {
      w.onAbort = () => {
        if (this.#queue.remove(place)) this.#finish(w, { ok: false, error: { code: 'aborted' } });
      };
      signal.addEventListener('abort', w.onAbort, { once: true });
    }
  }

  #finish(w: Waiter, result: AdmissionResult): void {
    if (w.done) return;
    w.done = true;
    w.timer?.cancel();
    if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort);
    w.resolve(result);
  }

  /** `weight` more fits under the limit; a request over the limit fits only alone. */
  #fits(weight: number): boolean {
    return this.#inFlight === 0 || this.#inFlight + weight <= this.limit;
  }

  #grant(queuedMs: number, weight: number): AdmissionResult {
    this.#inFlight += weight;
    const start = this.#clock.now();
    let released = false;
    const permit: Permit = {
      queuedMs,
      release: (info) => {
        if (released) return;
        released = true;
        this.#inFlight -= weight;
        this.#learn(this.#clock.now() - start, info);
        this.#dispatch();
        if (this.#inFlight === 0) for (const f of this.#idleWaiters.splice(0)) f();
      },
    };
    return { ok: true, value: permit };
  }

  #dispatch(): void {
    while (!this.#draining) {
      const next = this.#queue.peek();
      if (next === undefined || !this.#fits(next.weight)) break;
      this.#queue.shift();
      this.#finish(next, this.#grant(this.#clock.now() - next.enqueuedAt, next.weight));
    }
  }

  #learn(heldMs: number, info: ReleaseInfo | undefined): void {
    this.#serviceMs =
      this.#serviceMs === undefined ? heldMs : this.#serviceMs + 0.1 * (heldMs - this.#serviceMs);
    if (!this.#cfg.adaptive || !info) return;
    if (!info.ok) return this.#decrease();
    if (info.latencyMs === undefined) return;
    const l = info.latencyMs;
    this.#shortLatency =
      this.#shortLatency === undefined ? l : this.#shortLatency + 0.3 * (l - this.#shortLatency);
    this.#longLatency =
      this.#longLatency === undefined ? l : this.#longLatency + 0.02 * (l - this.#longLatency);
    if (this.#shortLatency > this.#cfg.tolerance * this.#longLatency) return this.#decrease();
    const constrained = this.#queue.size > 0 || this.#inFlight + 1 >= this.limit;
    if (constrained) this.#limit = Math.min(this.#cfg.maxConcurrency, this.#limit + 1 / this.#limit);
  }

  #decrease(): void {
    const now = this.#clock.now();
    if (now - this.#lastDecrease < this.#cfg.cooldownMs) return;
    this.#lastDecrease = now;
    this.#limit = Math.max(this.#cfg.minConcurrency, this.#limit * this.#cfg.backoff);
  }

  /** Expected wait for the queue ahead to drain, in whole seconds (at least 1). */
  #retryAfterSeconds(): number {
    const service = this.#serviceMs ?? 1000;
    return Math.max(1, Math.ceil(((this.#queue.size + 1) * service) / this.limit / 1000));
  }
}

/** One controller per deployment, created on first use; settings changes apply in place. */
export class AdmissionRegistry {
  readonly #clock: Clock;
  readonly #byDeployment = new Map<string, { cfg: AdmissionConfig; ctl: AdmissionController }>();
  // Per Deployment, across its controllers (a changed config starts a new one): the tier's
  // load report counts admissions and refusals since the replica started.
  readonly #admitted = new Map<string, number>();
  readonly #refused = new Map<string, number>();

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  get(deployment: string, cfg: AdmissionConfig): AdmissionController {
    const entry = this.#byDeployment.get(deployment);
    if (entry && sameConfig(entry.cfg, cfg)) return entry.ctl;
    if (
      entry &&
      sameConfig(entry.cfg, {
        ...cfg,
        maxConcurrency: entry.cfg.maxConcurrency,
        maxQueue: entry.cfg.maxQueue,
      })
    ) {
      // Only the bounds moved: resize in place, so what is held and queued stays counted.
      entry.ctl.resize(cfg);
      entry.cfg = cfg;
      return entry.ctl;
    }
    // Any other change starts a new controller; permits of the old one still release into it.
    const ctl = new AdmissionController(cfg, this.#clock);
    this.#byDeployment.set(deployment, { cfg, ctl });
    return ctl;
  }

  delete(deployment: string): void {
    this.#byDeployment.get(deployment)?.ctl.drain();
    this.#byDeployment.delete(deployment);
    this.#refused.delete(deployment);
    this.#admitted.delete(deployment);
  }

  /** A request to `deployment` was admitted. */
  countAdmission(deployment: string): void {
    this.#admitted.set(deployment, (this.#admitted.get(deployment) ?? 0) + 1);
  }

  /** A request to `deployment` was refused for load (overloaded, queue timeout). */
  countRefusal(deployment: string): void {
    this.#refused.set(deployment, (this.#refused.get(deployment) ?? 0) + 1);
  }

  /** What this replica holds for `deployment` now, and what it admitted and refused since it started. */
  loadOf(deployment: string): { queued: number; inFlight: number; admitted: number; rejected: number } {
    const snap = this.#byDeployment.get(deployment)?.ctl.snapshot();
    return {
      queued: snap?.queued ?? 0,
      inFlight: snap?.inFlight ?? 0,
      admitted: this.#admitted.get(deployment) ?? 0,
      rejected: this.#refused.get(deployment) ?? 0,
    };
  }

  entries(): [string, AdmissionController][] {
    return [...this.#byDeployment].map(([k, v]) => [k, v.ctl]);
  }
}

function sameConfig(a: AdmissionConfig, b: AdmissionConfig): boolean {
  return (
    a.maxConcurrency === b.maxConcurrency &&
    a.maxQueue === b.maxQueue &&
    a.queueTimeoutMs === b.queueTimeoutMs &&
    a.adaptive === b.adaptive
  );
}
