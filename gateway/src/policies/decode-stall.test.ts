import { describe, expect, it } from 'vitest';
import { decodersOn, stallCost } from './decode-stall.ts';
import { buildEndpoint as ep } from '../../../test/support/gateway/policies.ts';

describe('decodersOn', () => {
  it("counts the tier's requests in flight, queued ones too, when the runtime's running count lags", () => {
    // The runtime last published 2 running; since then this replica sent 6 and its peers 4.
    expect(
      decodersOn(
        ep('a', { running: 2, inFlight: 6, peers: { inFlight: 4, prefillTokens: 0, decodeTokens: 0 } }),
      ),
    ).toBe(10);
  });

  it("counts the runtime's own running count where it is larger (other traffic than the tier's)", () => {
    expect(decodersOn(ep('a', { running: 30, inFlight: 6 }))).toBe(30);
  });
});

describe('stallCost', () => {
  it('prices the pause at decodeWeight x answers paused x uncached / prefill tokens per decode step', () => {
    expect(stallCost(ep('a', { running: 20 }), 40, 8)).toBe((8 * 20 * 40) / 80);
    expect(stallCost(ep('a', { running: 20 }), 40, 8, 100_000)).toBeCloseTo((8 * 20 * 40) / 100_000);
  });

  it('is 0 with nothing to prefill, nothing decoding, or decodeWeight 0', () => {
    expect(stallCost(ep('a', { running: 20 }), 0, 8)).toBe(0);
    expect(stallCost(ep('a'), 40, 8)).toBe(0);
    expect(stallCost(ep('a', { running: 20 }), 40, 0)).toBe(0);
  });
});
