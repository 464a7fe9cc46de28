import { describe, expect, it } from 'vitest';
import { buildMetrics, classifyEndpoint } from './index.ts';
import { StaticRoutingTable, WarmupGate, type ModelRoute, type RouteEndpoint } from '../routing/table.ts';

const endpoint = (over: Partial<RouteEndpoint>): RouteEndpoint => ({
  id: 'ns/pod',
  url: 'http://10.0.0.1:30000',
  role: 'standalone',
  fingerprint: 'f',
  verified: true,
  ready: true,
  ...over,
});

describe('classifyEndpoint', () => {
  it('counts an endpoint held for its warm-up as warming, not routable', () => {
    expect(classifyEndpoint(endpoint({ warmup: { state: WarmupGate.warming, message: 'm' } }))).toBe(
      'warming',
    );
    expect(classifyEndpoint(endpoint({ warmup: { state: WarmupGate.warmed, message: 'm' } }))).toBe(
      'routable',
    );
    expect(classifyEndpoint(endpoint({ warmup: { state: WarmupGate.timedOut, message: 'm' } }))).toBe(
      'routable',
    );
    expect(classifyEndpoint(endpoint({}))).toBe('routable');
    expect(classifyEndpoint(endpoint({ ready: false }))).toBe('not_ready');
    expect(classifyEndpoint(endpoint({ verified: false }))).toBe('unverified');
  });

  it('shows in cacheroute_gateway_endpoints', async () => {
    const route = {
      model: 'm',
      deployment: 'ns/d',
      endpoints: [
        endpoint({ id: 'ns/a', warmup: { state: WarmupGate.warming, message: 'held' } }),
        endpoint({ id: 'ns/b' }),
      ],
    } as unknown as ModelRoute;
    const metrics = buildMetrics({ table: new StaticRoutingTable([route]) });
    const text = await metrics.registry.metrics();
    expect(text).toContain('cacheroute_gateway_endpoints{model="m",role="standalone",state="warming"} 1');
    expect(text).toContain('cacheroute_gateway_endpoints{model="m",role="standalone",state="routable"} 1');
  });
});
