import { describe, expect, it } from 'vitest';
import { computeExchangeLag } from './exchange-lag.ts';

const histogram = (cumulative: readonly [string, number][], sum: number): string =>
  [
    '# HELP cacheroute_gateway_peer_load_lag_seconds lag',
    '# TYPE cacheroute_gateway_peer_load_lag_seconds histogram',
    ...cumulative.map(([le, n]) => `cacheroute_gateway_peer_load_lag_seconds_bucket{le="${le}"} ${n}`),
    `cacheroute_gateway_peer_load_lag_seconds_sum ${sum}`,
    `cacheroute_gateway_peer_load_lag_seconds_count ${cumulative.at(-1)?.[1] ?? 0}`,
  ].join('\n');

describe('computeExchangeLag', () => {
  it("sums the replicas' histograms and reads the bucket bounds holding p50 and p99", () => {
    const a = histogram(
      [
        ['0.001', 60],
        ['0.01', 99],
        ['0.1', 100],
        ['+Inf', 100],
      ],
      0.2,
    );
    const b = histogram(
      [
        ['0.001', 40],
        ['0.01', 97],
        ['0.1', 100],
        ['+Inf', 100],
      ],
      0.3,
    );
    // 200 changes: 100 within 1 ms (p50 there), 196 within 10 ms, 200 within 100 ms (p99 there).
    expect(computeExchangeLag([a, b])).toEqual({ changes: 200, p50_le_ms: 1, p99_le_ms: 100, mean_ms: 2.5 });
  });

  it('says null past the last finite bound, and nothing without a measured change', () => {
    const slow = histogram(
      [
        ['0.001', 0],
        ['1', 0],
        ['+Inf', 10],
      ],
      50,
    );
    expect(computeExchangeLag([slow])).toMatchObject({ p50_le_ms: null, p99_le_ms: null });
    expect(computeExchangeLag(['# no exchange'])).toBeUndefined();
  });
});
