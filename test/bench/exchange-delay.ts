// The virtual tier bench's exchange delay (virtual-tier.ts): a constant, the
// stress case (`--exchange-ms 20`), or drawn per message and receiver from a
// lag distribution measured on real sockets (`--exchange-ms measured:FILE`,
// the file bench-exchange-lag.ts --out writes: quantiles of the lag).
//
// Whatever the draws, a link delivers in order. The real exchange is ZeroMQ
// PUB/SUB over TCP (fleet/load-exchange.ts): each subscriber has its own TCP
// connection to each publisher, so one peer's messages reach one receiver in
// the order they were sent, and a receiver drops any seq at or below the last
// it took. A message drawn a shorter delay than the one before it therefore
// waits for it (head-of-line), as bytes behind a stalled one do on a socket.

import { readFileSync } from 'node:fs';
import { z } from 'zod';

/** The lag's quantiles: [q in 0..1, ms], q ascending from 0 to 1, ms not decreasing. */
const LagDistribution = z
  .object({
    /** The tier size it was measured at; the bench picks the nearest for each R. */
    replicas: z.number().int().min(1).optional(),
    quantiles: z
      .array(z.tuple([z.number().min(0).max(1), z.number().finite().min(0)]))
      .min(2)
      .refine((qs) => qs[0]?.[0] === 0 && qs.at(-1)?.[0] === 1, 'quantiles must run from q=0 to q=1')
      .refine(
        (qs) =>
          qs.every((x, i) => i === 0 || (x[0] > (qs[i - 1]?.[0] ?? 0) && x[1] >= (qs[i - 1]?.[1] ?? 0))),
        'quantiles must be in ascending q, with ms not decreasing',
      ),
  })
  .loose();
export type LagDistribution = z.infer<typeof LagDistribution>;

export type ExchangeDelay =
  | { readonly kind: 'constant'; readonly ms: number }
  | {
      readonly kind: 'measured';
      readonly files: readonly string[];
      readonly dists: readonly LagDistribution[];
    };

/**
 * `--exchange-ms`: a number of ms, or `measured:FILE[,FILE...]` (one file per tier size
 * measured); an error message says what to change.
 */
export function parseExchangeDelay(
  spec: string,
  read: (file: string) => string = (f) => readFileSync(f, 'utf8'),
): ExchangeDelay | string {
  if (!spec.startsWith('measured:')) {
    const ms = Number(spec);
    return spec.trim() !== '' && ms >= 0
      ? { kind: 'constant', ms }
      : `--exchange-ms: give ms >= 0 or measured:FILE (bench-exchange-lag.ts --out FILE), not "${spec}"`;
  }
  const files = spec
    .slice('measured:'.length)
    .split(',')
    .map((f) => f.trim())
    .filter((f) => f !== '');
  if (files.length === 0) return '--exchange-ms measured: name a file (bench-exchange-lag.ts --out FILE)';
  const dists: LagDistribution[] = [];
  for (const f of files) {
    let json: unknown;
    try {
      json = JSON.parse(read(f));
    } catch (err) {
      return `--exchange-ms measured:${f}: ${(err as Error).message}`;
    }
    const parsed = LagDistribution.safeParse(json);
    if (!parsed.success)
      return `--exchange-ms measured:${f}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`;
    dists.push(parsed.data);
  }
  return { kind: 'measured', files, dists };
}

/** The distribution measured at the tier size nearest R (the first of equals). */
export function pickDistribution(dists: readonly LagDistribution[], R: number): LagDistribution {
  let best = dists[0] as LagDistribution;
  for (const d of dists) if (Math.abs((d.replicas ?? R) - R) < Math.abs((best.replicas ?? R) - R)) best = d;
  return best;
}

/** Draws from the distribution by its inverse CDF, linear between the quantiles given. */
export function createDelaySampler(dist: LagDistribution, random: () => number): () => number {
  const qs = dist.quantiles;
  return () => {
    const u = random();
    // The first quantile at or above u (binary search: a bench draws this per message and receiver).
    let lo = 0;
    let hi = qs.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((qs[mid] as [number, number])[0] >= u) hi = mid;
      else lo = mid + 1;
    }
    if (hi === 0) return (qs[0] as [number, number])[1];
    const [q0, ms0] = qs[hi - 1] as [number, number];
    const [q1, ms1] = qs[hi] as [number, number];
    return ms0 + ((u - q0) / (q1 - q0)) * (ms1 - ms0);
  };
}

/**
 * One sender → receiver link: the time a message sent now with this delay is delivered,
 * never before the message sent before it on the same link.
 */
export class OrderedLink {
  #last = -Infinity;

  deliverAt(now: number, delayMs: number): number {
    this.#last = Math.max(now + delayMs, this.#last);
    return this.#last;
  }
}
