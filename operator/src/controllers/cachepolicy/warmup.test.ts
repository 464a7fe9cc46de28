import { describe, expect, it } from 'vitest';
import { validateResource, type CachePolicyResource, type DeploymentResource, type Endpoint } from '#api';
import { loadSample } from '../../../../test/support/samples.ts';
import { buildWarmupRequest, computeWarmupCandidates, readL3Prefetch } from './warmup.ts';

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
  restartCount: 0,
  ...o,
});
const policy = parse<CachePolicyResource>(loadSample('cachepolicy.yaml'));
const deployment = (endpoints: Endpoint[]): DeploymentResource => ({
  ...parse<DeploymentResource>(loadSample('deployment-dense.yaml')),
  status: { endpoints },
});

describe('computeWarmupCandidates', () => {
  it('takes verified, ready prefilling endpoints, one per container instance, with the target salt', () => {
    const d = deployment([
      ep('a', { fingerprint: 'f1', restartCount: 2 }),
      ep('bb', { verified: false }),
      ep('ccc', { ready: false }),
      ep('dddd', { role: 'decode' }),
    ]);
    expect(computeWarmupCandidates('team-a', 'llama-8b', d, 'salt-1')).toEqual([
      {
        pod: 'a',
        restartCount: 2,
        // A restarted container is another instance: another key, warmed again.
        key: 'team-a/a#2',
        target: {
          key: 'team-a/a#2',
          namespace: 'team-a',
          deployment: 'llama-8b',
          pod: 'a',
          restartCount: 2,
          // The fingerprint says which runtime API key the warm-up sends.
          fingerprint: 'f1',
          model: d.spec.model.servedName,
          url: 'http://10.244.0.1:30000',
          salt: 'salt-1',
          role: 'standalone',
          // No status.l3 reachable: warmed per instance.
          l3: false,
          pageSize: d.spec.serving?.pageSize ?? 1,
        },
      },
    ]);
  });
});

describe('computeWarmupCandidates on a prefill/decode target', () => {
  const pd = (endpoints: Endpoint[]): DeploymentResource => ({
    ...parse<DeploymentResource>(loadSample('deployment-pd-hisparse.yaml')),
    status: { endpoints },
  });

  // The bug this guards: warm-up posted plain requests to prefill pods, which a real
  // disaggregated SGLang refuses (no bootstrap room).
  it('warms a prefill endpoint through a serving decode endpoint of its fingerprint', () => {
    const d = pd([
      ep('p1', { role: 'prefill', fingerprint: 'f2', bootstrapPort: 9000, ip: '10.244.1.1' }),
      ep('d-old', { role: 'decode', fingerprint: 'f1' }),
      ep('d-unready', { role: 'decode', fingerprint: 'f2', ready: false }),
      ep('d2', { role: 'decode', fingerprint: 'f2', ip: '10.244.1.2' }),
    ]);
    const [c] = computeWarmupCandidates('ns', 'deepseek-v32', d, 's');
    expect(c && 'target' in c && c.target.pair).toEqual({
      decodePod: 'd2',
      decodeUrl: 'http://10.244.1.2:30000',
      bootstrapHost: '10.244.1.1',
      bootstrapPort: 9000,
    });
  });

  it('says a prefill endpoint without a decode partner waits for one', () => {
    const d = pd([
      ep('p1', { role: 'prefill', fingerprint: 'f2' }),
      ep('d1', { role: 'decode', fingerprint: 'f1' }),
    ]);
    expect(computeWarmupCandidates('ns', 'deepseek-v32', d, 's')).toEqual([
      { pod: 'p1', restartCount: 0, key: 'ns/p1#0', waiting: expect.stringContaining('decode') },
    ]);
  });
});

describe('buildWarmupRequest', () => {
  const [c] = computeWarmupCandidates('ns', 'llama-8b', deployment([ep('a')]), 'salt-1');
  const target = c && 'target' in c ? c.target : undefined;

  // The bug this guards: documents went to /generate as raw text, which no chat request
  // (rendered by the runtime's chat template) ever matched.
  it('sends a document as the system message of a one-token chat request with the salt', () => {
    expect(target && buildWarmupRequest(target, 'the handbook', undefined)).toEqual({
      model: target?.model,
      messages: [{ role: 'system', content: 'the handbook' }],
      max_completion_tokens: 1,
      temperature: 0,
      stream: false,
      cache_salt: 'salt-1',
    });
  });

  it('adds the bootstrap fields for a prefill/decode pair', () => {
    const paired = target && {
      ...target,
      pair: { decodePod: 'd', decodeUrl: 'http://d', bootstrapHost: '10.0.0.1', bootstrapPort: 9000 },
    };
    expect(paired && buildWarmupRequest(paired, 'doc', 42)).toMatchObject({
      bootstrap_host: '10.0.0.1',
      bootstrap_port: 9000,
      bootstrap_room: 42,
    });
  });

  it('defaults spec.warmup.routeAfterSeconds to 120 and refuses more than an hour', () => {
    expect(policy.spec.warmup?.routeAfterSeconds).toBe(120);
    const doc = loadSample('cachepolicy.yaml');
    (doc.spec['warmup'] as Record<string, unknown>)['routeAfterSeconds'] = 3601;
    const r = validateResource(doc);
    expect(!r.ok && r.issues.map((i) => i.message)).toEqual([
      'warmup.routeAfterSeconds must be between 0 and 3600',
    ]);
  });
});

describe('readL3Prefetch', () => {
  const withStorage = (storage: Record<string, unknown>): DeploymentResource =>
    ({ spec: { hicache: { storage: { backend: 'file', ...storage } } } }) as unknown as DeploymentResource;
  it("reads the role's prefetch policy and threshold, SGLang's defaults when unset", () => {
    expect(readL3Prefetch(withStorage({}), 'standalone')).toEqual({ policy: 'timeout', threshold: 256 });
    expect(
      readL3Prefetch(
        withStorage({ prefetchPolicy: 'best_effort', extraConfig: '{"prefetch_threshold": 64}' }),
        'standalone',
      ),
    ).toEqual({ policy: 'best_effort', threshold: 64 });
    // A config file the operator cannot read: SGLang's default is the best guess.
    expect(readL3Prefetch(withStorage({ extraConfig: '@/etc/l3.json' }), 'standalone').threshold).toBe(256);
  });
});
