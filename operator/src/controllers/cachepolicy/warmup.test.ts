import { describe, expect, it } from 'vitest';
import {
  validateResource,
  type CachePolicyResource,
  type DeploymentResource,
  type Endpoint,
} from '../../api/index.ts';
import { loadSample } from '../../../../test/support/samples.ts';
import { planWarmup, pruneWarmed } from './warmup.ts';

function parse<T>(doc: unknown): T {
  const r = validateResource(doc);
  if (!r.ok) throw new Error(JSON.stringify(r.issues));
  return r.value as T;
}

const ep = (pod: string, o: Partial<Endpoint> = {}): Endpoint => ({
  pod,
  ip: `10.244.0.${pod.length}`,
  port: 30000,
  role: 'standalone',
  ready: true,
  verified: true,
  ...o,
});
const policy = parse<CachePolicyResource>(loadSample('cachepolicy.yaml'));
const deployment = (endpoints: Endpoint[]): DeploymentResource => ({
  ...parse<DeploymentResource>(loadSample('deployment-dense.yaml')),
  status: { endpoints },
});

describe('planWarmup', () => {
  it('warms verified, ready prefilling endpoints not warmed before, with the target salt', () => {
    const d = deployment([
      ep('a'),
      ep('bb', { verified: false }),
      ep('ccc', { ready: false }),
      ep('dddd', { role: 'decode' }),
      ep('eeeee'),
    ]);
    const warmedBefore = {
      ...policy,
      status: {
        targets: [{ name: 'llama-8b', accepted: true, reason: 'Accepted', warmedEndpoints: ['eeeee'] }],
      },
    };
    const plan = planWarmup(warmedBefore, new Map([['llama-8b', d]]), new Map([['llama-8b', 'salt-1']]));
    expect(plan).toEqual([
      { deployment: 'llama-8b', pod: 'a', url: 'http://10.244.0.1:30000', salt: 'salt-1' },
    ]);
  });

  it('does nothing without warm-up documents or for a target without an accepted salt', () => {
    const d = deployment([ep('a')]);
    expect(
      planWarmup(
        { ...policy, spec: { ...policy.spec, warmup: undefined } },
        new Map([['llama-8b', d]]),
        new Map([['llama-8b', 's']]),
      ),
    ).toEqual([]);
    expect(planWarmup(policy, new Map([['llama-8b', d]]), new Map())).toEqual([]);
  });
});

describe('pruneWarmed', () => {
  it('forgets pods that went away, so their replacements are warmed', () => {
    expect(pruneWarmed(['a', 'gone'], deployment([ep('a'), ep('new')]))).toEqual(['a']);
  });
});
