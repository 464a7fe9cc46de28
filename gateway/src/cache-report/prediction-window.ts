// What routing expected cached, per Deployment, over a sliding window: the
// gateway's half of the CacheHealthy comparison (the runtimes' own counters are
// the other). A ring of buckets per Deployment: recording is two additions on
// the request path, and a report is a sum over the ring. Windowed here, not
// diffed by the operator, because the operator reads whichever replicas it
// reaches, and only ratios over the same window add up across them.
import type { Clock } from '../clock.ts';

export interface PredictionTotals {
  decisions: number;
  promptTokens: number;
  predictedTokens: number;
}

interface Bucket extends PredictionTotals {
  /** floor(now / bucketMs) when it was last reset: an older index is a stale bucket. */
  index: number;
}

export const DEFAULT_PREDICTION_WINDOW_MS = 300_000;
const BUCKETS = 30;

export class PredictionWindow {
  readonly windowMs: number;
  readonly #bucketMs: number;
  readonly #clock: Clock;
  readonly #rings = new Map<string, Bucket[]>();

  constructor(opts: { clock: Clock; windowMs?: number }) {
    this.windowMs = opts.windowMs ?? DEFAULT_PREDICTION_WINDOW_MS;
    this.#bucketMs = this.windowMs / BUCKETS;
    this.#clock = opts.clock;
  }

  /** One routing decision to `deployment` (namespace/name) that made a prediction. */
  record(deployment: string, promptTokens: number, predictedTokens: number): void {
    const index = Math.floor(this.#clock.now() / this.#bucketMs);
    let ring = this.#rings.get(deployment);
    if (!ring) {
      ring = Array.from({ length: BUCKETS }, () => ({
        index: -1,
        decisions: 0,
        promptTokens: 0,
        predictedTokens: 0,
      }));
      this.#rings.set(deployment, ring);
    }
    const b = ring[index % BUCKETS] as Bucket;
    if (b.index !== index) Object.assign(b, { index, decisions: 0, promptTokens: 0, predictedTokens: 0 });
    b.decisions += 1;
    b.promptTokens += promptTokens;
    b.predictedTokens += predictedTokens;
  }

  /** Sums over the window, per Deployment with a decision in it; Deployments idle for a window are forgotten. */
  totals(): Map<string, PredictionTotals> {
    const now = Math.floor(this.#clock.now() / this.#bucketMs);
    const out = new Map<string, PredictionTotals>();
    for (const [deployment, ring] of this.#rings) {
      const t = { decisions: 0, promptTokens: 0, predictedTokens: 0 };
      for (const b of ring) {
        if (b.index <= now - BUCKETS) continue;
        t.decisions += b.decisions;
        t.promptTokens += b.promptTokens;
        t.predictedTokens += b.predictedTokens;
      }
      if (t.decisions > 0) out.set(deployment, t);
      else this.#rings.delete(deployment);
    }
    return out;
  }
}
