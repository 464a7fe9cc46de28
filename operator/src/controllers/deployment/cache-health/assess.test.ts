import { describe, expect, it } from 'vitest';
import {
  assessCacheHealth,
  chooseCacheVerdict,
  CacheHealthReason,
  EVENTS_GRACE_MS,
  type CacheHealthObservation,
  type EndpointCacheObservation,
} from './assess.ts';

const endpoint = (over: Partial<EndpointCacheObservation> = {}): EndpointCacheObservation => ({
  pod: 'p0',
  delta: { promptTokens: 10_000, cachedTokens: 4_000, seconds: 300 },
  host: undefined,
  scrapeError: undefined,
  events: undefined,
  ...over,
});

const observe = (over: Partial<CacheHealthObservation> = {}): CacheHealthObservation => ({
  windowSeconds: 300,
  endpoints: [endpoint()],
  gateway: { kind: 'read', prediction: { promptTokens: 9_000, predictedTokens: 4_000 } },
  hostTierField: 'spec.hicache',
  ...over,
});

describe('assessCacheHealth', () => {
  it('is healthy when the runtimes hit about what routing expected, and says both', () => {
    const a = assessCacheHealth(observe());
    expect(a.condition).toMatchObject({ status: 'True', reason: CacheHealthReason.Healthy });
    expect(a.condition.message).toContain('hit 0.40 of 10000 prompt tokens in the last 300 s');
    expect(a.condition.message).toContain('routing expected 0.44');
    expect(a.cache).toEqual({
      windowSeconds: 300,
      promptTokens: 10_000,
      hitRate: 0.4,
      predictedHitRate: 0.44,
    });
  });

  it('adds the endpoints up: a hit rate over all prompt tokens, not a mean of rates', () => {
    const a = assessCacheHealth(
      observe({
        endpoints: [
          endpoint({ pod: 'a', delta: { promptTokens: 9_000, cachedTokens: 9_000, seconds: 300 } }),
          endpoint({ pod: 'b', delta: { promptTokens: 1_000, cachedTokens: 0, seconds: 300 } }),
        ],
        gateway: { kind: 'off' },
      }),
    );
    expect(a.cache?.hitRate).toBe(0.9);
    expect(a.condition.message).toContain('the operator reads no gateway (--gateway-admin-url)');
  });

  it('names a gap between prediction and runtime PredictionGap, with what to check', () => {
    const a = assessCacheHealth(
      observe({ gateway: { kind: 'read', prediction: { promptTokens: 10_000, predictedTokens: 7_000 } } }),
    );
    expect(a.condition).toMatchObject({ status: 'False', reason: CacheHealthReason.PredictionGap });
    expect(a.condition.message).toContain('where routing expected 0.70');
    expect(a.condition.message).toContain("the gateway's /status");
  });

  it('does not call a small difference a gap (both bounds must be crossed)', () => {
    // 0.40 against 0.49: less than 0.1 apart.
    const near = observe({
      gateway: { kind: 'read', prediction: { promptTokens: 10_000, predictedTokens: 4_900 } },
    });
    expect(assessCacheHealth(near).condition.reason).toBe(CacheHealthReason.Healthy);
    // 0.85 against 0.96: 0.11 apart but 0.89 of the prediction.
    const high = observe({
      endpoints: [endpoint({ delta: { promptTokens: 10_000, cachedTokens: 8_500, seconds: 300 } })],
      gateway: { kind: 'read', prediction: { promptTokens: 10_000, predictedTokens: 9_600 } },
    });
    expect(assessCacheHealth(high).condition.reason).toBe(CacheHealthReason.Healthy);
  });

  it('holds a reported gap until the runtimes come clearly closer (hysteresis)', () => {
    // The runtimes hit 0.40 (the default endpoint); routing expected 0.49: under the opening bounds.
    const near = (previousReason?: string) =>
      assessCacheHealth(
        observe({
          gateway: { kind: 'read', prediction: { promptTokens: 10_000, predictedTokens: 4_900 } },
          previousReason,
        }),
      ).condition.reason;
    expect(near()).toBe(CacheHealthReason.Healthy);
    expect(near(CacheHealthReason.Healthy)).toBe(CacheHealthReason.Healthy);
    expect(near(CacheHealthReason.PredictionGap)).toBe(CacheHealthReason.PredictionGap);
    // 0.46 expected: within 0.07, the gap ends.
    const closer = assessCacheHealth(
      observe({
        gateway: { kind: 'read', prediction: { promptTokens: 10_000, predictedTokens: 4_600 } },
        previousReason: CacheHealthReason.PredictionGap,
      }),
    );
    expect(closer.condition.reason).toBe(CacheHealthReason.Healthy);
    // A host tier's gap holds the same way, and still names the tier.
    const tier = assessCacheHealth(
      observe({
        endpoints: [endpoint({ host: { usedTokens: 98, totalTokens: 100 } })],
        gateway: { kind: 'read', prediction: { promptTokens: 10_000, predictedTokens: 4_900 } },
        previousReason: CacheHealthReason.HostTierFull,
      }),
    );
    expect(tier.condition.reason).toBe(CacheHealthReason.HostTierFull);
  });

  it('blames a full host tier for a gap, and names the field to raise', () => {
    const a = assessCacheHealth(
      observe({
        endpoints: [endpoint({ host: { usedTokens: 98, totalTokens: 100 } })],
        gateway: { kind: 'read', prediction: { promptTokens: 10_000, predictedTokens: 7_000 } },
        hostTierField: 'spec.disaggregation.prefill.hicache',
      }),
    );
    expect(a.condition).toMatchObject({ status: 'False', reason: CacheHealthReason.HostTierFull });
    expect(a.condition.message).toContain("p0's HiCache host tier is 98% full");
    expect(a.condition.message).toContain('spec.disaggregation.prefill.hicache.ratio or sizeGB');
    expect(a.cache?.hostTierUsage).toBe(0.98);
  });

  it('keeps a full host tier without a gap healthy: a full cache is a working cache', () => {
    const a = assessCacheHealth(
      observe({ endpoints: [endpoint({ host: { usedTokens: 99, totalTokens: 100 } })] }),
    );
    expect(a.condition).toMatchObject({ status: 'True', reason: CacheHealthReason.Healthy });
    expect(a.condition.message).toContain('host tier 99% full at p0');
  });

  it('reports KV events the gateway cannot use, after a grace for new subscriptions', () => {
    const lagging = (unusableForMs: number) =>
      assessCacheHealth(
        observe({
          endpoints: [
            endpoint({
              events: { usable: false, reason: 'events lag 9000 ms (bound 5000 ms)', unusableForMs },
            }),
          ],
        }),
      );
    expect(lagging(EVENTS_GRACE_MS - 1).condition.reason).toBe(CacheHealthReason.Healthy);
    const a = lagging(EVENTS_GRACE_MS);
    expect(a.condition).toMatchObject({ status: 'False', reason: CacheHealthReason.EventsLagging });
    expect(a.condition.message).toContain('p0 (events lag 9000 ms (bound 5000 ms))');
    expect(a.cache?.hitRate).toBe(0.4);
  });

  it('is Unknown, not healthy, when there is too little to judge', () => {
    expect(assessCacheHealth(observe({ endpoints: [] })).condition).toMatchObject({
      status: 'Unknown',
      reason: CacheHealthReason.NoEndpoints,
    });
    expect(assessCacheHealth(observe({ endpoints: [endpoint({ delta: undefined })] })).condition.reason).toBe(
      CacheHealthReason.Measuring,
    );
    const quiet = assessCacheHealth(
      observe({ endpoints: [endpoint({ delta: { promptTokens: 999, cachedTokens: 999, seconds: 40 } })] }),
    );
    expect(quiet.condition).toMatchObject({ status: 'Unknown', reason: CacheHealthReason.NotEnoughTraffic });
    expect(quiet.cache).toMatchObject({ windowSeconds: 300, promptTokens: 1000 });
  });

  it('says which /metrics could not be read, and judges from the others', () => {
    const none = assessCacheHealth(
      observe({ endpoints: [endpoint({ delta: undefined, scrapeError: 'GET http://x/metrics: HTTP 404' })] }),
    );
    expect(none.condition).toMatchObject({ status: 'Unknown', reason: CacheHealthReason.MetricsUnavailable });
    expect(none.condition.message).toContain('p0: GET http://x/metrics: HTTP 404');
    const some = assessCacheHealth(
      observe({ endpoints: [endpoint(), endpoint({ pod: 'p1', delta: undefined, scrapeError: 'refused' })] }),
    );
    expect(some.condition.reason).toBe(CacheHealthReason.Healthy);
    expect(some.condition.message).toContain('/metrics unread at p1');
  });

  it('does not compare with a prediction made on too few tokens', () => {
    const a = assessCacheHealth(
      observe({ gateway: { kind: 'read', prediction: { promptTokens: 500, predictedTokens: 500 } } }),
    );
    expect(a.condition.reason).toBe(CacheHealthReason.Healthy);
    expect(a.cache?.predictedHitRate).toBeUndefined();
    expect(a.condition.message).toContain('the gateway routed too little here to compare');
  });

  it('rounds the token count to two digits, so steady traffic does not rewrite status', () => {
    const at = (promptTokens: number) =>
      assessCacheHealth(
        observe({
          endpoints: [endpoint({ delta: { promptTokens, cachedTokens: promptTokens / 2, seconds: 300 } })],
        }),
      );
    expect(at(24_420).cache?.promptTokens).toBe(24_000);
    expect(at(24_420)).toEqual(at(23_980));
    expect(at(24_420).condition.message).toContain('of 24000 prompt tokens');
  });
});

