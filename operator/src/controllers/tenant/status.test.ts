import { describe, expect, it } from 'vitest';
import { TenantResource } from '#api';
import { computeTenantStatus } from './status.ts';

const T0 = new Date('2026-12-01T00:00:00Z');
const T1 = new Date('2026-12-01T00:01:00Z');

const tenant = (models: string[], status?: object) =>
  TenantResource.parse({
    apiVersion: 'cacheroute.dev/v1alpha1',
    kind: 'Tenant',
    metadata: { namespace: 'ns', name: 'team-a', generation: 3 },
    spec: { apiKeys: { secretRef: { name: 'keys' } }, models },
    ...(status ? { status } : {}),
  });

describe('computeTenantStatus', () => {
  it('Ready when every model is a Deployment of the namespace', () => {
    const s = computeTenantStatus(tenant(['a', 'b']), new Set(['a', 'b', 'c']), T0);
    expect(s.observedGeneration).toBe(3);
    expect(s.conditions).toEqual([
      expect.objectContaining({
        type: 'Ready',
        status: 'True',
        reason: 'ModelsFound',
        observedGeneration: 3,
      }),
    ]);
  });

  it('not Ready, naming each missing model and what spec.models must name', () => {
    const s = computeTenantStatus(tenant(['a', 'x', 'y']), new Set(['a']), T0);
    expect(s.conditions?.[0]).toMatchObject({ status: 'False', reason: 'ModelNotFound' });
    expect(s.conditions?.[0]?.message).toContain('no Deployment x, y in namespace ns');
  });

  it('keeps lastTransitionTime while the status holds', () => {
    const first = computeTenantStatus(tenant(['x']), new Set(), T0);
    const again = computeTenantStatus(tenant(['x'], first), new Set(), T1);
    expect(again.conditions?.[0]?.lastTransitionTime).toBe(first.conditions?.[0]?.lastTransitionTime);
    const fixed = computeTenantStatus(tenant(['x'], first), new Set(['x']), T1);
    expect(fixed.conditions?.[0]?.lastTransitionTime).not.toBe(first.conditions?.[0]?.lastTransitionTime);
  });
});
