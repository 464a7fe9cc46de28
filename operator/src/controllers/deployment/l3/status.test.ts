import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentResource } from '#api';
import { buildDeploymentManifest } from '../../../../../test/support/builders.ts';
import { planL3 } from './plan.ts';
import { computeL3Status } from './status.ts';

function plan(volume: Record<string, unknown> | undefined) {
  const m = buildDeploymentManifest({
    name: 'llama',
    spec: {
      profile: 'hicache',
      hicache: { ratio: 2, storage: { backend: 'file', ...(volume ? { volume } : {}) } },
    },
  });
  const r = validateResource(m);
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error(JSON.stringify(r));
  const root: DeploymentResource = r.value;
  const [p] = planL3(root, [{ role: 'standalone', profile: 'hicache', hicache: root.spec.hicache }], 'f00d');
  if (p?.backend !== 'file') throw new Error('no file plan');
  return p;
}

describe('planL3', () => {
  it('makes a ReadWriteMany claim of the default size, or none for a named one', () => {
    const made = plan(undefined);
    expect(made).toMatchObject({ claimName: 'llama-sglang-l3', managed: true, directory: 'kv/f00d' });
    expect(made.claim?.spec).toEqual({
      accessModes: ['ReadWriteMany'],
      resources: { requests: { storage: '100Gi' } },
    });
    const named = plan({ claimName: 'team-kv' });
    expect(named).toMatchObject({ claimName: 'team-kv', managed: false });
    expect(named.claim).toBeUndefined();
  });

  it('plans nothing for another backend', () => {
    const m = buildDeploymentManifest({
      spec: { profile: 'hicache', hicache: { storage: { backend: 'hf3fs' } } },
    });
    const r = validateResource(m);
    if (!r.ok || r.value.kind !== 'Deployment') throw new Error('invalid');
    const engine = {
      role: 'standalone' as const,
      profile: 'hicache' as const,
      hicache: r.value.spec.hicache,
    };
    expect(planL3(r.value, [engine], 'f00d')).toEqual([]);
  });
});

describe('computeL3Status', () => {
  const bound = (accessModes: string[]) => ({
    spec: { accessModes },
    status: { phase: 'Bound', accessModes, capacity: { storage: '1Gi' } },
  });

  it('is reachable only when Bound and ReadWriteMany', () => {
    expect(computeL3Status(plan(undefined), bound(['ReadWriteMany']))).toMatchObject({
      reachable: true,
      capacity: '1Gi',
    });
    expect(computeL3Status(plan(undefined), bound(['ReadWriteOnce']))).toMatchObject({
      reachable: false,
      reason: 'NotReadWriteMany',
    });
    expect(
      computeL3Status(plan(undefined), {
        spec: { accessModes: ['ReadWriteMany'] },
        status: { phase: 'Pending' },
      }),
    ).toMatchObject({ reachable: false, reason: 'ClaimPending' });
  });

  it('says a named claim is missing, and that a made one is on its way', () => {
    expect(computeL3Status(plan({ claimName: 'team-kv' }), undefined)).toMatchObject({
      reachable: false,
      reason: 'ClaimNotFound',
    });
    expect(computeL3Status(plan(undefined), undefined)).toMatchObject({
      reachable: false,
      reason: 'ClaimPending',
    });
  });
});
