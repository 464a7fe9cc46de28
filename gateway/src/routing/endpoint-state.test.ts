import { describe, expect, it } from 'vitest';
import { classifyEndpoint, listEndpointStates } from './endpoint-state.ts';
import { StaticRoutingTable, WarmupGate, type ModelRoute, type RouteEndpoint } from './table.ts';

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
});

describe('listEndpointStates', () => {
  it('lists every endpoint of every route with its model, role and state', () => {
    const routes = [
      { model: 'm', endpoints: [endpoint({ id: 'ns/a' }), endpoint({ id: 'ns/b', ready: false })] },
      { model: 'n', endpoints: [endpoint({ id: 'ns/c', role: 'prefill', verified: false })] },
    ] as unknown as ModelRoute[];
    expect([...listEndpointStates(new StaticRoutingTable(routes))]).toEqual([
      { model: 'm', role: 'standalone', state: 'routable' },
      { model: 'm', role: 'standalone', state: 'not_ready' },
      { model: 'n', role: 'prefill', state: 'unverified' },
    ]);
  });
});
