import { describe, expect, it } from 'vitest';
import { listEndpointStates } from '../routing/endpoint-state.ts';
import { buildMetrics } from './index.ts';
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

describe('cacheroute_gateway_endpoints', () => {
  it('shows an endpoint held for its warm-up as warming', async () => {
    const route = {
      model: 'm',
      deployment: 'ns/d',
      endpoints: [
        endpoint({ id: 'ns/a', warmup: { state: WarmupGate.warming, message: 'held' } }),
        endpoint({ id: 'ns/b' }),
      ],
    } as unknown as ModelRoute;
    const metrics = buildMetrics({
      endpointStates: () => listEndpointStates(new StaticRoutingTable([route])),
    });
    const text = await metrics.registry.metrics();
    expect(text).toContain('cacheroute_gateway_endpoints{model="m",role="standalone",state="warming"} 1');
    expect(text).toContain('cacheroute_gateway_endpoints{model="m",role="standalone",state="routable"} 1');
  });

  it('counts what endpointStates lists afresh at each scrape', async () => {
    let states = [
      { model: 'm', role: 'standalone', state: 'warming' },
      { model: 'm', role: 'standalone', state: 'routable' },
      { model: 'm', role: 'standalone', state: 'routable' },
    ];
    const metrics = buildMetrics({ endpointStates: () => states });
    expect(await metrics.registry.metrics()).toContain(
      'cacheroute_gateway_endpoints{model="m",role="standalone",state="routable"} 2',
    );
    states = [{ model: 'm', role: 'standalone', state: 'routable' }];
    const text = await metrics.registry.metrics();
    expect(text).toContain('cacheroute_gateway_endpoints{model="m",role="standalone",state="routable"} 1');
    expect(text).not.toContain('state="warming"');
  });
});
