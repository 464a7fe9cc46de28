import { describe, expect, it } from 'vitest';
import { compareAppliedIntent, isSameObject, planAdoption, setControllerReference } from './apply-plan.ts';
import { controllerReference } from '#kube/objects.ts';
import type { FieldsV1, KubeObject, ObjectMeta } from '#kube/objects.ts';

interface Container {
  name: string;
  image: string;
  args?: string[];
  ports?: unknown[];
  imagePullPolicy?: string;
}
interface Workload extends KubeObject {
  metadata: ObjectMeta & { labels: Record<string, string> };
  spec: {
    replicas?: number;
    selector: { matchLabels: Record<string, string> };
    template: { spec: { containers: Container[] } };
  };
}

const M = 'cacheroute-operator';

// What the API server stores after our apply of `desired`, as fieldsV1.
const owned: FieldsV1 = {
  'f:metadata': { 'f:labels': { 'f:app': {} }, 'f:ownerReferences': { 'k:{"uid":"u1"}': {} } },
  'f:spec': {
    'f:selector': {},
    'f:template': {
      'f:spec': {
        'f:containers': {
          'k:{"name":"main"}': {
            '.': {},
            'f:name': {},
            'f:image': {},
            'f:args': {},
            'f:ports': {
              'k:{"containerPort":8080,"protocol":"TCP"}': {
                '.': {},
                'f:containerPort': {},
                'f:protocol': {},
              },
            },
          },
        },
      },
    },
  },
};

const desired = (): Workload => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: {
    name: 'web',
    namespace: 'ns',
    labels: { app: 'web' },
    ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'o', uid: 'u1', controller: true }],
  },
  spec: {
    selector: { matchLabels: { app: 'web' } },
    template: {
      spec: {
        containers: [
          {
            name: 'main',
            image: 'img@sha256:1',
            args: ['--a'],
            ports: [{ containerPort: 8080, protocol: 'TCP' }],
          },
        ],
      },
    },
  },
});

const live = (patch: (o: Workload) => void = () => undefined, fields: FieldsV1 = owned): Workload => {
  const o = structuredClone(desired());
  o.metadata = {
    ...o.metadata,
    uid: 'x',
    resourceVersion: '7',
    labels: { app: 'web', other: 'theirs' },
    managedFields: [{ manager: M, operation: 'Apply', fieldsV1: fields }],
  };
  o.spec.replicas = 3; // defaulted / someone else's
  o.spec.template.spec.containers[0]!.imagePullPolicy = 'IfNotPresent';
  patch(o);
  return o;
};

describe('compareAppliedIntent', () => {
  it('is the same when every field we set is live and we own exactly those fields', () => {
    expect(compareAppliedIntent(desired(), live(), M)).toEqual({ same: true });
  });

  it.each<[string, (d: Workload) => void, (l: Workload) => void, FieldsV1 | undefined]>([
    [
      'a changed value',
      (d) => (d.spec.template.spec.containers[0]!.image = 'img@sha256:2'),
      () => undefined,
      undefined,
    ],
    [
      'a changed atomic list',
      (d) => d.spec.template.spec.containers[0]!.args?.push('--b'),
      () => undefined,
      undefined,
    ],
    ['a changed atomic map', (d) => (d.spec.selector.matchLabels.tier = 'x'), () => undefined, undefined],
    [
      'a new associative element',
      (d) => d.spec.template.spec.containers.push({ name: 'side', image: 'i' }),
      () => undefined,
      undefined,
    ],
    ['a field we no longer set', (d) => delete d.metadata.labels['app'], () => undefined, undefined],
    [
      'a live value drifted',
      () => undefined,
      (l) => (l.spec.template.spec.containers[0]!.image = 'hacked'),
      undefined,
    ],
    [
      'a field another manager took',
      () => undefined,
      () => undefined,
      { ...owned, 'f:metadata': { 'f:ownerReferences': owned['f:metadata']!['f:ownerReferences']! } },
    ],
  ])('differs on %s', (_name, patchDesired, patchLive, fields) => {
    const d = desired();
    patchDesired(d);
    expect(compareAppliedIntent(d, live(patchLive, fields ?? owned), M).same).toBe(false);
  });

  it('differs when another manager, or an Update by ours, holds the fields', () => {
    const l = live();
    l.metadata.managedFields = [{ manager: M, operation: 'Update', fieldsV1: owned }];
    expect(compareAppliedIntent(desired(), l, M)).toEqual({ same: false, reason: `no fields owned by ${M}` });
    expect(compareAppliedIntent(desired(), undefined, M).same).toBe(false);
  });

  it('ignores bookkeeping in isSameObject', () => {
    const a = live();
    const b = structuredClone(a);
    b.metadata.resourceVersion = '8';
    b.metadata.managedFields![0]!.time = '2026-01-01T00:00:00Z';
    expect(isSameObject(a, b)).toBe(true);
    b.spec.replicas = 4;
    expect(isSameObject(a, b)).toBe(false);
  });
});

describe('owner references and adoption', () => {
  const owner = {
    apiVersion: 'cacheroute.dev/v1alpha1',
    kind: 'Deployment',
    metadata: { name: 'llama', uid: 'u1' },
  } satisfies KubeObject;

  it('sets one controller reference, keeping other owners', () => {
    const obj = setControllerReference(owner, {
      metadata: {
        name: 'x',
        ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'c', uid: 'u9' }],
      },
    });
    expect(obj.metadata?.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'ConfigMap', name: 'c', uid: 'u9' },
      {
        apiVersion: 'cacheroute.dev/v1alpha1',
        kind: 'Deployment',
        name: 'llama',
        uid: 'u1',
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(() => setControllerReference({ kind: 'X' }, {})).toThrow(/uid/);
  });

  it.each([
    ['absent', undefined, true],
    ['without a controller', { metadata: { ownerReferences: [] } }, true],
    ['controlled by us', { metadata: { ownerReferences: [controllerReference(owner)] } }, true],
    [
      'controlled by someone else',
      { metadata: { ownerReferences: [{ ...controllerReference(owner), uid: 'other' }] } },
      false,
    ],
  ])('adopts an object %s: %s', (_name, obj, ok) => {
    expect(planAdoption(obj as KubeObject | undefined, 'u1').ok).toBe(ok);
  });
});
