import type { V1Pod } from '@kubernetes/client-node';
import type { PodObject } from './meta/pod-view.ts';
import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentResource, type Endpoint } from '#api';
import { loadSample } from '../../../../test/support/samples.ts';
import { planRoles } from './roles.ts';
import { computePodTrouble, computeStatus, type StatusObservation } from './status.ts';

const NOW = new Date('2026-11-29T10:00:00Z');

function root(file: string): DeploymentResource {
  const r = validateResource(loadSample(file));
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error('bad sample');
  return { ...r.value, metadata: { ...r.value.metadata, generation: 3 } };
}

function endpoint(pod: string, role: Endpoint['role'], overrides: Partial<Endpoint> = {}): Endpoint {
  return {
    pod,
    ip: '10.244.0.1',
    port: 30000,
    role,
    ready: true,
    verified: true,
    fingerprint: 'fp',
    ...overrides,
  };
}

function observe(
  r: DeploymentResource,
  endpoints: Endpoint[],
  extra: Partial<StatusObservation> = {},
): StatusObservation {
  return {
    root: r,
    engines: planRoles(r.spec),
    fingerprint: 'fp',
    identityConflict: undefined,
    endpoints,
    troubles: [],
    podCount: endpoints.length,
    ...extra,
  };
}

const cond = (s: ReturnType<typeof computeStatus>, type: string) =>
  s.conditions?.find((c) => c.type === type);

