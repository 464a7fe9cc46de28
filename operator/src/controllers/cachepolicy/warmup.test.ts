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
      ep('a', { fingerprint: 'f1' }),
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
      // The fingerprint says which runtime API key the warm-up sends.
      { deployment: 'llama-8b', pod: 'a', fingerprint: 'f1', url: 'http://10.244.0.1:30000', salt: 'salt-1' },
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

describe('planWarmup on a prefill/decode target', () => {
  const pd = (endpoints: Endpoint[]): DeploymentResource => ({
    ...parse<DeploymentResource>(loadSample('deployment-pd-hisparse.yaml')),
    status: { endpoints },
  });
  const salts = new Map([['deepseek-v32', 's']]);

  // The bug this guards: warm-up posted plain /generate to prefill pods, which a real
  // disaggregated SGLang refuses (no bootstrap room).
  it('warms a prefill endpoint through a serving decode endpoint of its fingerprint', () => {
    const d = pd([
      ep('p1', { role: 'prefill', fingerprint: 'f2', bootstrapPort: 9000, ip: '10.244.1.1' }),
      ep('d-old', { role: 'decode', fingerprint: 'f1' }),
      ep('d-unready', { role: 'decode', fingerprint: 'f2', ready: false }),
      ep('d2', { role: 'decode', fingerprint: 'f2', ip: '10.244.1.2' }),
    ]);
    expect(planWarmup(policy, new Map([['deepseek-v32', d]]), salts)).toEqual([
      {
        deployment: 'deepseek-v32',
        pod: 'p1',
        fingerprint: 'f2',
        url: 'http://10.244.1.1:30000',
        salt: 's',
        pair: {
          decodePod: 'd2',
          decodeUrl: 'http://10.244.1.2:30000',
          bootstrapHost: '10.244.1.1',
          bootstrapPort: 9000,
        },
      },
    ]);
  });

  it('waits for a decode partner before warming a prefill endpoint', () => {
    const d = pd([
      ep('p1', { role: 'prefill', fingerprint: 'f2' }),
      ep('d1', { role: 'decode', fingerprint: 'f1' }),
    ]);
    expect(planWarmup(policy, new Map([['deepseek-v32', d]]), salts)).toEqual([]);
  });
});

describe('pruneWarmed', () => {
  it('forgets pods that went away, so their replacements are warmed', () => {
    expect(pruneWarmed(['a', 'gone'], deployment([ep('a'), ep('new')]))).toEqual(['a']);
  });
});
