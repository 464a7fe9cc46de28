import { describe, expect, it } from 'vitest';
import { CacheAwarePolicy, type CacheAwareConfig } from './cache-aware.ts';
import type { EndpointView } from './policy.ts';
import {
  buildEndpoint as ep,
  buildInput as input,
  range,
  route,
} from '../../../test/support/gateway/policies.ts';

const base: CacheAwareConfig = {
  matchThreshold: 0.3,
  balanceAbsThreshold: 4,
  balanceRelThreshold: 1.5,
  maxTreeTokens: 1024,
  blockTokens: 4,
  costWeight: 0,
  decodeWeight: 0,
};

/** A policy where `a` holds tokens 0..63 (16 blocks). */
function warmed(cfg: Partial<CacheAwareConfig> = {}): CacheAwarePolicy {
  const p = new CacheAwarePolicy({ ...base, ...cfg });
  p.observe({ kind: 'routed', endpoint: 'a', input: input('w', range(0, 64)) });
  return p;
}

describe('CacheAwarePolicy', () => {
  it.each([
    ['balanced, match above threshold → the holder, though busier', [3, 0], range(0, 64), 'a'],
    ['balanced, partial match above threshold', [3, 0], [...range(0, 32), ...range(500, 32)], 'a'],
    ['balanced, match below threshold → least loaded', [3, 0], [...range(0, 16), ...range(500, 48)], 'b'],
    ['no match → least loaded', [0, 1], range(900, 64), 'a'],
    ['imbalanced (gap > 4 and ratio > 1.5) → least loaded', [10, 2], range(0, 64), 'b'],
    ['gap above abs but ratio below rel → still balanced', [20, 15], range(0, 64), 'a'],
    ['prompt shorter than a block → least loaded', [1, 0], [0, 1], 'b'],
  ])('%s', (_name, [la, lb], tokens, expected) => {
    const p = warmed();
    const eps = [ep('a', { inFlight: la as number }), ep('b', { inFlight: lb as number })];
    expect(route(p, eps, input('r', tokens))).toBe(expected);
  });

  it('explains its last pick: the rule that chose, and the costs when it weighed any', () => {
    const p = warmed();
    const r = input('r', range(0, 64));
    p.select([ep('a', { inFlight: 10 }), ep('b', { inFlight: 2 })], r);
    expect(p.explainLastPick()).toEqual({ reason: 'imbalanced' });
    p.select([ep('a'), ep('b')], r);
    expect(p.explainLastPick()).toEqual({ reason: 'deepest-match' });
    p.select([ep('a'), ep('b')], input('r', range(900, 64)));
    expect(p.explainLastPick()).toEqual({ reason: 'below-threshold' });
    // a holds the prompt but still owes the warm-up's 64 tokens of prefill: a tie, to the less loaded.
    const costed = warmed({ costWeight: 1 });
    expect(costed.select([ep('a'), ep('b', { inFlight: 1 })], r)).toBe(0);
    expect(costed.explainLastPick()).toEqual({ reason: 'cheapest', cost: [64, 64] });
  });

  it("takes the KV index's match over the tree's, unless the index is partial (then the larger)", () => {
    const p = warmed(); // the tree says a holds 0..63
    const none = { deviceTokens: 0, hostTokens: 0, storageTokens: 0 };
    const pick = (partial: boolean) =>
      p.select(
        [ep('a', { inFlight: 3, cached: { ...none, partial } }), ep('b', { cached: { ...none, partial } })],
        input('r', range(0, 64)),
      );
    expect(pick(false)).toBe(1); // exact: a evicted it, go by load
    expect(pick(true)).toBe(0); // partial: the index may not know a's old prefix yet
  });

  it('counts the runtime queue in the load', () => {
    const p = warmed();
    const eps = [ep('a', { inFlight: 1, queued: 20 }), ep('b', { inFlight: 2 })];
    expect(p.select(eps, input('r', range(0, 64)))).toBe(1);
  });

  it('never matches across salts', () => {
    const p = warmed();
    const eps = [ep('a', { inFlight: 2 }), ep('b')];
    expect(p.select(eps, input('r', range(0, 64), { salt: 'tenant-b' }))).toBe(1);
    expect(p.matchedTokens('a', input('r', range(0, 64), { salt: 'tenant-b' }))).toBe(0);
  });

  it('least-loaded ties go to the endpoint with the smaller tree', () => {
    const p = warmed();
    expect(p.select([ep('a'), ep('b')], input('r', range(900, 64)))).toBe(1);
  });

  it('select does not change the tree; routed inserts', () => {
    const p = new CacheAwarePolicy(base);
    const req = input('r', range(0, 64));
    p.select([ep('a')], req);
    expect(p.treeTokens('a')).toBe(0);
    route(p, [ep('a')], req);
    expect(p.treeTokens('a')).toBe(64);
  });

  it('trims what the runtime evicted: cached_tokens below the predicted match', () => {
    const p = warmed();
    // a sibling conversation below block 4, then a request predicted to match 64 tokens
    p.observe({ kind: 'routed', endpoint: 'a', input: input('s', [...range(0, 32), ...range(700, 32)]) });
    const req = input('r', [...range(0, 64), ...range(300, 16)]);
    route(p, [ep('a')], req);
    expect(p.matchedTokens('a', input('x', range(0, 64)))).toBe(64);
    p.observe({
      kind: 'completed',
      endpoint: 'a',
      input: req,
      report: { promptTokens: 80, cachedTokens: 16 },
    });
    // this prompt is held again (just prefilled); the sibling under the evicted part is gone
    expect(p.matchedTokens('a', req)).toBe(80);
    expect(p.matchedTokens('a', input('y', [...range(0, 32), ...range(700, 32)]))).toBe(32);
  });

  it('scales cached_tokens when the tree counts pseudo-tokens', () => {
    const p = warmed();
    const req = input('r', range(0, 64)); // 64 pseudo-tokens = 128 runtime tokens
    route(p, [ep('a')], req);
    p.observe({
      kind: 'completed',
      endpoint: 'a',
      input: req,
      report: { promptTokens: 128, cachedTokens: 128 },
    });
    expect(p.treeTokens('a')).toBe(64);
  });

  it('a failed request leaves only the predicted match', () => {
    const p = warmed();
    const req = input('r', [...range(0, 64), ...range(300, 16)]);
    route(p, [ep('a')], req);
    expect(p.treeTokens('a')).toBe(80);
    p.observe({ kind: 'failed', endpoint: 'a', input: req });
    expect(p.treeTokens('a')).toBe(64);
  });

  it('weighs host-tier matches below device matches', () => {
    const p = warmed({ hostWeight: 0.25 });
    p.observe({ kind: 'routed', endpoint: 'b', input: input('w2', range(0, 40)) });
    const report = { promptTokens: 64, cachedTokens: 64, deviceTokens: 0, hostTokens: 64 };
    for (let i = 0; i < 20; i++)
      p.observe({ kind: 'completed', endpoint: 'a', input: input(`h${i}`, []), report });
    // a: 64 tokens mostly on host (~0.25 × 64 = 16 < 40); b: 40 on device
    expect(p.select([ep('a'), ep('b', { inFlight: 1 })], input('r', range(0, 64)))).toBe(1);
  });

  it('drops an endpoint tree when its generation changes', () => {
    const p = warmed();
    p.syncEndpoints([ep('a'), ep('b')]);
    const eps = [ep('a', { inFlight: 2, generation: 'g2' }), ep('b')];
    expect(p.select(eps, input('r', range(0, 64)))).toBe(1); // restarted: no affinity, even before sync
    p.syncEndpoints(eps);
    expect(p.treeTokens('a')).toBe(0);
  });

  it('drops the tree of an endpoint that left', () => {
    const p = warmed();
    p.syncEndpoints([ep('a'), ep('b')]);
    p.syncEndpoints([ep('b')]);
    expect(p.treeTokens('a')).toBe(0);
  });

  it('maintain bounds each tree to maxTreeTokens', () => {
    const p = new CacheAwarePolicy({ ...base, maxTreeTokens: 64 });
    for (let i = 0; i < 4; i++)
      p.observe({ kind: 'routed', endpoint: 'a', input: input(`r${i}`, range(i * 1000, 32), { now: i }) });
    p.maintain(10);
    expect(p.treeTokens('a')).toBe(64);
    expect(p.matchedTokens('a', input('x', range(3000, 32)))).toBe(32); // most recent kept
    expect(p.matchedTokens('a', input('x', range(0, 32)))).toBe(0);
  });

  it('returns undefined with no endpoints', () => {
    expect(new CacheAwarePolicy(base).select([], input('r', range(0, 8)))).toBeUndefined();
  });

  describe('cost routing (costWeight > 0)', () => {
    const cost = (w = 2): CacheAwarePolicy => warmed({ costWeight: w });
    const eps = () => [ep('a'), ep('b')];

    it('a new prompt goes to the endpoint with less prefill backlog', () => {
      const p = cost();
      // a carries the warm-up's 64 tokens until its first token.
      expect(route(p, eps(), input('q1', range(1000, 40)))).toBe('b'); // 64+80 vs 0+80
      expect(route(p, eps(), input('q2', range(2000, 40)))).toBe('b'); // 64+80 vs 40+80
      p.observe({ kind: 'first-token', endpoint: 'a', input: input('w', range(0, 64)) });
      expect(route(p, eps(), input('q3', range(3000, 40)))).toBe('a'); // 0+80 vs 80+80
    });

    it('the holder wins while its backlog is below costWeight x the tokens it saves', () => {
      const p = cost(2);
      // b gets a backlog of 100 uncached tokens; a holds 64 tokens of the next prompt.
      p.observe({ kind: 'routed', endpoint: 'b', input: input('x', range(5000, 100)) });
      expect(route(p, eps(), input('r', range(0, 64)))).toBe('a');
      // a now carries backlog too: 64 (warm-up) + 0 uncached; give it 200 more.
      p.observe({ kind: 'routed', endpoint: 'a', input: input('y', range(7000, 200)) });
      // a: 264 + 2*0 = 264 vs b: 100 + 2*64 = 228 → b.
      expect(p.select([ep('a'), ep('b')], input('s', range(0, 64)))).toBe(1);
    });

    it('first-token takes a request out of the backlog, once', () => {
      const p = cost();
      const req = input('q', range(3000, 40));
      p.observe({ kind: 'routed', endpoint: 'b', input: req });
      expect(p.backlogTokens('b')).toBe(40);
      p.observe({ kind: 'first-token', endpoint: 'b', input: req });
      expect(p.backlogTokens('b')).toBe(0);
      p.observe({
        kind: 'completed',
        endpoint: 'b',
        input: req,
        report: { promptTokens: 40, cachedTokens: 0 },
      });
      expect(p.backlogTokens('b')).toBe(0);
      expect(p.backlogTokens('a')).toBe(64); // warm-up request never started
    });

    it('completed or failed without a first token also ends the backlog', () => {
      const p = cost();
      const r1 = input('q1', range(3000, 40));
      const r2 = input('q2', range(4000, 20));
      p.observe({ kind: 'routed', endpoint: 'b', input: r1 });
      p.observe({ kind: 'routed', endpoint: 'b', input: r2 });
      p.observe({ kind: 'completed', endpoint: 'b', input: r1 });
      expect(p.backlogTokens('b')).toBe(20);
      p.observe({ kind: 'failed', endpoint: 'b', input: r2 });
      expect(p.backlogTokens('b')).toBe(0);
    });

    it('counts only the part of the prompt the endpoint does not hold', () => {
      const p = cost();
      p.observe({ kind: 'routed', endpoint: 'a', input: input('r', [...range(0, 64), ...range(900, 16)]) });
      expect(p.backlogTokens('a')).toBe(64 + 16);
    });

    it('the imbalance guard still applies first', () => {
      const p = cost(100);
      const e = [ep('a', { inFlight: 10 }), ep('b', { inFlight: 2 })];
      expect(p.select(e, input('r', range(0, 64)))).toBe(1);
    });

    it('a restarted endpoint loses its backlog with its tree', () => {
      const p = cost();
      p.syncEndpoints([ep('a'), ep('b')]);
      p.observe({ kind: 'routed', endpoint: 'b', input: input('x', range(5000, 100)) });
      p.syncEndpoints([ep('a'), ep('b', { generation: 'g2' })]);
      expect(p.backlogTokens('b')).toBe(0);
    });
  });

  describe('the tier load (peers, runtime) and decode', () => {
    const fresh = (cfg: Partial<CacheAwareConfig> = {}): CacheAwarePolicy =>
      new CacheAwarePolicy({ ...base, costWeight: 2, ...cfg });
    const peers = (prefillTokens: number, decodeTokens = 0, inFlight = 0) => ({
      peers: { inFlight, prefillTokens, decodeTokens },
    });

    it("counts the other replicas' predicted prefill backlog on an endpoint", () => {
      const p = fresh();
      p.observe({ kind: 'routed', endpoint: 'b', input: input('x', range(5000, 40)) });
      // Alone, b's own 40 tokens of backlog would send a new prompt to a; the peers put 500 on a.
      expect(p.select([ep('a', peers(500)), ep('b')], input('r', range(9000, 40)))).toBe(1);
      expect(p.select([ep('a'), ep('b')], input('r', range(9000, 40)))).toBe(0);
    });

    it("takes the runtime's own waiting uncached tokens as a floor of the backlog", () => {
      const p = fresh();
      p.observe({ kind: 'routed', endpoint: 'b', input: input('x', range(5000, 40)) });
      expect(p.select([ep('a', { waitingUncachedTokens: 300 }), ep('b')], input('r', range(9000, 40)))).toBe(
        1,
      );
    });

    it("counts the peers' requests in flight in the imbalance guard", () => {
      const p = warmed({ costWeight: 2 });
      // a holds the prompt; by this replica's count the tier is balanced, with the peers' it is not.
      expect(p.select([ep('a', { inFlight: 2 }), ep('b', { inFlight: 2 })], input('r', range(0, 64)))).toBe(
        0,
      );
      const busy = ep('a', { inFlight: 2, ...peers(0, 0, 10) });
      expect(p.select([busy, ep('b', { inFlight: 2 })], input('r', range(0, 64)))).toBe(1);
    });

    it('weighs the output tokens an endpoint still has to generate (decodeWeight)', () => {
      const decodeBound = input('long', range(3000, 40), { maxTokens: 1000 });
      const setUp = (p: CacheAwarePolicy): void => {
        // a decodes a long answer (past its first token); b has 10 prompt tokens not yet prefilled.
        p.observe({ kind: 'routed', endpoint: 'a', input: decodeBound });
        p.observe({ kind: 'first-token', endpoint: 'a', input: decodeBound });
        p.observe({
          kind: 'routed',
          endpoint: 'b',
          input: input('short', range(4000, 10), { maxTokens: 1 }),
        });
      };
      const prefillOnly = fresh({ decodeWeight: 0 });
      setUp(prefillOnly);
      expect(prefillOnly.select([ep('a'), ep('b')], input('r', range(9000, 40)))).toBe(0);
      const withDecode = fresh({ decodeWeight: 1 });
      setUp(withDecode);
      expect(withDecode.decodeTokens('a')).toBe(1000);
      expect(withDecode.select([ep('a'), ep('b')], input('r', range(9000, 40)))).toBe(1);
      // The peers' decode counts as this replica's own.
      const viaPeers = fresh({ decodeWeight: 1 });
      viaPeers.observe({ kind: 'routed', endpoint: 'b', input: input('short', range(4000, 10)) });
      expect(viaPeers.select([ep('a', peers(0, 1000)), ep('b')], input('r', range(9000, 40)))).toBe(1);
    });

    describe('what a prefill does to the answers streaming beside it (decode-stall.ts)', () => {
      const miss = () => input('r', range(9000, 40));

      it('sends a miss where fewer answers would pause for its prefill', () => {
        const eps = [ep('a', { running: 20 }), ep('b', { running: 0 })];
        const withBacklogOnB = (cfg: Partial<CacheAwareConfig>): CacheAwarePolicy => {
          const p = fresh(cfg);
          p.observe({ kind: 'routed', endpoint: 'b', input: input('x', range(5000, 10), { maxTokens: 1 }) });
          return p;
        };
        // b has 10 tokens of backlog: alone, a wins.
        expect(withBacklogOnB({ decodeWeight: 0 }).select(eps, miss())).toBe(0);
        // A 40-token prefill pauses a's 20 answers for half a decode step each: 8 x 20 x 40 / 80 = 80.
        expect(withBacklogOnB({ decodeWeight: 8 }).select(eps, miss())).toBe(1);
        // Weighed against the runtime's speed: where prefill is fast, the pause is short.
        const fast = withBacklogOnB({ decodeWeight: 8, prefillTokensPerDecodeStep: 100_000 });
        expect(fast.select(eps, miss())).toBe(0);
      });

      it("counts the tier's requests in flight where the runtime publishes no running count", () => {
        const p = fresh({ decodeWeight: 8, balanceAbsThreshold: 64 });
        p.observe({ kind: 'routed', endpoint: 'b', input: input('x', range(5000, 10), { maxTokens: 1 }) });
        // b: 10 tokens of backlog, 1 in flight; a: the peers' 10 in flight, no backlog.
        const eps = [ep('a', peers(0, 0, 10)), ep('b', { inFlight: 1 })];
        expect(p.select(eps, miss())).toBe(1);
      });

      it('keeps a hit where it is held, though answers stream there', () => {
        const p = fresh({ decodeWeight: 8 });
        const held = input('w', range(0, 64), { maxTokens: 1 });
        p.observe({ kind: 'routed', endpoint: 'a', input: held });
        p.observe({ kind: 'completed', endpoint: 'a', input: held });
        const eps = [ep('a', { running: 40 }), ep('b', { running: 0 })];
        expect(p.select(eps, input('r', range(0, 64)))).toBe(0); // nothing to prefill on a
        expect(p.select(eps, miss())).toBe(1);
      });
    });

    describe('replicas deciding one burst at one instant', () => {
      const tierOf = (rank: number) => ({ rank, size: 3, unheardMs: 20 });
      const at = (rank: number, tokens: number[], bursty = true) =>
        input('r', tokens, { now: 10_000, tier: { ...tierOf(rank), bursty } });
      const held = { deviceTokens: 40, hostTokens: 0, storageTokens: 0 };

      it('hold a miss rank x the exchange delay while the tier takes bursts, so lower ranks are heard first', () => {
        expect(fresh().holdMs([ep('a'), ep('b')], at(2, range(90_000, 40)))).toBe(42);
        expect(fresh().holdMs([ep('a'), ep('b')], at(1, range(90_000, 40)))).toBe(21);
        expect(fresh().holdMs([ep('a'), ep('b')], at(0, range(90_000, 40)))).toBe(0);
      });

      it('send a hit at once: its holder wins whatever the load', () => {
        expect(fresh().holdMs([ep('a', { cached: held }), ep('b')], at(2, range(90_000, 40)))).toBe(0);
      });

      it('hold nothing when the tier takes no bursts, or alone in the tier', () => {
        expect(fresh().holdMs([ep('a'), ep('b')], at(2, range(90_000, 40), false))).toBe(0);
        expect(fresh().holdMs([ep('a'), ep('b')], input('r', range(90_000, 40)))).toBe(0);
      });
    });

    describe("the peers' picks in transit (ADR 0046)", () => {
      /** A replica that has routed one 40-token miss: a pick usually adds 40 tokens of backlog. */
      const oneReplica = (): CacheAwarePolicy => {
        const p = fresh();
        p.observe({ kind: 'routed', endpoint: 'c', input: input('x', range(5000, 40)) });
        return p;
      };
      const miss = (id: string, rank: number, unheardPicks: number) =>
        input(id, range(9000, 40), { tier: { rank, size: 8, unheardMs: 20, bursty: false, unheardPicks } });
      /** How often each endpoint is chosen over 400 requests spread over eight ranks. */
      const tally = (fleet: () => EndpointView[], unheardPicks: number): [number, number] => {
        const counts: [number, number] = [0, 0];
        for (let i = 0; i < 400; i++) {
          const k = oneReplica().select(fleet(), miss(`q${i}`, i % 8, unheardPicks));
          counts[k === 0 ? 0 : 1]++;
        }
        return counts;
      };
      // A miss costs a: 100 + 2 x 40 = 180, b: 110 + 80 = 190; one pick in transit adds 40.
      const nearTie = () => [ep('a', peers(100)), ep('b', peers(110))];

      it('draw apart between runtimes whose costs the unheard picks could level', () => {
        const [a, b] = tally(nearTie, 1);
        // Poured over 180 and 190, 40 levels them at 205: a takes 25/40 of the draws, b 15/40.
        expect(a).toBeGreaterThan(200);
        expect(b).toBeGreaterThan(100);
        expect(a + b).toBe(400);
      });

      it('take the cheapest when nothing is in transit, as one replica would', () => {
        expect(tally(nearTie, 0)).toEqual([400, 0]);
      });

      it('keep the cheapest when its lead is more than the picks in transit add (a cache hit stays)', () => {
        expect(tally(() => [ep('a', peers(100)), ep('b', peers(200))], 1)).toEqual([400, 0]);
        const held = { deviceTokens: 40, hostTokens: 0, storageTokens: 0 };
        // a holds the prompt: 30 of backlog against b's 80 tokens to compute.
        expect(tally(() => [ep('a', { cached: held, ...peers(30) }), ep('b')], 1)).toEqual([400, 0]);
      });

      it('draw the same for the same request and rank, apart for another rank', () => {
        const picks = (rank: number) =>
          Array.from({ length: 32 }, (_x, i) => oneReplica().select(nearTie(), miss(`q${i}`, rank, 1)));
        expect(picks(3)).toEqual(picks(3));
        expect(picks(3)).not.toEqual(picks(4));
      });

      describe('peers deciding at one instant spread a tie by rank (ADR 0058)', () => {
        const atInstant = (rank: number, instant: number) =>
          input(`q${instant}:${rank}`, range(9000, 40), {
            tier: { rank, size: 8, unheardMs: 0.2, bursty: false, unheardPicks: 0.001, instant },
          });
        /** Four runtimes at one cost, each with 100 tokens of the peers' backlog. */
        const tied = (ids = ['w0', 'w1', 'w2', 'w3']) => ids.map((id) => ep(id, peers(100)));
        const idOf = (eps: EndpointView[], k: number | undefined) => (k === undefined ? '' : eps[k]!.id);

        it('four ranks at one instant take the four tied runtimes, one each', () => {
          for (let instant = 0; instant < 50; instant++) {
            const picked = [4, 5, 6, 7].map((rank) => {
              const eps = tied();
              return idOf(eps, oneReplica().select(eps, atInstant(rank, instant)));
            });
            expect(new Set(picked).size).toBe(4);
          }
        });

        it('one rank over many instants takes each tied runtime about as often', () => {
          const counts = new Map<string, number>();
          for (let instant = 0; instant < 400; instant++) {
            const eps = tied();
            const id = idOf(eps, oneReplica().select(eps, atInstant(3, instant)));
            counts.set(id, (counts.get(id) ?? 0) + 1);
          }
          expect([...counts.keys()].sort()).toEqual(['w0', 'w1', 'w2', 'w3']);
          for (const n of counts.values()) expect(n).toBeGreaterThan(60);
        });

        it('order the tie by runtime id, whatever order a replica lists them in', () => {
          for (let instant = 0; instant < 20; instant++) {
            const mine = tied(['w0', 'w1']);
            const theirs = tied(['w1', 'w0']);
            const a = idOf(mine, oneReplica().select(mine, atInstant(0, instant)));
            const b = idOf(theirs, oneReplica().select(theirs, atInstant(1, instant)));
            expect(a).not.toBe(b);
          }
        });
      });
    });

    describe('an idle runtime beside a hot prefix (ADR 0052)', () => {
      const held = { deviceTokens: 32, hostTokens: 0, storageTokens: 0 };
      // a holds the prompt's 32-token prefix behind 500 tokens of the peers' backlog: at costWeight 64
      // its hit is worth 64 x 32, so cost routing keeps it there; b has nothing to do and would
      // prefill all 40 tokens long before a is through.
      const fleet = () => [ep('a', { cached: held, ...peers(500, 0, 3) }), ep('b')];
      const hot = (id: string, tier?: { rank: number; size: number; bursty: boolean }) =>
        input(id, range(0, 40), tier ? { tier: { ...tier, unheardMs: 1 } } : {});

      it('takes the request alone in the tier', () => {
        expect(fresh({ costWeight: 64 }).select(fleet(), hot('r'))).toBe(1);
      });

      it('is taken by one replica of a tier in a burst, the others routing as usual', () => {
        for (const size of [3, 8]) {
          const picks = Array.from({ length: size }, (_x, rank) =>
            fresh({ costWeight: 64 }).select(fleet(), hot('r', { rank, size, bursty: true })),
          );
          expect(picks.filter((k) => k === 1)).toHaveLength(1);
        }
      });

      it('is taken by whichever replica of a steady tier gets the request first (ADR 0053)', () => {
        for (const size of [3, 8]) {
          const picks = Array.from({ length: size }, (_x, rank) =>
            fresh({ costWeight: 64 }).select(fleet(), hot('r', { rank, size, bursty: false })),
          );
          expect(picks.filter((k) => k === 1)).toHaveLength(size);
        }
      });

      it('is not idle while anything of the tier or the runtime is on it', () => {
        const p = fresh({ costWeight: 64 });
        const a = ep('a', { cached: held, ...peers(500, 0, 3) });
        expect(p.select([a, ep('b', { running: 1 })], hot('r'))).toBe(0);
        expect(p.select([a, ep('b', peers(0, 10))], hot('r'))).toBe(0);
        expect(p.select([a, ep('b', { waitingUncachedTokens: 8 })], hot('r'))).toBe(0);
      });

      it('leaves a backlog shorter than the request where it is', () => {
        const a = ep('a', { cached: held, ...peers(30, 0, 1) });
        expect(fresh({ costWeight: 64 }).select([a, ep('b')], hot('r'))).toBe(0);
      });
    });

    it("predicts the backlog from the KV index's match (every replica's traffic), not this replica's tree", () => {
      const p = fresh();
      const held = { deviceTokens: 64, hostTokens: 0, storageTokens: 0 };
      // Another replica sent this conversation to a: this replica's tree knows nothing of it.
      expect(route(p, [ep('a', { cached: held }), ep('b')], input('r', range(0, 80)))).toBe('a');
      expect(p.backlogTokens('a')).toBe(16);
    });

    it("credits a prefix in the Deployment's shared L3 between a device hit and a miss (storageWeight)", () => {
      const onDevice = { deviceTokens: 64, hostTokens: 0, storageTokens: 0 };
      const inL3 = { deviceTokens: 0, hostTokens: 0, storageTokens: 64 };
      const r = input('r', range(0, 80));
      const fleet = (aBacklog: number) => [
        ep('a', { cached: onDevice, ...peers(aBacklog) }),
        ep('b', { cached: inL3, inFlight: 1 }),
        ep('c'),
      ];
      // Free, the device holder wins; busy, the replica that loads it from L3 beats the idle one that computes it.
      expect(route(fresh(), fleet(0), r)).toBe('a');
      expect(route(fresh(), fleet(1000), r)).toBe('b');
      // Counted for nothing, L3 is a miss: the least loaded wins.
      expect(route(fresh({ storageWeight: 0 }), fleet(1000), r)).toBe('c');
    });

    it('by default credits an L3 page as a host page: the real tiers load at the same cost (ADR 0039)', () => {
      const inL3 = { deviceTokens: 0, hostTokens: 0, storageTokens: 64 };
      const onHost = { deviceTokens: 0, hostTokens: 64, storageTokens: 0 };
      const r = input('r', range(0, 80));
      // Equal credit: the replica with no backlog wins; credited less, L3 loses to a backlog of a few tokens.
      expect(route(fresh(), [ep('b', { cached: inL3 }), ep('c', { cached: onHost, ...peers(4) })], r)).toBe(
        'b',
      );
      expect(
        route(
          fresh({ storageWeight: 0.25 }),
          [ep('b', { cached: inL3 }), ep('c', { cached: onHost, ...peers(4) })],
          r,
        ),
      ).toBe('c');
    });

    it('weighs decode by how long this answer will be against the usual one', () => {
      const p = fresh({ decodeWeight: 1 });
      const warm = input('warm', range(1000, 40));
      p.observe({ kind: 'routed', endpoint: 'a', input: warm });
      p.observe({
        kind: 'completed',
        endpoint: 'a',
        input: warm,
        report: { promptTokens: 40, cachedTokens: 0, completionTokens: 400 },
      }); // the usual output: 400
      const long = input('long', range(3000, 40), { maxTokens: 1000 });
      p.observe({ kind: 'routed', endpoint: 'a', input: long });
      p.observe({ kind: 'first-token', endpoint: 'a', input: long }); // a: 400 tokens to decode
      p.observe({ kind: 'routed', endpoint: 'b', input: input('pre', range(4000, 200), { maxTokens: 1 }) });
      // b: 200 prompt tokens to prefill. A long answer (scale 1) pays 400 on a, a short one 0.25 x 400.
      expect(p.select([ep('a'), ep('b')], input('r1', range(9000, 40), { maxTokens: 1000 }))).toBe(1);
      expect(p.select([ep('a'), ep('b')], input('r2', range(9000, 40), { maxTokens: 100 }))).toBe(0);
    });

    it('counts only the output still to come as a request streams, and ends at zero', () => {
      const p = fresh({ decodeWeight: 1 });
      const r = input('r', range(3000, 40), { maxTokens: 500 });
      p.observe({ kind: 'routed', endpoint: 'a', input: r });
      p.observe({ kind: 'first-token', endpoint: 'a', input: r });
      p.observe({ kind: 'decoding', endpoint: 'a', input: r, tokens: 160 });
      expect(p.decodeTokens('a')).toBe(340);
      p.observe({ kind: 'decoding', endpoint: 'a', input: r, tokens: 96 }); // late, out of order: no change
      p.observe({ kind: 'decoding', endpoint: 'b', input: r, tokens: 400 }); // not where it went
      expect(p.decodeTokens('a')).toBe(340);
      p.observe({ kind: 'decoding', endpoint: 'a', input: r, tokens: 800 }); // longer than predicted
      expect(p.decodeTokens('a')).toBe(0);
      p.observe({ kind: 'routed', endpoint: 'a', input: input('s', range(5000, 40), { maxTokens: 100 }) });
      p.observe({ kind: 'completed', endpoint: 'a', input: r });
      expect(p.decodeTokens('a')).toBe(100);
      // A replica with less still to decode on a takes the next long answer there.
      const busy = fresh({ decodeWeight: 1 });
      const long = input('long', range(3000, 40), { maxTokens: 1000 });
      busy.observe({ kind: 'routed', endpoint: 'a', input: long });
      busy.observe({ kind: 'first-token', endpoint: 'a', input: long });
      busy.observe({
        kind: 'routed',
        endpoint: 'b',
        input: input('pre', range(4000, 200), { maxTokens: 1 }),
      });
      expect(busy.select([ep('a'), ep('b')], input('q', range(9000, 40), { maxTokens: 1000 }))).toBe(1);
      busy.observe({ kind: 'decoding', endpoint: 'a', input: long, tokens: 900 });
      expect(busy.select([ep('a'), ep('b')], input('q', range(9000, 40), { maxTokens: 1000 }))).toBe(0);
    });

    it('predicts the output as min(max_tokens, the usual output) and ends it with the request', () => {
      const p = fresh({ decodeWeight: 1 });
      expect(p.expectedOutput(input('q', [1], { maxTokens: 50 }))).toBe(50);
      expect(p.expectedOutput(input('q', [1]))).toBe(256);
      const r = input('r', range(3000, 40), { maxTokens: 500 });
      p.observe({ kind: 'routed', endpoint: 'a', input: r });
      expect(p.shareOf('a')).toEqual({ prefillTokens: 40, decodeTokens: 500 });
      p.observe({
        kind: 'completed',
        endpoint: 'a',
        input: r,
        report: { promptTokens: 40, cachedTokens: 0, completionTokens: 120 },
      });
      expect(p.shareOf('a')).toEqual({ prefillTokens: 0, decodeTokens: 0 });
      expect(p.expectedOutput(input('q', [1], { maxTokens: 500 }))).toBe(120);
      expect(p.expectedOutput(input('q', [1], { maxTokens: 50 }))).toBe(50);
    });
  });
});
