import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentResource, type GatewayCacheReport } from '#api';
import { buildDeploymentManifest } from '../../../test/support/builders.ts';
import { ExternalMetric } from './catalogue.ts';
import { computeSeries } from './series.ts';

function deployment(name: string, disaggregated = false): DeploymentResource {
  const manifest = buildDeploymentManifest({
    name,
    ...(disaggregated ? { sample: 'deployment-pd-hisparse.yaml' } : {}),
  });
  const parsed = validateResource({ ...manifest, metadata: { name, namespace: 'ns' } });
  if (!parsed.ok || parsed.value.kind !== 'Deployment') throw new Error(`sample ${name}`);
  return parsed.value;
}

const load = (
  o: Partial<NonNullable<GatewayCacheReport['deployments'][number]['endpoints'][number]['load']>>,
) => ({
  inFlight: 0,
  pendingPrefillTokens: 0,
  prefillTokensPerSecond: null,
  runtimeQueued: null,
  tokenUsage: null,
  ...o,
});

const replica = (instance: string, deployments: GatewayCacheReport['deployments']): GatewayCacheReport => ({
  instance,
  deployments,
});

const report = (
  d: string,
  queued: number,
  endpoints: GatewayCacheReport['deployments'][number]['endpoints'],
) => ({
  deployment: d,
  decisions: 0,
  promptTokens: 0,
  predictedTokens: 0,
  admission: { queued, inFlight: 0, rejected: 0 },
  endpoints,
});

describe('computeSeries', () => {
  it('sums the tier’s own counts over replicas and takes the largest reading of a runtime’s', () => {
    const tier = {
      reports: [
        replica('a', [
          report('ns/chat', 2, [
            {
              pod: 'chat-0',
              role: 'standalone',
              load: load({
                inFlight: 3,
                pendingPrefillTokens: 4000,
                prefillTokensPerSecond: 8000,
                runtimeQueued: 5,
                tokenUsage: 0.4,
              }),
            },
            {
              pod: 'chat-1',
              role: 'standalone',
              load: load({ inFlight: 1, runtimeQueued: 1, tokenUsage: 0.2 }),
            },
          ]),
        ]),
        replica('b', [
          report('ns/chat', 1, [
            // Another replica's sends to the same runtime; its older reading of the runtime's queue.
            {
              pod: 'chat-0',
              role: 'standalone',
              load: load({
                inFlight: 2,
                pendingPrefillTokens: 4000,
                prefillTokensPerSecond: 4000,
                runtimeQueued: 4,
                tokenUsage: 0.4,
              }),
            },
          ]),
        ]),
      ],
      rejectionsPerSecond: new Map([['ns/chat', 0.5]]),
    };
    expect(computeSeries([deployment('chat')], tier)).toEqual([
      {
        namespace: 'ns',
        deployment: 'chat',
        part: 'standalone',
        values: {
          [ExternalMetric.queuedRequests]: 3,
          [ExternalMetric.inFlightRequests]: 6,
          // chat-0: 8,000 tokens at 8,000/s is 1 s; chat-1 has nothing pending: the mean is 0.5 s.
          [ExternalMetric.prefillBacklogSeconds]: 0.5,
          [ExternalMetric.runtimeQueuedRequests]: 6,
          [ExternalMetric.runtimeKvUsage]: expect.closeTo(0.3, 9) as unknown,
          [ExternalMetric.rejectionsPerSecond]: 0.5,
        },
      },
    ]);
  });

  it('gives each part of a disaggregated Deployment its own series, backlog only where prefill runs', () => {
    const tier = {
      reports: [
        replica('a', [
          report('ns/pd', 0, [
            {
              pod: 'pd-prefill-0',
              role: 'prefill',
              load: load({ inFlight: 2, pendingPrefillTokens: 100, prefillTokensPerSecond: 1000 }),
            },
            { pod: 'pd-decode-0', role: 'decode', load: load({ inFlight: 2, tokenUsage: 0.9 }) },
          ]),
        ]),
      ],
      rejectionsPerSecond: new Map<string, number>(),
    };
    const [prefill, decode] = computeSeries([deployment('pd', true)], tier);
    expect(prefill).toMatchObject({
      part: 'prefill',
      values: { [ExternalMetric.prefillBacklogSeconds]: 0.1 },
    });
    expect(decode?.part).toBe('decode');
    expect(decode?.values[ExternalMetric.prefillBacklogSeconds]).toBeUndefined();
    expect(decode?.values[ExternalMetric.runtimeKvUsage]).toBe(0.9);
  });

  it('says nothing it does not know: no report, no rate learned, no runtime read', () => {
    const waiting = {
      reports: [
        replica('a', [
          report('ns/chat', 0, [
            { pod: 'chat-0', role: 'standalone', load: load({ pendingPrefillTokens: 50 }) },
          ]),
        ]),
      ],
      rejectionsPerSecond: new Map<string, number>(),
    };
    const [known] = computeSeries([deployment('chat')], waiting);
    expect(known?.values).toEqual({
      [ExternalMetric.queuedRequests]: 0,
      [ExternalMetric.inFlightRequests]: 0,
    });
    // A replica from before the load was reported: the tier's load is unknown, not its neighbour's alone.
    const mixed = {
      reports: [
        ...waiting.reports,
        replica('old', [
          {
            deployment: 'ns/chat',
            decisions: 0,
            promptTokens: 0,
            predictedTokens: 0,
            endpoints: [{ pod: 'chat-0' }],
          },
        ]),
      ],
      rejectionsPerSecond: new Map<string, number>(),
    };
    expect(computeSeries([deployment('chat')], mixed)[0]?.values).toEqual({});
    // A Deployment no replica reports (no gateway routes it yet) has no values, not zeros.
    const [unseen] = computeSeries([deployment('other')], waiting);
    expect(unseen?.values).toEqual({});
  });
});
