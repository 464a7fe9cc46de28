import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentSpec } from '../../../api/index.ts';
import { loadSample } from '../../../../../test/support/samples.ts';
import { computeModelCacheKey } from './names.ts';
import { planCacheOwners, type CacheUser } from './owners.ts';
import type { PvcObject } from './plan.ts';

const cache = (key: string, ownerUids: string[], deleting = false): PvcObject => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: {
    name: `model-${key}`,
    namespace: 'ns',
    uid: `pvc-${key}`,
    labels: { 'cacheroute.dev/model-cache': key },
    ownerReferences: ownerUids.map((uid) => ({
      apiVersion: 'cacheroute.dev/v1alpha1',
      kind: 'Deployment',
      name: uid,
      uid,
    })),
    ...(deleting ? { deletionTimestamp: '2026-12-02T21:00:00Z' } : {}),
  },
});
const user = (uid: string, key: string | undefined): CacheUser => ({ name: uid, uid, key });

describe('planCacheOwners', () => {
  it('leaves a cache whose owners are its users, in any order', () => {
    expect(
      planCacheOwners([cache('k1', ['b', 'a'])], [user('a', 'k1'), user('b', 'k1'), user('c', 'k2')]),
    ).toEqual([]);
  });

  it('adds a new user and drops one that moved to other files', () => {
    expect(
      planCacheOwners([cache('k1', ['a', 'old'])], [user('a', 'k1'), user('old', 'k2'), user('new', 'k1')]),
    ).toEqual([
      {
        kind: 'setOwners',
        cache: 'model-k1',
        owners: ['a', 'new'].map((uid) => ({
          apiVersion: 'cacheroute.dev/v1alpha1',
          kind: 'Deployment',
          name: uid,
          uid,
        })),
      },
    ]);
  });

  it('deletes a cache no Deployment uses (the collector would not: its owner list would be empty)', () => {
    expect(planCacheOwners([cache('k1', ['a'])], [user('a', undefined)])).toEqual([
      { kind: 'deleteCache', cache: 'model-k1', uid: 'pvc-k1', job: 'model-fetch-k1' },
    ]);
  });

  it('leaves a cache that is being deleted', () => {
    expect(planCacheOwners([cache('k1', ['a'], true)], [])).toEqual([]);
  });
});

describe('computeModelCacheKey', () => {
  const spec = (): DeploymentSpec => {
    const r = validateResource(loadSample('deployment-hicache.yaml'));
    if (!r.ok || r.value.kind !== 'Deployment') throw new Error('bad sample');
    return r.value.spec;
  };

  it('is the same for two Deployments pinning the same files, whatever else differs', () => {
    const a = spec();
    const b = {
      ...spec(),
      deploymentId: 'other',
      replicas: 7,
      model: { ...spec().model, servedName: 'other' },
    };
    expect(computeModelCacheKey(a)).toBe(computeModelCacheKey(b));
  });

  it.each([
    [
      'model digest',
      (s: DeploymentSpec) => ({ ...s, model: { ...s.model, digest: `sha256:${'1'.repeat(64)}` } }),
    ],
    [
      'tokenizer digest',
      (s: DeploymentSpec) => ({ ...s, model: { ...s.model, tokenizerDigest: `sha256:${'2'.repeat(64)}` } }),
    ],
    [
      'tokenizer directory',
      (s: DeploymentSpec) => ({ ...s, model: { ...s.model, tokenizerPath: '/models/tok' } }),
    ],
  ])('changes with the %s', (_what, change) => {
    expect(computeModelCacheKey(change(spec()))).not.toBe(computeModelCacheKey(spec()));
  });
});
