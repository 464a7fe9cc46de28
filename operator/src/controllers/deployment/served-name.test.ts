import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentResource } from '#api';
import { loadSample } from '../../../../test/support/samples.ts';
import { planEvents } from './events.ts';
import { findEarlierClaimElsewhere, mapSameServedName, type ServedNameClaim } from './served-name.ts';

const T0 = '2026-01-01T00:00:00Z';
const T1 = '2026-02-01T00:00:00Z';

function dep(namespace: string, name: string, created: string, served = 'llama-8b'): DeploymentResource {
  const r = validateResource(loadSample('deployment-dense.yaml'));
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error('bad sample');
  return {
    ...r.value,
    metadata: { namespace, name, creationTimestamp: created },
    spec: { ...r.value.spec, model: { ...r.value.spec.model, servedName: served } },
  };
}

describe('findEarlierClaimElsewhere', () => {
  it('names the oldest claim of another namespace on the younger Deployment only', () => {
    const squat = dep('team-y', 'squat', T0);
    const mine = dep('team-x', 'llama', T1);
    const all = [mine, squat, dep('team-z', 'late', T1)];
    const verdict = findEarlierClaimElsewhere(mine, all);
    expect(verdict?.reason).toBe('ServedFirstElsewhere');
    expect(verdict?.message).toContain(
      "served name 'llama-8b' was served first in namespace team-y (Deployment team-y/squat)",
    );
    expect(verdict?.message).toContain('x-cacheroute-namespace');
    expect(findEarlierClaimElsewhere(squat, all)).toBeUndefined();
    // Created in the same second: namespace/name decides, as in the gateway.
    expect(findEarlierClaimElsewhere(dep('team-a', 'b', T1), [dep('team-b', 'a', T1)])).toBeUndefined();
    expect(findEarlierClaimElsewhere(dep('team-b', 'a', T1), [dep('team-a', 'b', T1)])).toBeDefined();
  });

  it('ignores its own namespace, other names and Deployments being deleted', () => {
    const mine = dep('team-x', 'llama', T1);
    const deleting: ServedNameClaim = {
      ...dep('team-y', 'old', T0),
      metadata: { namespace: 'team-y', name: 'old', creationTimestamp: T0, deletionTimestamp: T1 },
    };
    expect(
      findEarlierClaimElsewhere(mine, [
        mine,
        dep('team-x', 'older', T0),
        dep('team-y', 'qwen', T0, 'qwen'),
        deleting,
      ]),
    ).toBeUndefined();
  });

  it('reads Date timestamps as the API server writes them (second precision)', () => {
    const mine = dep('team-x', 'llama', T1);
    const asDate = {
      ...dep('team-y', 'squat', T0),
      metadata: { namespace: 'team-y', name: 'squat', creationTimestamp: new Date(T0) },
    };
    expect(findEarlierClaimElsewhere(mine, [asDate])).toBeDefined();
  });
});

describe('mapSameServedName', () => {
  it('queues the Deployments of other namespaces that serve the same name', () => {
    const all = [
      dep('team-x', 'llama', T1),
      dep('team-y', 'squat', T0),
      dep('team-x', 'twin', T0),
      dep('team-z', 'q', T0, 'qwen'),
    ];
    expect(mapSameServedName(dep('team-x', 'llama', T1), all)).toEqual([
      { namespace: 'team-y', name: 'squat' },
    ]);
  });
});

describe('ServedNameShared events', () => {
  it('warns once when the name turns out to be served first elsewhere', () => {
    const c = {
      type: 'ServedNameShared',
      status: 'True' as const,
      reason: 'ServedFirstElsewhere',
      message: 'm',
      lastTransitionTime: T1,
    };
    expect(planEvents({}, { conditions: [c] })).toEqual([
      { type: 'Warning', reason: 'ServedFirstElsewhere', message: 'm' },
    ]);
    expect(planEvents({ conditions: [c] }, { conditions: [c] })).toEqual([]);
  });
});
