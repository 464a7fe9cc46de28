import { describe, expect, it } from 'vitest';
import { chooseSpill, maySpill, ownsSpill, type SpillCandidate } from './idle-spill.ts';

const busy = (id: string, backlog: number, uncached = 0, cached = 0): SpillCandidate => ({
  id,
  idle: false,
  uncached,
  cached,
  backlog,
});
const idle = (id: string, uncached: number, cached = 0): SpillCandidate => ({
  id,
  idle: true,
  uncached,
  cached,
  backlog: 0,
});

describe('ownsSpill', () => {
  it('gives every runtime to a replica alone in the tier', () => {
    expect(ownsSpill('w3', undefined)).toBe(true);
    expect(ownsSpill('w3', { rank: 0, size: 1 })).toBe(true);
  });

  it('gives each runtime to exactly one rank of a tier, the same at every replica', () => {
    for (const size of [2, 3, 8])
      for (const id of ['w0', 'w1', 'w2', 'w3', 'pod-a', 'http://10.0.0.7:30000']) {
        const owners = Array.from({ length: size }, (_x, rank) => rank).filter((rank) =>
          ownsSpill(id, { rank, size }),
        );
        expect(owners).toHaveLength(1);
      }
  });

  it('spreads the runtimes over the ranks', () => {
    const owners = new Set(
      Array.from({ length: 64 }, (_x, i) => [0, 1, 2].find((rank) => ownsSpill(`w${i}`, { rank, size: 3 }))),
    );
    expect(owners).toEqual(new Set([0, 1, 2]));
  });
});

describe('chooseSpill', () => {
  it('sends to an idle runtime that prefills the request before the usual pick is through its backlog', () => {
    expect(chooseSpill([busy('a', 60_000), idle('b', 10_000)], 0, undefined)).toBe(1);
  });

  it('keeps the usual pick when its backlog is shorter than the request on the idle runtime', () => {
    expect(chooseSpill([busy('a', 8_000), idle('b', 10_000)], 0, undefined)).toBeUndefined();
  });

  it('keeps the usual pick when it is idle itself, or nothing is idle', () => {
    expect(chooseSpill([idle('a', 5_000), idle('b', 1_000)], 0, undefined)).toBeUndefined();
    expect(chooseSpill([busy('a', 60_000), busy('b', 0, 100)], 0, undefined)).toBeUndefined();
  });

  it('takes the idle runtime with least to prefill', () => {
    expect(chooseSpill([busy('a', 60_000), idle('b', 9_000), idle('c', 5_000)], 0, undefined)).toBe(2);
  });

  it('discards at most maxLoss of the cache the request has on the usual pick', () => {
    // a holds 30,000 tokens of a 31,000-token conversation behind 90,000 of backlog.
    const fleet = [busy('a', 90_000, 1_000, 30_000), idle('b', 31_000)];
    expect(chooseSpill(fleet, 0, undefined, 12_000)).toBeUndefined();
    expect(chooseSpill(fleet, 0, undefined, 30_000)).toBe(1);
    // What the idle runtime holds of it is not lost.
    expect(
      chooseSpill([busy('a', 90_000, 1_000, 30_000), idle('b', 13_000, 18_000)], 0, undefined, 12_000),
    ).toBe(1);
  });

  it('spills once per tier while its picks come in bursts: only the rank that owns the idle runtime', () => {
    const fleet = [busy('a', 60_000), idle('b', 10_000)];
    for (const size of [3, 8]) {
      const spills = Array.from({ length: size }, (_x, rank) =>
        chooseSpill(fleet, 0, { rank, size, bursty: true }),
      );
      expect(spills.filter((s) => s === 1)).toHaveLength(1);
      expect(spills.filter((s) => s === undefined)).toHaveLength(size - 1);
    }
  });

  it('spills at any replica of a steady tier, on the first request that qualifies, as one replica does', () => {
    const fleet = [busy('a', 60_000), idle('b', 10_000)];
    for (const size of [3, 8]) {
      const spills = Array.from({ length: size }, (_x, rank) =>
        chooseSpill(fleet, 0, { rank, size, bursty: false, unheardPicks: 0.01 }),
      );
      expect(spills).toEqual(Array.from({ length: size }, () => 1));
    }
  });
});

describe('maySpill', () => {
  const owner = (id: string, size: number) =>
    Array.from({ length: size }, (_x, rank) => rank).find((rank) => ownsSpill(id, { rank, size })) as number;

  it('lets any replica spill while no peer is likely deciding on the same view', () => {
    expect(maySpill('w1', undefined)).toBe(true);
    for (let rank = 0; rank < 8; rank++) expect(maySpill('w1', { rank, size: 8, bursty: false })).toBe(true);
  });

  it('leaves the spill to the owner in a burst or with a peer pick likely in transit', () => {
    const o = owner('w1', 8);
    const other = (o + 1) % 8;
    for (const contested of [{ bursty: true }, { bursty: false, unheardPicks: 0.5 }, { unheardPicks: 3 }]) {
      expect(maySpill('w1', { rank: o, size: 8, ...contested })).toBe(true);
      expect(maySpill('w1', { rank: other, size: 8, ...contested })).toBe(false);
    }
    expect(maySpill('w1', { rank: other, size: 8, bursty: false, unheardPicks: 0.49 })).toBe(true);
  });
});
