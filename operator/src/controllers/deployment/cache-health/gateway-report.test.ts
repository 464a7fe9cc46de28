import { describe, expect, it } from 'vitest';
import type { GatewayCacheReport } from '../../../api/index.ts';
import { mergeReports } from './gateway-report.ts';

const replica = (
  promptTokens: number,
  predictedTokens: number,
  events: { usable: boolean; reason: string; lagMs: number | null },
): GatewayCacheReport => ({
  windowSeconds: 300,
  deployments: [
    {
      deployment: 'team/llama',
      decisions: 1,
      promptTokens,
      predictedTokens,
      endpoints: [{ pod: 'llama-0', events }, { pod: 'llama-1' }],
    },
  ],
});

describe('mergeReports', () => {
  it("adds the replicas' windows up and keeps the worst view of each endpoint's events", () => {
    const tier = mergeReports([
      replica(1_000, 600, { usable: true, reason: '', lagMs: 40 }),
      replica(3_000, 900, { usable: false, reason: 'events lag 9000 ms (bound 5000 ms)', lagMs: 9_000 }),
      replica(500, 500, { usable: true, reason: '', lagMs: 12_000 }),
    ]);
    expect(tier.replicas).toBe(3);
    expect(tier.predictions.get('team/llama')).toEqual({ promptTokens: 4_500, predictedTokens: 2_000 });
    // An unusable index outweighs a larger lag on a usable one.
    expect(tier.events.get('team/llama-0')).toMatchObject({ usable: false, lagMs: 9_000 });
    // An endpoint without events is not in the map.
    expect(tier.events.has('team/llama-1')).toBe(false);
  });

  it('among usable views, keeps the one with the larger lag', () => {
    const tier = mergeReports([
      replica(1, 1, { usable: true, reason: '', lagMs: null }),
      replica(1, 1, { usable: true, reason: '', lagMs: 300 }),
    ]);
    expect(tier.events.get('team/llama-0')?.lagMs).toBe(300);
  });
});
