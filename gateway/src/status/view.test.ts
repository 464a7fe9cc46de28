import { describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import type { ModelRoute, RouteEndpoint } from '../routing/table.ts';
import { KeyDirectory, OPEN_DIRECTORY } from '../tenancy/tenant.ts';
import { buildStatusView, StatusView, type StatusSnapshot } from './view.ts';

const ep = (id: string, over: Partial<RouteEndpoint> = {}): RouteEndpoint => ({
  id,
  url: `http://10.0.0.1:${id.length}`,
  role: 'standalone',
  fingerprint: 'fp1',
  verified: true,
  ready: true,
  ...over,
});

const route = (over: Partial<ModelRoute> = {}): ModelRoute => ({
  model: 'm',
  deployment: 'ns/m',
  fingerprint: 'fp1',
  salt: 's',
  routing: RoutingSettings.parse({ policy: 'cache-aware' }),
  admission: Admission.parse({ maxConcurrency: 8, maxQueue: 16 }),
  reuse: ResultReuse.parse({ enabled: true, ttlSeconds: 60 }),
  endpoints: [ep('b'), ep('a')],
  ...over,
});

const empty: StatusSnapshot = {
  tenants: OPEN_DIRECTORY,
  now: Date.UTC(2026, 0, 2, 3, 4, 5),
  routes: [],
  admission: new Map(),
  inFlight: new Map(),
  runtimeLoad: new Map(),
  decisions: new Map(),
  activity: new Map(),
  down: new Map(),
  kvIndex: new Map(),
  failures: new Map(),
  routingTokens: new Map(),
  reuse: new Map(),
  deploymentErrors: new Map(),
  discoveryIssues: [],
};

describe('buildStatusView', () => {
  it('an idle deployment: configured admission, no rates yet (null, not zero)', () => {
    const v = buildStatusView({ ...empty, routes: [route()] });
    expect(StatusView.parse(v)).toEqual(v);
    expect(v.generatedAt).toBe('2026-01-02T03:04:05.000Z');
    const [d] = v.deployments;
    expect(d).toMatchObject({
      model: 'm',
      policy: 'cache-aware',
      admission: { limit: 8, maxConcurrency: 8, inFlight: 0, queued: 0, maxQueue: 16, draining: false },
      routing: { promptTokens: 0, matchedTokens: 0, predictedTokenHitRate: null },
      reuse: { enabled: true, ttlSeconds: 60, fromStore: 0, sharedInFlight: 0, fresh: 0 },
      routableEndpoints: 2,
      lastError: null,
    });
    expect(d?.endpoints.map((e) => e.id)).toEqual(['a', 'b']); // sorted
    expect(d?.endpoints[0]).toMatchObject({
      inFlight: 0,
      runtimeQueue: null,
      kvUsage: null,
      routed: 0,
      predictedHitRate: null,
      served: 0,
      cacheHitRate: null,
      lastError: null,
    });
  });

  it('combines load, decisions, runtime reports and errors per endpoint', () => {
    const err = { at: Date.UTC(2026, 0, 1), status: 400, code: 'HTTP_400', message: 'too long' };
    const v = buildStatusView({
      ...empty,
      routes: [route()],
      admission: new Map([['ns/m', { limit: 5, inFlight: 5, queued: 3, draining: true }]]),
      inFlight: new Map([['a', 2]]),
      runtimeLoad: new Map([['a', { queued: 4, tokenUsage: 0.25 }]]),
      decisions: new Map([['a', { routed: 10, predictedHits: 7 }]]),
      activity: new Map([
        ['a', { served: 9, reported: 9, promptTokens: 1000, cachedTokens: 750, lastError: err }],
      ]),
      failures: new Map([['a', { connect: 2, status: 1 }]]),
      down: new Map([['a', 'ECONNREFUSED']]),
      kvIndex: new Map([['a', { usable: false, reason: 'catching-up: replay', blocks: 12, lagMs: 3 }]]),
      routingTokens: new Map([['m', { prompt: 2000, matched: 500 }]]),
      reuse: new Map([['m', { store: 3, inflight: 1, fresh: 4 }]]),
      deploymentErrors: new Map([['ns/m', { ...err, status: 429, code: 'GW_OVERLOADED' }]]),
    });
    const [d] = v.deployments;
    expect(d?.admission).toMatchObject({ limit: 5, inFlight: 5, queued: 3, draining: true });
    expect(d?.routing.predictedTokenHitRate).toBe(0.25);
    expect(d?.reuse).toMatchObject({ fromStore: 3, sharedInFlight: 1, fresh: 4 });
    expect(d?.lastError).toMatchObject({
      status: 429,
      code: 'GW_OVERLOADED',
      at: '2026-01-01T00:00:00.000Z',
    });
    expect(d?.endpoints[0]).toMatchObject({
      id: 'a',
      inFlight: 2,
      runtimeQueue: 4,
      kvUsage: 0.25,
      routed: 10,
      predictedHitRate: 0.7,
      served: 9,
      promptTokens: 1000,
      cachedTokens: 750,
      cacheHitRate: 0.75,
      lastError: { status: 400, code: 'HTTP_400', message: 'too long' },
      failedAttempts: { connect: 2, timeout: 0, status: 1, interrupted: 0 },
      down: 'ECONNREFUSED',
      kvIndex: { usable: false, reason: 'catching-up: replay', blocks: 12, lagMs: 3 },
    });
    expect(StatusView.parse(v)).toEqual(v);
  });

  it.each([
    ['not ready', { ready: false }, false],
    ['unverified', { verified: false }, false],
    ['ready and verified', {}, true],
    ['a verified prefill', { role: 'prefill' as const }, true],
  ])('%s → routable %s', (_name, over, routable) => {
    const v = buildStatusView({ ...empty, routes: [route({ endpoints: [ep('a', over)] })] });
    expect(v.deployments[0]?.endpoints[0]?.routable).toBe(routable);
    expect(v.deployments[0]?.routableEndpoints).toBe(routable ? 1 : 0);
  });

  it.each([
    ['held for warm-up', { state: 'warming' as const, message: 'held' }, false],
    ['routed after its wait', { state: 'timed-out' as const, message: 'routed anyway' }, true],
    ['warmed', { state: 'warmed' as const, message: 'warmed' }, true],
  ])('a standalone and a prefill endpoint %s → routable %s, with the reason', (_name, warmup, routable) => {
    for (const role of ['standalone', 'prefill'] as const) {
      const v = buildStatusView({ ...empty, routes: [route({ endpoints: [ep('a', { role, warmup })] })] });
      expect(v.deployments[0]?.endpoints[0]).toMatchObject({ routable, warmup });
    }
  });

  it('marks an endpoint of another fingerprint (mid-rollout) as not current', () => {
    const v = buildStatusView({
      ...empty,
      routes: [route({ endpoints: [ep('old', { fingerprint: 'fp0' })] })],
    });
    expect(v.deployments[0]?.endpoints[0]?.isCurrent).toBe(false);
  });

  it('lists what discovery left out, each with a message', () => {
    const v = buildStatusView({
      ...empty,
      discoveryIssues: [
        { code: 'DuplicateModel', path: 'Deployment b/m', model: 'm', servedBy: 'a/m' },
        { code: 'NotRoutable', path: 'Deployment a/n', model: 'n', reason: 'NoStatus', message: 'not yet' },
        { code: 'InvalidObject', path: 'CachePolicy a/p', message: 'spec: invalid' },
      ],
    });
    expect(v.discoveryIssues).toEqual([
      { code: 'DuplicateModel', path: 'Deployment b/m', model: 'm', message: 'the name is served by a/m' },
      { code: 'NotRoutable', path: 'Deployment a/n', model: 'n', message: 'NoStatus: not yet' },
      { code: 'InvalidObject', path: 'CachePolicy a/p', model: null, message: 'spec: invalid' },
    ]);
  });

  it('shows who may call: the open mode, or each tenant with its limits and what was left out', () => {
    expect(buildStatusView(empty).auth).toEqual({ mode: 'open', tenants: [], issues: [] });
    const dir = new KeyDirectory();
    const tenant = {
      id: 'ns/a',
      deployments: new Set(['ns/m', 'ns/b']),
      limits: { requestsPerMinute: 60 },
      priority: 5,
    };
    const issue = { tenant: 'ns/b', code: 'SecretNotFound' as const, message: 'Secret ns/k not found' };
    dir.replace({ byHash: new Map(), tenants: [tenant], issues: [issue] });
    expect(buildStatusView({ ...empty, tenants: dir }).auth).toEqual({
      mode: 'keys',
      tenants: [
        {
          id: 'ns/a',
          deployments: ['ns/b', 'ns/m'],
          requestsPerMinute: 60,
          tokensPerMinute: null,
          priority: 5,
        },
      ],
      issues: [issue],
    });
  });

  it('sorts deployments by model', () => {
    const v = buildStatusView({
      ...empty,
      routes: [route({ model: 'z', deployment: 'ns/z' }), route({ model: 'a', deployment: 'ns/a' })],
    });
    expect(v.deployments.map((d) => d.model)).toEqual(['a', 'z']);
  });

  it('a name served in two namespaces: each shows the other, and a split shares only within its namespace', () => {
    const v = buildStatusView({
      ...empty,
      routes: [
        route({ deployment: 'team-a/r1', weight: 90, sharedWith: ['team-b'] }),
        route({ deployment: 'team-a/r2', weight: 10, sharedWith: ['team-b'] }),
        route({ deployment: 'team-b/m', weight: 50, sharedWith: ['team-a'] }),
      ],
    });
    expect(v.deployments.map((d) => [d.deployment, d.trafficShare, d.sharedWith])).toEqual([
      ['team-a/r1', 0.9, ['team-b']],
      ['team-a/r2', 0.1, ['team-b']],
      ['team-b/m', 1, ['team-a']],
    ]);
    expect(buildStatusView({ ...empty, routes: [route()] }).deployments[0]?.sharedWith).toEqual([]);
  });
});
