import { describe, expect, it } from 'vitest';
import { loadSample } from '../../../test/support/samples.ts';
import { computeRoutableEndpoints, type ModelRoute } from '../routing/table.ts';
import { computeRoutableByRole } from '../routing/pd.ts';
import { buildRoutingTable, reuseUnchangedRoutes } from './build-table.ts';

type Json = Record<string, unknown>;

const T0 = Date.parse('2026-12-01T10:00:00Z');
const iso = (s: number): string => new Date(T0 + s * 1000).toISOString();

const ep = (pod: string, over: Json = {}): Json => ({
  pod,
  ip: `10.244.0.${pod.length}`,
  port: 30000,
  role: 'standalone',
  ready: true,
  verified: true,
  fingerprint: 'fp1',
  restartCount: 0,
  verifiedAt: iso(0),
  ...over,
});

function dep(endpoints: Json[], pd = false): Json {
  const doc = loadSample(pd ? 'deployment-pd-hisparse.yaml' : 'deployment-dense.yaml') as unknown as Json;
  doc['metadata'] = { name: 'llama', namespace: 'team-a', creationTimestamp: iso(-3600) };
  doc['status'] = {
    identity: { deploymentId: 'id-1', fingerprint: 'fp1' },
    endpoints,
    routable: { value: true, reason: 'Ok' },
  };
  return doc;
}

/** The sample policy (it declares warm-up) with these warm-up entries in status. */
function pol(warmup: Json[] | undefined, spec: Json = {}): Json {
  const doc = loadSample('cachepolicy.yaml') as unknown as Json & { spec: Json };
  doc['metadata'] = { name: 'pol', namespace: 'team-a', creationTimestamp: iso(-7200) };
  doc.spec['targetRefs'] = [{ kind: 'Deployment', name: 'llama' }];
  Object.assign(doc.spec, spec);
  doc['status'] = {
    targets: [
      {
        name: 'llama',
        accepted: true,
        reason: 'Accepted',
        cacheSalt: 's',
        deploymentId: 'id-1',
        ...(warmup ? { warmup } : {}),
      },
    ],
  };
  return doc;
}

const warmed = (pod: string, restartCount = 0): Json => ({
  pod,
  restartCount,
  state: 'Warmed',
  since: iso(0),
  warmedAt: iso(3),
});
const warming = (pod: string, since = 0): Json => ({
  pod,
  restartCount: 0,
  state: 'Warming',
  since: iso(since),
});

function build(endpoints: Json[], warmup: Json[] | undefined, nowS: number, spec: Json = {}, pd = false) {
  const t = buildRoutingTable({
    deployments: [dep(endpoints, pd)],
    policies: [pol(warmup, spec)],
    now: T0 + nowS * 1000,
  });
  const route = t.routes[0] as ModelRoute;
  return {
    route,
    wakeAt: t.wakeAt,
    routable: computeRoutableEndpoints(route).map((e) => e.id.split('/')[1]),
  };
}

describe('the gateway waits for the warmed mark', () => {
  // The bug this guards: the gateway never waited for warm-up, so a new replica took user
  // traffic with a cold cache while its warm-up was still running.
  it('holds a replica whose warm-up has not completed while another is warmed', () => {
    const { route, routable, wakeAt } = build([ep('a'), ep('b')], [warmed('a'), warming('b', 10)], 30);
    expect(routable).toEqual(['a']);
    expect(route.endpoints.find((e) => e.id === 'team-a/b')?.warmup).toEqual({
      state: 'warming',
      message: expect.stringContaining(
        `held from user traffic until warmed, or until ${iso(130)} (routeAfterSeconds 120)`,
      ),
    });
    // The hold ends by time alone at since + routeAfterSeconds (default 120 s): rebuild then.
    expect(wakeAt).toBe(T0 + 130_000);
  });

  it('routes to it anyway once routeAfterSeconds have passed, and says so', () => {
    const { route, routable } = build([ep('a'), ep('b')], [warmed('a'), warming('b', 10)], 131);
    expect(routable).toEqual(['a', 'b']);
    expect(route.endpoints.find((e) => e.id === 'team-a/b')?.warmup).toEqual({
      state: 'timed-out',
      message: expect.stringContaining('routed anyway: not warmed within routeAfterSeconds (120 s)'),
    });
  });

  it('takes the bound from spec.warmup.routeAfterSeconds, and 0 never holds', () => {
    const docs = [{ name: 'shared-knowledge', key: 'handbook.md' }];
    expect(
      build([ep('a'), ep('b')], [warmed('a'), warming('b')], 30, {
        warmup: { documents: docs, routeAfterSeconds: 20 },
      }).routable,
    ).toEqual(['a', 'b']);
    const never = build([ep('a'), ep('b')], [warmed('a'), warming('b')], 1, {
      warmup: { documents: docs, routeAfterSeconds: 0 },
    });
    expect(never.routable).toEqual(['a', 'b']);
    expect(never.route.endpoints.every((e) => e.warmup === undefined)).toBe(true);
  });

  // The bug this guards: a pod-name mark kept a restarted container (same pod, empty cache) routable.
  it('holds a restarted container: the mark is the pod and its restart count', () => {
    const { routable, route } = build(
      [ep('a'), ep('b', { restartCount: 1, verifiedAt: iso(50) })],
      [warmed('a'), warmed('b', 0)],
      60,
    );
    expect(routable).toEqual(['a']);
    // No entry for the new instance yet: the wait counts from its verification.
    expect(route.endpoints.find((e) => e.id === 'team-a/b')?.warmup?.message).toBe(
      `warm-up not started; held from user traffic until warmed, or until ${iso(170)} (routeAfterSeconds 120)`,
    );
  });

  it('never black-holes a model: with no replica warmed or timed out, all are routed and say why', () => {
    const { route, routable, wakeAt } = build([ep('a'), ep('b')], [warming('a'), warming('b')], 5);
    expect(routable).toEqual(['a', 'b']);
    expect(route.endpoints.map((e) => e.warmup?.state)).toEqual(['none-warmed', 'none-warmed']);
    expect(route.endpoints[0]?.warmup?.message).toContain('no endpoint of this deployment is warmed yet');
    expect(wakeAt).toBe(T0 + 120_000);
  });

  it('does not gate a Deployment whose policy declares no warm-up', () => {
    const { route, routable } = build([ep('a'), ep('b')], [warming('b')], 5, { warmup: undefined });
    expect(routable).toEqual(['a', 'b']);
    expect(route.endpoints.every((e) => e.warmup === undefined)).toBe(true);
  });

  it('holds a prefill endpoint, never a decode one', () => {
    const endpoints = [
      ep('p-warm', { role: 'prefill', bootstrapPort: 8998 }),
      ep('p-cold', { role: 'prefill', bootstrapPort: 8998 }),
      ep('d', { role: 'decode' }),
    ];
    const { route } = build(endpoints, [warmed('p-warm'), warming('p-cold')], 5, {}, true);
    expect(computeRoutableByRole(route, 'prefill').map((e) => e.id)).toEqual(['team-a/p-warm']);
    expect(computeRoutableByRole(route, 'decode').map((e) => e.id)).toEqual(['team-a/d']);
  });

  it('keeps a held route unchanged as time passes, so the gateway re-syncs nothing until the verdict changes', () => {
    const at = (s: number) => build([ep('a'), ep('b')], [warmed('a'), warming('b')], s).route;
    expect(reuseUnchangedRoutes([at(10)], [at(20)]).changed).toBe(false);
    expect(reuseUnchangedRoutes([at(10)], [at(121)]).changed).toBe(true);
  });
});