describe('computeStatus', () => {
  const dense = root('deployment-dense.yaml'); // 2 replicas

  it('is not Ready before the model files are, whatever the endpoints say, and shows the delivery', () => {
    const endpoints = [endpoint('a', 'standalone'), endpoint('b', 'standalone')];
    const fetching = {
      ready: false,
      status: {
        phase: 'Fetching' as const,
        cache: 'model-k',
        reason: 'Fetching',
        message: 'Job model-fetch-k fetches',
      },
      condition: {
        status: 'False' as const,
        reason: 'Fetching' as const,
        message: 'Job model-fetch-k fetches',
      },
    };
    const s = computeStatus(observe(dense, endpoints, { model: fetching }), NOW);
    expect(cond(s, 'Ready')).toMatchObject({ status: 'False', reason: 'ModelNotReady' });
    expect(cond(s, 'Ready')?.message).toContain('Job model-fetch-k fetches');
    expect(cond(s, 'ModelReady')).toMatchObject({ status: 'False', reason: 'Fetching' });
    expect(s.model).toEqual(fetching.status);

    const verified = {
      ready: true,
      status: { phase: 'Verified' as const, cache: 'model-k', digest: 'sha256:x' },
      condition: { status: 'True' as const, reason: 'Verified' as const, message: '4 files' },
    };
    const v = computeStatus(observe(dense, endpoints, { model: verified }), NOW);
    expect(cond(v, 'Ready')).toMatchObject({ status: 'True', reason: 'AllReplicasVerified' });
    expect(cond(v, 'ModelReady')).toMatchObject({ status: 'True', reason: 'Verified' });

    // Not planned this pass (an identity conflict): the last delivery status stays.
    const kept = computeStatus(observe({ ...dense, status: v }, endpoints), NOW);
    expect(kept.model).toEqual(verified.status);
    expect(cond(kept, 'ModelReady')).toMatchObject({ status: 'True', reason: 'Verified' });
  });

  it('is Ready only when every desired replica serves and is verified', () => {
    const one = computeStatus(
      observe(dense, [
        endpoint('a', 'standalone'),
        endpoint('b', 'standalone', { verified: false, reason: 'VerificationFailed' }),
      ]),
      NOW,
    );
    expect(cond(one, 'Ready')).toMatchObject({
      status: 'False',
      reason: 'WaitingForVerifiedReplicas',
      observedGeneration: 3,
    });
    const two = computeStatus(
      observe(dense, [endpoint('a', 'standalone'), endpoint('b', 'standalone')]),
      NOW,
    );
    expect(cond(two, 'Ready')).toMatchObject({ status: 'True', reason: 'AllReplicasVerified' });
    expect(two).toMatchObject({
      observedGeneration: 3,
      replicas: 2,
      readyReplicas: 2,
      verifiedReplicas: 2,
      updatedReplicas: 2,
      selector: 'cacheroute.dev/deployment=llama-8b',
    });
    expect(two.routable).toMatchObject({ value: true, reason: 'VerifiedEndpoints' });
  });

  it('is never Ready merely because pods exist', () => {
    const s = computeStatus(
      observe(dense, [
        endpoint('a', 'standalone', { verified: false }),
        endpoint('b', 'standalone', { verified: false }),
      ]),
      NOW,
    );
    expect(cond(s, 'Ready')?.status).toBe('False');
    expect(s.routable?.value).toBe(false);
  });

  it('reports an identity mismatch as IdentityVerified=False and Degraded, naming the pod', () => {
    const s = computeStatus(
      observe(dense, [
        endpoint('a', 'standalone'),
        endpoint('b', 'standalone', {
          verified: false,
          reason: 'IdentityMismatch',
          message: 'servedModelName: declared x, runtime reports y',
        }),
      ]),
      NOW,
    );
    expect(cond(s, 'IdentityVerified')).toMatchObject({
      status: 'False',
      reason: 'IdentityMismatch',
      message: expect.stringContaining('b: servedModelName'),
    });
    expect(cond(s, 'Degraded')).toMatchObject({
      status: 'True',
      message: expect.stringContaining('b reports another identity'),
    });
    expect(s.routable?.value).toBe(true);
  });

  it('surfaces the scheduler message as Progressing=False Unschedulable', () => {
    const s = computeStatus(
      observe(dense, [], {
        troubles: [
          {
            pod: 'a',
            reason: 'Unschedulable',
            message: '0/2 nodes are available: 2 Insufficient nvidia.com/gpu.',
          },
        ],
        podCount: 2,
      }),
      NOW,
    );
    expect(cond(s, 'Progressing')).toMatchObject({
      status: 'False',
      reason: 'Unschedulable',
      message: 'pod a: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu.',
    });
    expect(cond(s, 'Degraded')?.status).toBe('False');
  });

  it('says how far a rollout is', () => {
    const s = computeStatus(
      observe(dense, [
        endpoint('a', 'standalone', { fingerprint: 'old' }),
        endpoint('b', 'standalone', { fingerprint: 'old' }),
        endpoint('c', 'standalone'),
      ]),
      NOW,
    );
    expect(cond(s, 'Progressing')).toMatchObject({
      status: 'True',
      reason: 'RollingOut',
      message: '1 of 2 replicas on fingerprint fp, 3 verified',
    });
    expect(s.updatedReplicas).toBe(1);
  });

  it('refuses an identity change without a new deploymentId and keeps the accepted identity', () => {
    const previous = {
      ...dense,
      status: { identity: { deploymentId: dense.spec.deploymentId, fingerprint: 'fp' } },
    };
    const s = computeStatus(
      observe(previous, [endpoint('a', 'standalone'), endpoint('b', 'standalone')], {
        fingerprint: 'fp2',
        identityConflict: { accepted: 'fp', refused: 'fp2' },
      }),
      NOW,
    );
    expect(cond(s, 'Progressing')).toMatchObject({
      status: 'False',
      reason: 'IdentityChangedWithoutNewId',
      message: expect.stringContaining('change deploymentId'),
    });
    expect(s.identity?.fingerprint).toBe('fp');
    expect(cond(s, 'Degraded')?.status).toBe('True');
  });

  it('moves lastTransitionTime only when a condition flips', () => {
    const first = computeStatus(observe(dense, [endpoint('a', 'standalone')]), NOW);
    const later = new Date(NOW.getTime() + 60_000);
    const again = computeStatus(
      observe({ ...dense, status: first }, [
        endpoint('a', 'standalone'),
        endpoint('b', 'standalone', { verified: false }),
      ]),
      later,
    );
    expect(cond(again, 'Ready')?.lastTransitionTime).toBe(cond(first, 'Ready')?.lastTransitionTime);
    const flipped = computeStatus(
      observe({ ...dense, status: again }, [endpoint('a', 'standalone'), endpoint('b', 'standalone')]),
      later,
    );
    expect(cond(flipped, 'Ready')?.lastTransitionTime).toBe('2026-11-29T10:01:00Z');
  });

  describe('prefill/decode', () => {
    const pd = root('deployment-pd-hisparse.yaml'); // prefill 1, decode 2

    it.each<[string, Endpoint[], boolean, string]>([
      [
        'no prefill: HiSparse decode has no ingress',
        [endpoint('d1', 'decode'), endpoint('d2', 'decode')],
        false,
        'NoVerifiedPrefill',
      ],
      ['no decode', [endpoint('p1', 'prefill')], false, 'NoVerifiedDecode'],
      [
        'revisions never mix',
        [endpoint('p1', 'prefill', { fingerprint: 'old' }), endpoint('d1', 'decode')],
        false,
        'NoSameRevisionPair',
      ],
      [
        'a verified pair of one revision',
        [endpoint('p1', 'prefill'), endpoint('d1', 'decode')],
        true,
        'PrefillDecodePaired',
      ],
    ])('%s', (_name, endpoints, value, reason) => {
      expect(computeStatus(observe(pd, endpoints), NOW).routable).toMatchObject({ value, reason });
    });

    it('explains the HiSparse ingress rule in the message', () => {
      expect(computeStatus(observe(pd, [endpoint('d1', 'decode')]), NOW).routable?.message).toContain(
        'prefill/decode ingress',
      );
    });

    it('needs every part at its replica count to be Ready', () => {
      const s = computeStatus(observe(pd, [endpoint('p1', 'prefill'), endpoint('d1', 'decode')]), NOW);
      expect(cond(s, 'Ready')?.status).toBe('False');
      expect(s.profile).toBe('pd:hicache/hisparse');
    });
  });
});

