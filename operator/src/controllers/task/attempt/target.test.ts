import { describe, expect, it } from 'vitest';
import { API_VERSION, type DeploymentResource } from '#api/resources.ts';
import { computeTaskTarget } from './target.ts';
import { buildTask } from '../../../../../test/support/operator/task.ts';

const reported = {
  modelPath: 'm',
  servedModelName: 'm',
  tokenizerPath: 't',
  version: '0.5.23',
  tensorParallel: 1,
};
const endpoint = (o: Record<string, unknown> = {}) => ({
  pod: 'p0',
  ip: '10.244.0.5',
  port: 30000,
  role: 'standalone' as const,
  ready: true,
  verified: true,
  fingerprint: 'f1',
  reported,
  ...o,
});

function deployment(status: Record<string, unknown>, spec: Record<string, unknown> = {}): DeploymentResource {
  return {
    apiVersion: API_VERSION,
    kind: 'Deployment',
    metadata: { name: 'llama', namespace: 'ns' },
    spec: { deploymentId: 'llama-a', ...spec },
    status: {
      identity: { deploymentId: 'llama-a', fingerprint: 'f1' },
      routable: { value: true, reason: 'Routable' },
      endpoints: [
        endpoint(),
        endpoint({ pod: 'old', ip: '10.244.0.6', fingerprint: 'f0' }),
        endpoint({ pod: 'nr', ip: '10.244.0.7', ready: false }),
      ],
      ...status,
    },
  } as unknown as DeploymentResource;
}

const spec = buildTask().spec;

describe('computeTaskTarget', () => {
  it('routes to verified, ready endpoints of the current identity only', () => {
    expect(computeTaskTarget(spec, { deployment: deployment({}), cacheSalt: 'salt' })).toEqual({
      ok: true,
      value: {
        provider: 'sglang',
        identity: {
          provider: 'sglang',
          deploymentId: 'llama-a',
          identityFingerprint: 'f1',
          cacheSalt: 'salt',
          runtime: reported,
        },
        route: { kind: 'standalone', urls: ['http://10.244.0.5:30000'] },
      },
    });
  });

  it('pairs prefill and decode of one identity for a disaggregated target', () => {
    const d = deployment(
      {
        endpoints: [
          endpoint({ role: 'prefill', bootstrapPort: 8998 }),
          endpoint({ pod: 'd', ip: '10.244.0.9', role: 'decode' }),
        ],
      },
      { disaggregation: {} },
    );
    expect(computeTaskTarget(spec, { deployment: d, cacheSalt: 's' })).toMatchObject({
      ok: true,
      value: {
        route: {
          kind: 'pd',
          prefill: [{ url: 'http://10.244.0.5:30000', bootstrapHost: '10.244.0.5', bootstrapPort: 8998 }],
          decode: ['http://10.244.0.9:30000'],
        },
      },
    });
  });

  it.each<[string, Parameters<typeof computeTaskTarget>[1], string]>([
    ['a missing Deployment', { cacheSalt: 's' }, 'NotFound'],
    [
      'an unverified new deploymentId',
      {
        deployment: deployment({ identity: { deploymentId: 'llama-0', fingerprint: 'f0' } }),
        cacheSalt: 's',
      },
      'IdentityPending',
    ],
    [
      'a not routable Deployment (its reason)',
      {
        deployment: deployment({ routable: { value: false, reason: 'NoVerifiedEndpoints' } }),
        cacheSalt: 's',
      },
      'NoVerifiedEndpoints',
    ],
    ['no cache salt', { deployment: deployment({}) }, 'NoCacheSalt'],
    [
      'no eligible endpoint',
      { deployment: deployment({ endpoints: [endpoint({ verified: false })] }), cacheSalt: 's' },
      'NoEndpoint',
    ],
    [
      'endpoints that disagree on runtime identity',
      {
        deployment: deployment({
          endpoints: [endpoint(), endpoint({ pod: 'p1', reported: { ...reported, version: '0.5.24' } })],
        }),
        cacheSalt: 's',
      },
      'IdentityMismatch',
    ],
  ])('is TargetNotRoutable for %s', (_n, obs, code) => {
    expect(computeTaskTarget(spec, obs)).toMatchObject({
      ok: false,
      error: { reason: 'TargetNotRoutable', code },
    });
  });

  it('takes the OpenRouter base URL from the operator, and needs it', () => {
    const or = buildTask({
      spec: {
        target: {
          openrouter: {
            model: 'a/b',
            upstreamProvider: 'openai',
            inputTokenUpperBound: 10,
            cacheWriteUsage: 'required',
            apiKeySecretRef: { name: 's', key: 'k' },
          },
        },
        budget: {
          maxInputTokens: 100,
          prices: { inputPerMillion: '1', outputPerMillion: '1' },
          maxCost: '1',
        },
      },
    }).spec;
    expect(computeTaskTarget(or, { openrouterBaseUrl: 'https://openrouter.ai/api/v1' })).toMatchObject({
      ok: true,
      value: {
        identity: { baseUrl: 'https://openrouter.ai/api/v1', model: 'a/b', upstreamProvider: 'openai' },
      },
    });
    expect(computeTaskTarget(or, {})).toMatchObject({
      ok: false,
      error: { code: 'PaidCallsNotAllowed', message: expect.stringContaining('--allow-paid-calls=true') },
    });
  });
});
