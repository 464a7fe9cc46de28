import { describe, expect, it } from 'vitest';
import type { DeploymentStatus, Endpoint } from '#api';
import { planEvents } from './events.ts';

const ep = (pod: string, o: Partial<Endpoint> = {}): Endpoint => ({
  pod,
  ip: '10.244.0.1',
  port: 30000,
  role: 'standalone',
  ready: true,
  verified: false,
  ...o,
});
const cond = (type: string, status: 'True' | 'False', reason: string) => ({
  type,
  status,
  reason,
  message: `${type} ${reason}`,
  lastTransitionTime: '2026-11-29T10:00:00Z',
});

describe('planEvents', () => {
  it('warns once about a model that cannot be delivered, naming the cause; says nothing while it waits', () => {
    const waiting: DeploymentStatus = { conditions: [cond('ModelReady', 'False', 'Fetching')] };
    const bad: DeploymentStatus = { conditions: [cond('ModelReady', 'False', 'ModelDigestMismatch')] };
    const good: DeploymentStatus = { conditions: [cond('ModelReady', 'True', 'Verified')] };
    expect(planEvents(undefined, { conditions: [cond('ModelReady', 'False', 'Pending')] })).toEqual([]);
    expect(planEvents(undefined, waiting)).toEqual([]);
    expect(planEvents(waiting, bad)).toEqual([
      { type: 'Warning', reason: 'ModelDigestMismatch', message: 'ModelReady ModelDigestMismatch' },
    ]);
    expect(planEvents(bad, bad)).toEqual([]);
    expect(planEvents(waiting, good)).toEqual([
      { type: 'Normal', reason: 'ModelVerified', message: 'ModelReady Verified' },
    ]);
  });

  it('announces a newly verified endpoint once', () => {
    const next: DeploymentStatus = { endpoints: [ep('a', { verified: true })] };
    expect(planEvents({ endpoints: [ep('a')] }, next).map((e) => e.reason)).toEqual(['EndpointVerified']);
    expect(planEvents(next, next)).toEqual([]);
  });

  it('warns about an identity mismatch, again only when the mismatch changes', () => {
    const bad = ep('a', {
      reason: 'IdentityMismatch',
      message: 'servedModelName: declared x, runtime reports y',
    });
    expect(planEvents(undefined, { endpoints: [bad] })).toEqual([
      {
        type: 'Warning',
        reason: 'IdentityMismatch',
        message: expect.stringContaining('the gateway will not route to it'),
      },
    ]);
    expect(planEvents({ endpoints: [bad] }, { endpoints: [bad] })).toEqual([]);
    expect(
      planEvents(
        { endpoints: [bad] },
        { endpoints: [{ ...bad, message: 'version: declared 1, runtime reports 2' }] },
      ),
    ).toHaveLength(1);
  });

  it.each([
    ['Ready turning True', undefined, cond('Ready', 'True', 'AllReplicasVerified'), 'Ready'],
    [
      'Ready turning False',
      cond('Ready', 'True', 'AllReplicasVerified'),
      cond('Ready', 'False', 'WaitingForVerifiedReplicas'),
      'NotReady',
    ],
    [
      'a stuck rollout',
      cond('Progressing', 'True', 'RollingOut'),
      cond('Progressing', 'False', 'Unschedulable'),
      'Unschedulable',
    ],
  ])('reports %s', (_name, before, after, reason) => {
    expect(
      planEvents({ conditions: before ? [before] : [] }, { conditions: [after] }).map((e) => e.reason),
    ).toEqual([reason]);
  });

  it('stays quiet about a first Ready=False and about unchanged conditions', () => {
    const waiting = cond('Ready', 'False', 'WaitingForVerifiedReplicas');
    expect(planEvents(undefined, { conditions: [waiting] })).toEqual([]);
    expect(planEvents({ conditions: [waiting] }, { conditions: [waiting] })).toEqual([]);
  });

  it('warns when the cache turns unhealthy, and says once when it recovers; Unknown is silent', () => {
    const at = (status: 'True' | 'False', reason: string): DeploymentStatus => ({
      conditions: [cond('CacheHealthy', status, reason)],
    });
    const unknown: DeploymentStatus = {
      conditions: [{ ...cond('CacheHealthy', 'True', 'Measuring'), status: 'Unknown' }],
    };
    expect(planEvents(undefined, unknown)).toEqual([]);
    expect(planEvents(unknown, at('False', 'HostTierFull'))).toEqual([
      { type: 'Warning', reason: 'HostTierFull', message: 'CacheHealthy HostTierFull' },
    ]);
    expect(planEvents(at('False', 'HostTierFull'), at('False', 'HostTierFull'))).toEqual([]);
    expect(planEvents(at('False', 'HostTierFull'), at('True', 'Healthy'))).toEqual([
      { type: 'Normal', reason: 'CacheHealthy', message: 'CacheHealthy Healthy' },
    ]);
    expect(planEvents(unknown, at('True', 'Healthy'))).toEqual([]);
  });

  it('warns once of an L3 tier at fault, not of one on its way, and says when it is back', () => {
    const tier = (reachable: boolean, reason?: string) => ({
      l3: [
        {
          role: 'standalone' as const,
          backend: 'mooncake',
          reachable,
          ...(reason ? { reason, message: 'm' } : {}),
        },
      ],
    });
    expect(planEvents(tier(false, 'StoreStarting'), tier(false, 'MasterUnreachable'))).toEqual([
      { type: 'Warning', reason: 'L3MasterUnreachable', message: 'standalone L3 (mooncake): m' },
    ]);
    expect(planEvents(tier(false, 'MasterUnreachable'), tier(false, 'MasterUnreachable'))).toEqual([]);
    expect(planEvents(undefined, tier(false, 'StoreStarting'))).toEqual([]);
    expect(planEvents(tier(false, 'NoSegment'), tier(true))).toMatchObject([{ reason: 'L3Reachable' }]);
    expect(planEvents(tier(false, 'StoreStarting'), tier(true))).toEqual([]);
  });
});