describe('computePodTrouble', () => {
  const pod = (status: NonNullable<V1Pod['status']>): PodObject => ({ metadata: { name: 'p' }, status });
  it.each<[string, NonNullable<V1Pod['status']>, string | undefined]>([
    [
      'unschedulable',
      {
        conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: 'no GPUs' }],
      },
      'Unschedulable',
    ],
    [
      'image pull back-off',
      {
        containerStatuses: [
          {
            name: 'sglang',
            image: 'i',
            imageID: '',
            ready: false,
            restartCount: 0,
            state: { waiting: { reason: 'ImagePullBackOff', message: 'not found' } },
          },
        ],
      },
      'ImagePullBackOff',
    ],
    [
      'crash loop',
      {
        containerStatuses: [
          {
            name: 'sglang',
            image: 'i',
            imageID: '',
            ready: false,
            restartCount: 4,
            state: { waiting: { reason: 'CrashLoopBackOff' } },
          },
        ],
      },
      'CrashLoopBackOff',
    ],
    [
      'still creating',
      {
        containerStatuses: [
          {
            name: 'sglang',
            image: 'i',
            imageID: '',
            ready: false,
            restartCount: 0,
            state: { waiting: { reason: 'ContainerCreating' } },
          },
        ],
      },
      undefined,
    ],
    ['running', { phase: 'Running' }, undefined],
  ])('%s', (_name, status, reason) => {
    expect(computePodTrouble(pod(status))?.reason).toBe(reason);
  });
});

describe('computeStatus: cache health', () => {
  const dense = root('deployment-dense.yaml');
  const serving = [endpoint('a', 'standalone'), endpoint('b', 'standalone')];
  const gap = {
    condition: { status: 'False' as const, reason: 'PredictionGap', message: 'the runtimes hit 0.10' },
    cache: { windowSeconds: 300, promptTokens: 5000, hitRate: 0.1, predictedHitRate: 0.5 },
  };

  it('writes the assessment as CacheHealthy and status.cache', () => {
    const s = computeStatus(observe(dense, serving, { cache: gap }), NOW);
    expect(cond(s, 'CacheHealthy')).toMatchObject({
      status: 'False',
      reason: 'PredictionGap',
      message: 'the runtimes hit 0.10',
      observedGeneration: 3,
    });
    expect(s.cache).toEqual(gap.cache);
  });

  it('drops a CacheHealthy left from when caches were measured', () => {
    const before = computeStatus(observe(dense, serving, { cache: gap }), NOW);
    const after = computeStatus(observe({ ...dense, status: before }, serving), NOW);
    expect(cond(after, 'CacheHealthy')).toBeUndefined();
    expect(after.cache).toBeUndefined();
  });
});

describe('computeStatus: a served name claimed first in another namespace', () => {
  const dense = root('deployment-dense.yaml');
  const serving = [endpoint('a', 'standalone')];
  const shared = {
    reason: 'ServedFirstElsewhere' as const,
    message: "served name 'x' was served first in team-y",
  };

  it('sets ServedNameShared while it is, and removes it when it is no longer', () => {
    const before = computeStatus(observe(dense, serving, { sharedName: shared }), NOW);
    expect(cond(before, 'ServedNameShared')).toMatchObject({
      status: 'True',
      reason: 'ServedFirstElsewhere',
      message: shared.message,
    });
    const after = computeStatus(observe({ ...dense, status: before }, serving), NOW);
    expect(cond(after, 'ServedNameShared')).toBeUndefined();
    expect(cond(computeStatus(observe(dense, serving), NOW), 'ServedNameShared')).toBeUndefined();
  });
});
