import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerDeploymentMetrics, type DeploymentLike } from './metrics.ts';

describe('registerDeploymentMetrics', () => {
  it("publishes each Deployment's identity and its endpoints by role and state, at scrape time", async () => {
    const deployments: DeploymentLike[] = [
      {
        metadata: { namespace: 'team', name: 'llama-8b' },
        spec: { deploymentId: 'llama-r2' },
        status: {
          identity: { deploymentId: 'llama-r1', fingerprint: 'abc' },
          conditions: [{ type: 'Ready', status: 'True' }],
          endpoints: [
            { role: 'standalone', ready: true, verified: true },
            { role: 'standalone', ready: true, verified: true },
            { role: 'standalone', ready: true, verified: false },
            { role: 'standalone', ready: false, verified: false },
          ],
        },
      },
      { metadata: { namespace: 'team', name: 'new' }, spec: { deploymentId: 'new-r1' } },
    ];
    const registry = new Registry();
    registerDeploymentMetrics(registry, { list: () => deployments });
    const text = await registry.metrics();
    expect(text).toContain(
      'cacheroute_deployment_info{deployment="team/llama-8b",deployment_id="llama-r1",fingerprint="abc",ready="true"} 1',
    );
    // Before its first reconcile: the spec's id, no fingerprint yet.
    expect(text).toContain(
      'cacheroute_deployment_info{deployment="team/new",deployment_id="new-r1",fingerprint="",ready="false"} 1',
    );
    expect(text).toContain(
      'cacheroute_deployment_endpoints{deployment="team/llama-8b",role="standalone",state="verified"} 2',
    );
    expect(text).toContain(
      'cacheroute_deployment_endpoints{deployment="team/llama-8b",role="standalone",state="unverified"} 1',
    );
    expect(text).toContain(
      'cacheroute_deployment_endpoints{deployment="team/llama-8b",role="standalone",state="not_ready"} 1',
    );

    deployments.pop();
    expect(await registry.metrics()).not.toContain('deployment="team/new"');
  });

  it('publishes each condition with its status and reason, and the measured cache hit rate', async () => {
    const registry = new Registry();
    registerDeploymentMetrics(registry, {
      list: () => [
        {
          metadata: { namespace: 'team', name: 'llama-8b' },
          status: {
            conditions: [
              { type: 'Ready', status: 'True', reason: 'AllReplicasVerified' },
              { type: 'CacheHealthy', status: 'False', reason: 'HostTierFull' },
            ],
            cache: { hitRate: 0.31 },
          },
        },
        { metadata: { namespace: 'team', name: 'unmeasured' } },
      ],
    });
    const text = await registry.metrics();
    expect(text).toContain(
      'cacheroute_deployment_condition{deployment="team/llama-8b",type="CacheHealthy",status="False",reason="HostTierFull"} 1',
    );
    expect(text).toContain(
      'cacheroute_deployment_condition{deployment="team/llama-8b",type="Ready",status="True",reason="AllReplicasVerified"} 1',
    );
    expect(text).toContain('cacheroute_deployment_cache_hit_rate{deployment="team/llama-8b"} 0.31');
    expect(text).not.toContain('cacheroute_deployment_cache_hit_rate{deployment="team/unmeasured"}');
  });
});
