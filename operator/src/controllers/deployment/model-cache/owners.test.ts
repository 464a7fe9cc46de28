import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentSpec } from '#api';
import { loadSample } from '../../../../../test/support/samples.ts';
import { computeModelCacheKey } from './names.ts';
import { computeConcerned, planCacheOwners, type CacheUser } from './owners.ts';
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

describe('computeConcerned', () => {
  const labelled = (labels: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'p', namespace: 'ns', labels },
  });
  const users = [user('a', 'k1'), user('b', 'k1'), user('c', undefined)];

  it("an SGLang pod checking its node's files concerns its own Deployment, whatever the users' keys", () => {
    // Node caches and hostPath checks have no shared cache key among the users: the pod's
    // verdict (its init container) must still reach its Deployment's ModelReady.
    expect(
      computeConcerned(
        labelled({ 'cacheroute.dev/model-cache': 'k9', 'cacheroute.dev/deployment': 'c' }),
        users,
      ),
    ).toEqual([{ namespace: 'ns', name: 'c' }]);
  });

  it('a verify Job concerns the Deployment it verifies for; a fetch Job or cache, every user of its key', () => {
    expect(
      computeConcerned(
        labelled({ 'cacheroute.dev/model-cache': 'k1', 'cacheroute.dev/model-verify-for': 'c' }),
        users,
      ),
    ).toEqual([{ namespace: 'ns', name: 'c' }]);
    expect(computeConcerned(labelled({ 'cacheroute.dev/model-cache': 'k1' }), users)).toEqual([
      { namespace: 'ns', name: 'a' },
      { namespace: 'ns', name: 'b' },
    ]);
  });
});
