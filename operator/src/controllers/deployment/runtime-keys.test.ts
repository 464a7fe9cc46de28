import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentResource } from '#api';
import { readRuntimeKeys } from '#api/runtime-key.ts';
import { loadSample } from '../../../../test/support/samples.ts';
import { buildRuntimeKeySecret, planRuntimeKeys } from './runtime-keys.ts';

function keys(...names: string[]): () => string {
  const queue = [...names];
  return () => queue.shift() ?? 'no-more-keys';
}

describe('planRuntimeKeys', () => {
  it.each([
    {
      what: 'a new Deployment gets a key for its fingerprint',
      current: 'f1',
      existing: {},
      pods: [],
      want: { keys: { f1: 'k-new' }, added: 'f1', dropped: [] },
    },
    {
      what: 'a fingerprint keeps its key (no new one is made)',
      current: 'f1',
      existing: { f1: 'k1' },
      pods: ['f1'],
      want: { keys: { f1: 'k1' }, added: undefined, dropped: [] },
    },
    {
      what: 'an identity change adds a key and keeps the previous one while its pods remain',
      current: 'f2',
      existing: { f1: 'k1' },
      pods: ['f1'],
      want: { keys: { f1: 'k1', f2: 'k-new' }, added: 'f2', dropped: [] },
    },
    {
      what: 'the previous key stays through the rollout, new pods and old side by side',
      current: 'f2',
      existing: { f1: 'k1', f2: 'k2' },
      pods: ['f1', 'f2'],
      want: { keys: { f1: 'k1', f2: 'k2' }, added: undefined, dropped: [] },
    },
    {
      what: 'the previous key goes once no pod of it remains',
      current: 'f2',
      existing: { f1: 'k1', f2: 'k2' },
      pods: ['f2'],
      want: { keys: { f2: 'k2' }, added: undefined, dropped: ['f1'] },
    },
    {
      what: 'with no pod at all only the current key stays',
      current: 'f2',
      existing: { f1: 'k1', f2: 'k2', f0: 'k0' },
      pods: [],
      want: { keys: { f2: 'k2' }, added: undefined, dropped: ['f0', 'f1'] },
    },
    {
      what: 'a second change mid-rollout keeps every key whose pods still serve',
      current: 'f3',
      existing: { f1: 'k1', f2: 'k2' },
      pods: ['f1', 'f2'],
      want: { keys: { f1: 'k1', f2: 'k2', f3: 'k-new' }, added: 'f3', dropped: [] },
    },
    {
      what: 'a return to an identity whose key was dropped gets a fresh key',
      current: 'f1',
      existing: { f2: 'k2' },
      pods: ['f2'],
      want: { keys: { f2: 'k2', f1: 'k-new' }, added: 'f1', dropped: [] },
    },
    {
      // The pod went between two passes: gateways still route to the endpoint status lists.
      what: 'the previous key stays while status still lists an endpoint of it, with no pod left',
      current: 'f2',
      existing: { f1: 'k1', f2: 'k2' },
      pods: ['f2'],
      listed: ['f1'],
      want: { keys: { f1: 'k1', f2: 'k2' }, added: undefined, dropped: [] },
    },
    {
      what: 'the previous key goes in the pass after status stopped listing it',
      current: 'f2',
      existing: { f1: 'k1', f2: 'k2' },
      pods: [],
      listed: ['f2'],
      want: { keys: { f2: 'k2' }, added: undefined, dropped: ['f1'] },
    },
  ])('$what', ({ current, existing, pods, listed, want }) => {
    const plan = planRuntimeKeys(
      { current, existing, podFingerprints: new Set(pods), listedFingerprints: new Set(listed) },
      keys('k-new'),
    );
    expect(plan).toEqual(want);
  });

  it('never asks for a key it does not add', () => {
    let asked = 0;
    planRuntimeKeys(
      { current: 'f1', existing: { f1: 'k1' }, podFingerprints: new Set(), listedFingerprints: new Set() },
      () => {
        asked++;
        return 'x';
      },
    );
    expect(asked).toBe(0);
  });
});

describe('buildRuntimeKeySecret', () => {
  const doc = validateResource(loadSample('deployment-dense.yaml'));
  if (!doc.ok || doc.value.kind !== 'Deployment') throw new Error('sample');
  const root: DeploymentResource = {
    ...doc.value,
    metadata: { namespace: 'ns', uid: 'uid-1', ...doc.value.metadata },
  };

  it('is named after the Deployment, labelled for the caches that select it, and owned by it', () => {
    const s = buildRuntimeKeySecret(root, { f1: 'k1' });
    expect(s.metadata).toMatchObject({
      name: 'llama-8b-runtime-api-key',
      namespace: 'ns',
      labels: { 'cacheroute.dev/runtime-api-key': 'true', 'cacheroute.dev/deployment': 'llama-8b' },
      ownerReferences: [expect.objectContaining({ kind: 'Deployment', uid: 'uid-1', controller: true })],
    });
  });

  it('holds one entry per fingerprint, base64 as the API stores it, and reads back as given', () => {
    const s = buildRuntimeKeySecret(root, { f1: 'k1', f2: 'k2' });
    expect(s.data).toEqual({
      f1: Buffer.from('k1').toString('base64'),
      f2: Buffer.from('k2').toString('base64'),
    });
    expect(readRuntimeKeys(s)).toEqual({ f1: 'k1', f2: 'k2' });
  });
});
