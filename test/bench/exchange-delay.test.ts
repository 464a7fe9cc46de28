import { describe, expect, it } from 'vitest';
import { createSeededRandom } from '#kube/seeded-random.ts';
import {
  createDelaySampler,
  OrderedLink,
  parseExchangeDelay,
  pickDistribution,
  type LagDistribution,
} from './exchange-delay.ts';

const dist = (replicas: number, quantiles: [number, number][]): LagDistribution => ({ replicas, quantiles });

describe('createDelaySampler', () => {
  it('draws by the inverse CDF, linear between the quantiles given', () => {
    const qs: [number, number][] = [
      [0, 0.1],
      [0.5, 0.3],
      [0.99, 20],
      [1, 50],
    ];
    const at = (u: number): number => createDelaySampler(dist(3, qs), () => u)();
    expect(at(0)).toBeCloseTo(0.1);
    expect(at(0.25)).toBeCloseTo(0.2);
    expect(at(0.5)).toBeCloseTo(0.3);
    expect(at(0.995)).toBeCloseTo(35);
  });

  it("keeps the distribution's median and tail over many seeded draws", () => {
    const qs: [number, number][] = Array.from({ length: 1001 }, (_, i) => [i / 1000, i < 990 ? 0.25 : 25]);
    const draw = createDelaySampler(dist(8, qs), createSeededRandom(7));
    const draws = Array.from({ length: 20_000 }, draw);
    const slow = draws.filter((d) => d > 1).length / draws.length;
    expect(slow).toBeGreaterThan(0.008);
    expect(slow).toBeLessThan(0.012);
  });
});

describe('OrderedLink', () => {
  it('never delivers a message before the one sent before it on the link', () => {
    const link = new OrderedLink();
    expect(link.deliverAt(0, 20)).toBe(20);
    // Drawn 0.1 ms, sent 1 ms later: waits behind the first (head-of-line), as on one TCP connection.
    expect(link.deliverAt(1, 0.1)).toBe(20);
    expect(link.deliverAt(30, 0.5)).toBe(30.5);
  });
});

describe('parseExchangeDelay', () => {
  const files: Record<string, string> = {
    'lag-3.json': JSON.stringify({
      replicas: 3,
      quantiles: [
        [0, 0.1],
        [1, 40],
      ],
    }),
    'lag-8.json': JSON.stringify({
      replicas: 8,
      quantiles: [
        [0, 0.2],
        [1, 200],
      ],
    }),
    'bad.json': JSON.stringify({
      quantiles: [
        [0.5, 1],
        [1, 2],
      ],
    }),
  };
  const read = (f: string): string => {
    const text = files[f];
    if (text === undefined) throw new Error(`ENOENT: ${f}`);
    return text;
  };

  it('reads a constant, or one distribution per tier size and picks the nearest', () => {
    expect(parseExchangeDelay('20', read)).toEqual({ kind: 'constant', ms: 20 });
    const m = parseExchangeDelay('measured:lag-3.json,lag-8.json', read);
    if (typeof m === 'string' || m.kind !== 'measured') throw new Error(JSON.stringify(m));
    expect(pickDistribution(m.dists, 3).replicas).toBe(3);
    expect(pickDistribution(m.dists, 6).replicas).toBe(8);
  });

  it('says what to change for a bad value or file', () => {
    expect(parseExchangeDelay('-1', read)).toMatch(/--exchange-ms: give ms >= 0 or measured:FILE/);
    expect(parseExchangeDelay('measured:', read)).toMatch(/name a file/);
    expect(parseExchangeDelay('measured:bad.json', read)).toMatch(/q=0 to q=1/);
    expect(parseExchangeDelay('measured:none.json', read)).toMatch(/none.json: ENOENT/);
  });
});
