// Reads the gateway tier when an autoscaler asks, at most once per `maxAgeMs`
// (an HPA asks every 15 s per metric; kubectl may ask more), one read at a
// time, and keeps each replica's refusal counters for a while so that a rate
// can be taken over the reads of the last minute.
import type { GatewayCacheReport } from '#api';
import { readGatewayTier } from '../gateway-client/tier.ts';

export type TierSample =
  | {
      readonly ok: true;
      readonly reports: readonly GatewayCacheReport[];
      readonly rejectionsPerSecond: ReadonlyMap<string, number>;
      /** Replicas that did not answer, with why (the others' figures still count). */
      readonly unread: readonly string[];
      readonly at: number;
    }
  | { readonly ok: false; readonly error: string; readonly at: number };

export interface TierSamplerOptions {
  readonly gatewayAdminUrl: string;
  readonly maxAgeMs?: number;
  readonly timeoutMs?: number;
  readonly now?: () => number;
  readonly signal?: AbortSignal;
}

/** A replica's refusal counters at one read: by Deployment, since its start (`instance`). */
interface Reading {
  readonly at: number;
  readonly instance: string;
  readonly rejected: ReadonlyMap<string, number>;
}

const RATE_WINDOW_MS = 60_000;

/** Pure: refusals per second by Deployment, from each replica's readings, oldest first. */
export function computeRejectionRates(history: Iterable<readonly Reading[]>): Map<string, number> {
  const rates = new Map<string, number>();
  for (const readings of history) {
    const last = readings.at(-1);
    // The oldest reading of the same start: a restarted replica's counters began again.
    const base = readings.find((r) => r.instance === last?.instance);
    if (!last || !base || base === last || last.at <= base.at) continue;
    const seconds = (last.at - base.at) / 1000;
    for (const [deployment, n] of last.rejected) {
      const before = base.rejected.get(deployment) ?? 0;
      rates.set(deployment, (rates.get(deployment) ?? 0) + Math.max(0, n - before) / seconds);
    }
  }
  return rates;
}

export class TierSampler {
  readonly #opts: TierSamplerOptions;
  readonly #now: () => number;
  readonly #history = new Map<string, Reading[]>();
  #last: TierSample | undefined;
  #inflight: Promise<TierSample> | undefined;

  constructor(opts: TierSamplerOptions) {
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
  }

  /** The last sample if fresh enough, else a new read (shared by concurrent callers). */
  read(): Promise<TierSample> {
    const last = this.#last;
    if (last && this.#now() - last.at < (this.#opts.maxAgeMs ?? 5_000)) return Promise.resolve(last);
    this.#inflight ??= this.#readNow().finally(() => (this.#inflight = undefined));
    return this.#inflight;
  }

  async #readNow(): Promise<TierSample> {
    const tier = await readGatewayTier(this.#opts.gatewayAdminUrl, {
      timeoutMs: this.#opts.timeoutMs ?? 3_000,
      ...(this.#opts.signal ? { signal: this.#opts.signal } : {}),
    });
    const at = this.#now();
    if (!tier.ok) return (this.#last = { ok: false, error: tier.error, at });
    const reports: GatewayCacheReport[] = [];
    const unread: string[] = [];
    for (const r of tier.replicas) {
      if (!r.ok) {
        unread.push(`${r.address}: ${r.error}`);
        continue;
      }
      reports.push(r.report);
      const rejected = new Map(r.report.deployments.map((d) => [d.deployment, d.admission?.rejected ?? 0]));
      const readings = [
        ...(this.#history.get(r.address) ?? []),
        { at, instance: r.report.instance, rejected },
      ];
      this.#history.set(
        r.address,
        readings.filter((x) => at - x.at <= RATE_WINDOW_MS),
      );
    }
    for (const [address, readings] of this.#history)
      if (readings.every((x) => at - x.at > RATE_WINDOW_MS)) this.#history.delete(address);
    const sample: TierSample = {
      ok: true,
      reports,
      rejectionsPerSecond: computeRejectionRates(this.#history.values()),
      unread,
      at,
    };
    this.#last = sample;
    return sample;
  }
}
