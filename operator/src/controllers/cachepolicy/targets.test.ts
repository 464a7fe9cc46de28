import { describe, expect, it } from 'vitest';
import { validateResource, type CachePolicyResource, type DeploymentResource } from '#api';
import { computeCacheSalt } from '#sglang/salt.ts';
import { loadSample } from '../../../../test/support/samples.ts';
import { computePolicyStatus, findGoverningPolicy } from './targets.ts';

const NOW = new Date('2026-11-29T10:00:00Z');

function policy(name: string, created: string, targets: string[], ns = 'team-a'): CachePolicyResource {
  const doc = loadSample('cachepolicy.yaml');
  doc.metadata = { name, creationTimestamp: created, generation: 1 } as typeof doc.metadata;
  doc.spec['targetRefs'] = targets.map((t) => ({ kind: 'Deployment', name: t }));
  doc.spec['cacheNamespace'] = ns;
  const r = validateResource(doc);
  if (!r.ok || r.value.kind !== 'CachePolicy') throw new Error(JSON.stringify(r));
  return r.value;
}

function deployment(): DeploymentResource {
  const r = validateResource(loadSample('deployment-dense.yaml'));
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error('bad sample');
  return r.value;
}

describe('computePolicyStatus', () => {
  const llama = deployment();
  const deployments = new Map([[llama.metadata.name ?? '', llama]]);

  it('accepts a found target and publishes its cache salt', () => {
    const p = policy('a', '2026-01-01T00:00:00Z', ['llama-8b']);
    const s = computePolicyStatus({ policy: p, policies: [p], deployments }, NOW);
    expect(s.targets).toEqual([
      {
        name: 'llama-8b',
        accepted: true,
        reason: 'Accepted',
        deploymentId: llama.spec.deploymentId,
        cacheSalt: computeCacheSalt('team-a', llama.spec.deploymentId),
      },
    ]);
    expect(s.conditions?.[0]).toMatchObject({ type: 'Accepted', status: 'True', observedGeneration: 1 });
  });

  it("shows an accepted target's measured hit rate", () => {
    const p = policy('a', '2026-01-01T00:00:00Z', ['llama-8b']);
    const measured = {
      ...llama,
      status: { cache: { windowSeconds: 300, promptTokens: 9000, hitRate: 0.62 } },
    };
    const s = computePolicyStatus(
      { policy: p, policies: [p], deployments: new Map([['llama-8b', measured]]) },
      NOW,
    );
    expect(s.targets?.[0]).toMatchObject({ accepted: true, hitRate: 0.62 });
  });

  it('refuses a missing target with TargetNotFound', () => {
    const p = policy('a', '2026-01-01T00:00:00Z', ['nope']);
    const s = computePolicyStatus({ policy: p, policies: [p], deployments }, NOW);
    expect(s.targets?.[0]).toMatchObject({ accepted: false, reason: 'TargetNotFound' });
    expect(s.conditions?.[0]).toMatchObject({ status: 'False', reason: 'TargetNotFound' });
  });

  it('lets the oldest policy win a contested target', () => {
    const older = policy('older', '2026-01-01T00:00:00Z', ['llama-8b']);
    const newer = policy('newer', '2026-02-01T00:00:00Z', ['llama-8b', 'nope']);
    expect(findGoverningPolicy('llama-8b', [newer, older])?.metadata.name).toBe('older');
    const s = computePolicyStatus({ policy: newer, policies: [newer, older], deployments }, NOW);
    expect(s.targets?.[0]).toMatchObject({
      accepted: false,
      reason: 'Conflicted',
      message: expect.stringContaining('older'),
    });
    expect(s.conditions?.[0]).toMatchObject({ status: 'False', reason: 'SomeTargetsRefused' });
  });
});

describe('computeCacheSalt', () => {
  it('separates namespaces and identities, and is stable', () => {
    const a = computeCacheSalt('team-a', 'id-1');
    expect(a).toBe(computeCacheSalt('team-a', 'id-1'));
    expect(a).not.toBe(computeCacheSalt('team-b', 'id-1'));
    expect(a).not.toBe(computeCacheSalt('team-a', 'id-2'));
    // The separator keeps ('a', 'b-c') and ('a-b', 'c') apart.
    expect(computeCacheSalt('a', 'b-c')).not.toBe(computeCacheSalt('a-b', 'c'));
  });
});
