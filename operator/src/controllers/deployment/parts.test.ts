import { describe, expect, it } from 'vitest';
import { DECLARED_REPLICAS_ANNOTATION, validateResource, type DeploymentResource, type Endpoint } from '#api';
import { loadSample } from '../../../../test/support/samples.ts';
import { buildDesired } from './desired.ts';
import {
  buildDeploymentPart,
  computePartsStatus,
  planPart,
  planParts,
  withPartReplicas,
  type LivePart,
} from './parts.ts';

function pd(prefill = 1, decode = 2): DeploymentResource {
  const doc = loadSample('deployment-pd-hisparse.yaml');
  const d = doc.spec['disaggregation'] as Record<string, { replicas: number }>;
  d['prefill']!.replicas = prefill;
  d['decode']!.replicas = decode;
  const r = validateResource(doc);
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error(JSON.stringify(r));
  return { ...r.value, metadata: { ...r.value.metadata, name: 'chat', namespace: 'ns', uid: 'uid-1' } };
}

const carried = (n: number) => ({
  spec: { replicas: n },
  metadata: { annotations: { [DECLARED_REPLICAS_ANNOTATION]: String(n) } },
});

describe('planPart: who sets a part’s replicas', () => {
  it.each<[string, number, LivePart | undefined, number, boolean]>([
    ['a new part is seeded with the declared value', 2, undefined, 2, true],
    [
      'a part whose seeding was cut short (no replicas yet) is seeded',
      2,
      { replicas: undefined, declared: '2' },
      2,
      true,
    ],
    [
      'an autoscaler’s value stands while the declared value is unchanged',
      1,
      { replicas: 3, declared: '1' },
      3,
      false,
    ],
    ['kubectl scale to 0 stands too', 1, { replicas: 0, declared: '1' }, 0, false],
    [
      'a changed declared value is carried over what an autoscaler set',
      2,
      { replicas: 3, declared: '1' },
      2,
      true,
    ],
    [
      'a lost record is carried again (the declared value wins once)',
      1,
      { replicas: 3, declared: undefined },
      1,
      true,
    ],
    ['the declared value carried already: nothing to write', 1, { replicas: 1, declared: '1' }, 1, false],
  ])('%s', (_name, declared, live, replicas, propagates) => {
    const plan = planPart('prefill', 'chat-prefill', declared, live);
    expect(plan.replicas).toBe(replicas);
    expect(plan.propagate).toEqual(propagates ? carried(declared) : undefined);
  });

  it('never writes over an autoscaler across passes while the declared value stays', () => {
    // Pass 1 seeds; the HPA then writes 3 through /scale; passes after keep 3 and write nothing.
    const seed = planPart('decode', 'chat-decode', 1, undefined);
    expect(seed.propagate).toEqual(carried(1));
    const after: LivePart = {
      replicas: 3,
      declared: seed.propagate?.metadata.annotations[DECLARED_REPLICAS_ANNOTATION],
    };
    for (let pass = 0; pass < 3; pass++) {
      const plan = planPart('decode', 'chat-decode', 1, after);
      expect(plan).toMatchObject({ replicas: 3, propagate: undefined });
    }
  });
});

describe('planParts', () => {
  it('plans nothing for a standalone Deployment', () => {
    const standalone = validateResource(loadSample('deployment-dense.yaml'));
    if (!standalone.ok || standalone.value.kind !== 'Deployment') throw new Error('sample');
    expect(planParts(standalone.value, () => undefined)).toEqual([]);
  });

  it('plans each part by its deterministic name, from what is live under that name', () => {
    const live = new Map<string, LivePart>([['chat-prefill', { replicas: 3, declared: '1' }]]);
    const plans = planParts(pd(1, 2), (n) => live.get(n));
    expect(plans.map((p) => [p.part, p.name, p.replicas, p.propagate !== undefined])).toEqual([
      ['prefill', 'chat-prefill', 3, false],
      ['decode', 'chat-decode', 2, true],
    ]);
  });
});

describe('withPartReplicas', () => {
  it('renders each part’s workload with the part’s replicas; the declared spec is not changed', () => {
    const root = pd(1, 2);
    const plans = planParts(root, (n) => (n === 'chat-prefill' ? { replicas: 3, declared: '1' } : undefined));
    const rendered = withPartReplicas(root, plans);
    const workloads = buildDesired(rendered).workloads.map((w) => [w.metadata?.name, w.spec?.replicas]);
    expect(workloads).toEqual([
      ['chat-prefill', 3],
      ['chat-decode', 2],
    ]);
    expect(root.spec.disaggregation?.prefill.replicas).toBe(1);
    // Replicas are not identity: the fingerprint is the declared spec's.
    expect(buildDesired(rendered).fingerprint).toBe(buildDesired(root).fingerprint);
  });

  it('returns the same object when every part runs its declared replicas', () => {
    const root = pd(1, 2);
    expect(
      withPartReplicas(
        root,
        planParts(root, () => undefined),
      ),
    ).toBe(root);
  });
});

describe('buildDeploymentPart', () => {
  it('is owned by the Deployment, labelled like its pods, and leaves spec.replicas out of the apply', () => {
    const part = buildDeploymentPart(pd(), 'prefill');
    expect(part.metadata).toMatchObject({
      name: 'chat-prefill',
      namespace: 'ns',
      labels: { 'cacheroute.dev/deployment': 'chat', 'cacheroute.dev/role': 'prefill' },
      ownerReferences: [{ kind: 'Deployment', name: 'chat', uid: 'uid-1', controller: true }],
    });
    expect(part.spec).toEqual({ deployment: 'chat', part: 'prefill' });
    expect(validateResource(part).ok).toBe(true);
  });
});

describe('computePartsStatus', () => {
  const ep = (pod: string, role: Endpoint['role'], ready: boolean, verified: boolean): Endpoint => ({
    pod,
    ip: '10.0.0.1',
    port: 30000,
    role,
    ready,
    verified,
  });

  it('counts each part’s ready and verified endpoints beside the replicas it runs', () => {
    const plans = planParts(pd(1, 2), (n) =>
      n === 'chat-prefill' ? { replicas: 3, declared: '1' } : undefined,
    );
    const endpoints = [
      ep('p-0', 'prefill', true, true),
      ep('p-1', 'prefill', true, false),
      ep('p-2', 'prefill', false, false),
      ep('d-0', 'decode', true, true),
    ];
    expect(computePartsStatus(plans, endpoints)).toEqual([
      { part: 'prefill', name: 'chat-prefill', replicas: 3, readyReplicas: 2, verifiedReplicas: 1 },
      { part: 'decode', name: 'chat-decode', replicas: 2, readyReplicas: 1, verifiedReplicas: 1 },
    ]);
  });

  it('is absent for a standalone Deployment', () => {
    expect(computePartsStatus([], [])).toBeUndefined();
  });
});