describe('chooseCacheVerdict', () => {
  const healthy = assessCacheHealth(observe());
  const measuring = assessCacheHealth(observe({ endpoints: [endpoint({ delta: undefined })] }));
  const standing = {
    conditions: [
      {
        type: 'CacheHealthy',
        lastTransitionTime: '2026-12-01T10:00:00Z',
        ...healthy.condition,
      },
    ],
    ...(healthy.cache ? { cache: healthy.cache } : {}),
  };

  it('keeps the verdict status holds while the operator has only started measuring', () => {
    expect(chooseCacheVerdict(measuring, standing)).toEqual(healthy);
    expect(chooseCacheVerdict(undefined, standing)).toEqual(healthy);
  });

  it('takes a fresh verdict, and says Measuring only when there was none', () => {
    const gap = assessCacheHealth(
      observe({ gateway: { kind: 'read', prediction: { promptTokens: 10_000, predictedTokens: 7_000 } } }),
    );
    expect(chooseCacheVerdict(gap, standing)).toBe(gap);
    expect(chooseCacheVerdict(measuring, {})).toBe(measuring);
    expect(chooseCacheVerdict(undefined, undefined).condition).toMatchObject({
      status: 'Unknown',
      reason: CacheHealthReason.Measuring,
    });
  });
});
