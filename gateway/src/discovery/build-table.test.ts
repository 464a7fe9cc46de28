import { describe, expect, it } from 'vitest';
import { Admission, RequestRules, ResultReuse, RoutingSettings } from '#api';
import { computeCacheSalt } from '#sglang/salt.ts';
import { loadSample } from '../../../test/support/samples.ts';
import { buildRoutingTable, DEFAULT_CACHE_NAMESPACE_PREFIX, reuseUnchangedRoutes } from './build-table.ts';

type Json = Record<string, unknown>;
type StatusEndpoint = Json & { pod: string; role: string };

const T0 = '2026-01-01T00:00:00Z';
const T1 = '2026-02-01T00:00:00Z';

const ep = (pod: string, over: Json = {}): StatusEndpoint => ({
  pod,
  ip: '10.244.0.5',
  port: 30000,
  role: 'standalone',
  ready: true,
  verified: true,
  fingerprint: 'fp1',
  restartCount: 0,
  ...over,
});

interface DepOptions {
  ns?: string;
  name?: string;
  created?: string;
  served?: string;
  endpoints?: StatusEndpoint[];
  routable?: boolean | undefined;
  pd?: boolean;
  deleting?: boolean;
  /** spec.traffic.weight */
  weight?: number;
  /** spec.parallelism.data */
  dataParallel?: number;
}

function dep(o: DepOptions = {}): Json {
  const doc = loadSample(
    o.pd ? 'deployment-pd-hisparse.yaml' : 'deployment-dense.yaml',
  ) as unknown as Json & {
    spec: { model: Json };
  };
  doc['metadata'] = {
    name: o.name ?? 'llama',
    namespace: o.ns ?? 'team-a',
    creationTimestamp: o.created ?? T0,
    ...(o.deleting ? { deletionTimestamp: T1 } : {}),
  };
  if (o.served) doc.spec.model['servedName'] = o.served;
  if (o.weight !== undefined) (doc.spec as Json)['traffic'] = { weight: o.weight };
  if (o.dataParallel !== undefined) (doc.spec as Json)['parallelism'] = { data: o.dataParallel };
  doc['status'] = {
    identity: { deploymentId: 'llama-3-1-8b-instruct-r1', fingerprint: 'fp1' },
    endpoints: o.endpoints ?? [ep('p0')],
    ...(o.routable === undefined && 'routable' in o
      ? {}
      : {
          routable: {
            value: o.routable ?? true,
            reason: o.routable === false ? 'NoVerifiedEndpoints' : 'Ok',
          },
        }),
  };
  return doc;
}

interface PolOptions {
  ns?: string;
  name?: string;
  created?: string;
  targets?: string[];
  /** Status targets: name → salt (accepted) or false (refused). */
  status?: Record<string, string | false>;
  statusDeploymentId?: string;
  policy?: string;
}

function pol(o: PolOptions = {}): Json {
  const doc = loadSample('cachepolicy.yaml') as unknown as Json & { spec: Json };
  doc['metadata'] = {
    name: o.name ?? 'pol',
    namespace: o.ns ?? 'team-a',
    creationTimestamp: o.created ?? T0,
  };
  doc.spec['targetRefs'] = (o.targets ?? ['llama']).map((name) => ({ kind: 'Deployment', name }));
  doc.spec['routing'] = { policy: o.policy ?? 'prefix-hash' };
  doc['status'] = {
    targets: Object.entries(o.status ?? { llama: 'salt-from-status' }).map(([name, salt]) =>
      salt === false
        ? { name, accepted: false, reason: 'Conflicted' }
        : {
            name,
            accepted: true,
            reason: 'Accepted',
            cacheSalt: salt,
            deploymentId: o.statusDeploymentId ?? 'llama-3-1-8b-instruct-r1',
          },
    ),
  };
  return doc;
}

const DEFAULT_SALT = (ns: string) =>
  computeCacheSalt(`${DEFAULT_CACHE_NAMESPACE_PREFIX}${ns}`, 'llama-3-1-8b-instruct-r1');

describe('buildRoutingTable: endpoints fail closed', () => {
  it('leaves out an endpoint that reports more ranks than its spec declares, and says why', () => {
    const events = { port: 5557, ranks: 2 ** 32, topic: 'kv', blockSize: 16 };
    const { routes, issues } = buildRoutingTable({
      deployments: [dep({ endpoints: [ep('a', { events }), ep('b')] })],
      policies: [],
    });
    expect(routes[0]?.endpoints.map((e) => e.id)).toEqual(['team-a/b']);
    expect(issues).toEqual([
      {
        code: 'RuntimeOutOfBounds',
        path: 'Deployment team-a/llama',
        model: 'llama-8b',
        message: `endpoint team-a/a reports ${2 ** 32} data-parallel ranks; its spec declares 1 (parallelism.data): left out of routing`,
      },
    ]);
  });

  it.each([
    ['ready and verified', ep('a'), ['team-a/a']],
    ['not ready', ep('a', { ready: false }), []],
    ['not verified', ep('a', { verified: false }), []],
    ['neither', ep('a', { ready: false, verified: false }), []],
    ['no IP yet', ep('a', { ip: '' }), []],
    ['a role the spec does not declare', ep('a', { role: 'prefill' }), []],
  ])('standalone endpoint %s', (_name, endpoint, ids) => {
    const { routes } = buildRoutingTable({ deployments: [dep({ endpoints: [endpoint] })], policies: [] });
    expect(routes.map((r) => r.endpoints.map((e) => e.id))).toEqual([ids]);
  });

  it('marks an endpoint whose verified status reports priority scheduling: the gateway stamps it', () => {
    const on = { reported: { priorityScheduling: true } };
    const { routes } = buildRoutingTable({
      deployments: [
        dep({
          endpoints: [
            ep('a', on),
            ep('b', { reported: { priorityScheduling: false } }),
            ep('c'),
            ep('d', { ...on, verified: false }),
          ],
        }),
      ],
      policies: [],
    });
    expect(routes[0]?.endpoints.map((e) => [e.id, e.priorityScheduling])).toEqual([
      ['team-a/a', true],
      ['team-a/b', undefined],
      ['team-a/c', undefined],
    ]);
  });

  it('maps a status endpoint to a route endpoint', () => {
    const { routes } = buildRoutingTable({
      deployments: [
        dep({ endpoints: [ep('a', { restartCount: 2 }), ep('b', { ip: 'fd00::5', port: 31000 })] }),
      ],
      policies: [],
    });
    expect(routes[0]?.endpoints).toEqual([
      {
        id: 'team-a/a',
        url: 'http://10.244.0.5:30000',
        role: 'standalone',
        fingerprint: 'fp1',
        verified: true,
        ready: true,
        generation: '10.244.0.5#2',
      },
      {
        id: 'team-a/b',
        url: 'http://[fd00::5]:31000',
        role: 'standalone',
        fingerprint: 'fp1',
        verified: true,
        ready: true,
        generation: 'fd00::5#0',
      },
    ]);
    expect(routes[0]).toMatchObject({ model: 'llama-8b', deployment: 'team-a/llama', fingerprint: 'fp1' });
  });

  it("joins the runtime's advertised event ports to the pod IP, one address per rank", () => {
    const events = { port: 5557, ranks: 2, topic: 'kv', blockSize: 16, replayPort: 5559, loadPort: 5561 };
    const { routes } = buildRoutingTable({
      deployments: [
        dep({
          dataParallel: 2,
          endpoints: [ep('a', { events }), ep('b', { ip: 'fd00::5', events: { ...events, ranks: 1 } })],
        }),
      ],
      policies: [],
    });
    expect(routes[0]?.endpoints.map((e) => e.events)).toEqual([
      {
        kv: ['tcp://10.244.0.5:5557', 'tcp://10.244.0.5:5558'],
        replay: ['tcp://10.244.0.5:5559', 'tcp://10.244.0.5:5560'],
        load: ['tcp://10.244.0.5:5561', 'tcp://10.244.0.5:5562'],
        loadTopic: 'load',
        topic: 'kv',
        blockSize: 16,
      },
      {
        kv: ['tcp://[fd00::5]:5557'],
        replay: ['tcp://[fd00::5]:5559'],
        load: ['tcp://[fd00::5]:5561'],
        loadTopic: 'load',
        topic: 'kv',
        blockSize: 16,
      },
    ]);
  });

  it.each([
    ['routable false', false],
    ['routable absent (no status from the operator yet)', undefined],
  ])('%s: the model stays listed with no endpoints, and an issue says why', (_name, routable) => {
    const { routes, issues } = buildRoutingTable({ deployments: [dep({ routable })], policies: [] });
    expect(routes).toHaveLength(1);
    expect(routes[0]?.endpoints).toEqual([]);
    expect(issues).toEqual([expect.objectContaining({ code: 'NotRoutable', model: 'llama-8b' })]);
  });

  it('names the roles whose shared L3 tier the status says is reachable, and only those', () => {
    const tier = (role: string, reachable: boolean): Json => ({
      role,
      backend: 'file',
      claim: `llama-${role}-l3`,
      reachable,
    });
    const withL3 = (l3: Json[]): Json => {
      const d = dep({ pd: true });
      (d['status'] as Json)['l3'] = l3;
      return d;
    };
    const rolesOf = (d: Json) => buildRoutingTable({ deployments: [d], policies: [] }).routes[0]?.l3Roles;
    expect(rolesOf(withL3([tier('prefill', true), tier('decode', false)]))).toEqual(['prefill']);
    expect(rolesOf(withL3([tier('prefill', false)]))).toBeUndefined();
    expect(rolesOf(dep())).toBeUndefined();
  });

  it('leaves out a Deployment that is being deleted', () => {
    const { routes } = buildRoutingTable({ deployments: [dep({ deleting: true })], policies: [] });
    expect(routes).toEqual([]);
  });
});

describe('buildRoutingTable: prefill/decode', () => {
  const P = (pod: string, over: Json = {}) => ep(pod, { role: 'prefill', ...over });
  const D = (pod: string, over: Json = {}) => ep(pod, { role: 'decode', ...over });

  it.each([
    ['a same-revision pair', [P('p'), D('d')], ['team-a/p', 'team-a/d']],
    ['decode only (HiSparse decode never alone)', [D('d1'), D('d2')], []],
    ['prefill only', [P('p')], []],
    ['revisions never mix', [P('p', { fingerprint: 'fp0' }), D('d')], []],
    [
      'a prefill without a decode of its revision is left out',
      [P('p-old', { fingerprint: 'fp0' }), P('p'), D('d')],
      ['team-a/p', 'team-a/d'],
    ],
    ['an unverified prefill does not pair', [P('p', { verified: false }), D('d')], []],
    [
      'standalone endpoints on a PD deployment are ignored',
      [ep('s'), P('p'), D('d')],
      ['team-a/p', 'team-a/d'],
    ],
  ])('%s', (_name, endpoints, ids) => {
    const { routes } = buildRoutingTable({ deployments: [dep({ pd: true, endpoints })], policies: [] });
    expect(routes[0]?.endpoints.map((e) => e.id)).toEqual(ids);
  });

  it('a prefill carries its bootstrap port, or the spec default', () => {
    const { routes } = buildRoutingTable({
      deployments: [dep({ pd: true, endpoints: [P('p1', { bootstrapPort: 9100 }), P('p2'), D('d')] })],
      policies: [],
    });
    expect(routes[0]?.endpoints.map((e) => [e.id, e.bootstrapPort])).toEqual([
      ['team-a/p1', 9100],
      ['team-a/p2', 8998],
      ['team-a/d', undefined],
    ]);
  });
});

describe('buildRoutingTable: the governing CachePolicy', () => {
  it.each([
    ['an accepted policy: its status salt', [pol()], 'salt-from-status', 'prefix-hash'],
    ['no policy: the namespace default', [], DEFAULT_SALT('team-a'), 'cache-aware'],
    [
      'a refused policy: the default',
      [pol({ status: { llama: false } })],
      DEFAULT_SALT('team-a'),
      'cache-aware',
    ],
    [
      'a policy the operator has not seen yet: the default',
      [pol({ status: {} })],
      DEFAULT_SALT('team-a'),
      'cache-aware',
    ],
    [
      'a policy whose spec no longer targets it (stale status): the default',
      [pol({ targets: ['other'] })],
      DEFAULT_SALT('team-a'),
      'cache-aware',
    ],
    [
      'a policy in another namespace: the default',
      [pol({ ns: 'team-b' })],
      DEFAULT_SALT('team-a'),
      'cache-aware',
    ],
    [
      'status computed for an older deploymentId: the salt of the current one',
      [pol({ statusDeploymentId: 'llama-old' })],
      computeCacheSalt('team-a', 'llama-3-1-8b-instruct-r1'),
      'prefix-hash',
    ],
    [
      'two accepted (stale status): the oldest wins, as the operator decides',
      [
        pol({ name: 'newer', created: T1, status: { llama: 'salt-newer' }, policy: 'round-robin' }),
        pol({ name: 'older', created: T0, status: { llama: 'salt-older' }, policy: 'least-load' }),
      ],
      'salt-older',
      'least-load',
    ],
  ])('%s', (_name, policies, salt, policy) => {
    const { routes } = buildRoutingTable({ deployments: [dep()], policies });
    expect(routes[0]?.salt).toBe(salt);
    expect(routes[0]?.routing.policy).toBe(policy);
  });

  it("tenants share prefixes only where the policy's tenancy.sharePrefixes says so", () => {
    const shared = pol();
    (shared['spec'] as Json)['tenancy'] = { sharePrefixes: true };
    expect(buildRoutingTable({ deployments: [dep()], policies: [shared] }).routes[0]).toMatchObject({
      sharePrefixesAcrossTenants: true,
    });
    for (const policies of [[pol()], []])
      expect(
        buildRoutingTable({ deployments: [dep()], policies }).routes[0]?.sharePrefixesAcrossTenants,
      ).toBe(undefined);
  });

  it('the default salt differs per Kubernetes namespace and from any CachePolicy salt', () => {
    const a = DEFAULT_SALT('team-a');
    expect(a).not.toBe(DEFAULT_SALT('team-b'));
    expect(a).not.toBe(computeCacheSalt('team-a', 'llama-3-1-8b-instruct-r1'));
  });

  it("takes the policy's settings, with zod defaults for what it leaves out", () => {
    const { routes } = buildRoutingTable({ deployments: [dep()], policies: [pol()] });
    expect(routes[0]?.routing).toEqual(RoutingSettings.parse({ policy: 'prefix-hash' }));
    expect(routes[0]?.admission).toEqual(
      Admission.parse({ maxConcurrency: 128, maxQueue: 512, queueTimeoutSeconds: 20 }),
    );
    expect(routes[0]?.reuse).toEqual(
      ResultReuse.parse({ enabled: true, ttlSeconds: 3600, reusableWhen: ['temperatureZero', 'fixedSeed'] }),
    );
  });

  it("takes the policy's request rules; without a policy the route has none (the defaults hold)", () => {
    const strict = pol();
    (strict['spec'] as Json)['requests'] = { maxN: 2, allowPrivilegedFields: ['priority'] };
    expect(buildRoutingTable({ deployments: [dep()], policies: [strict] }).routes[0]?.requests).toEqual(
      RequestRules.parse({ maxN: 2, allowPrivilegedFields: ['priority'] }),
    );
    expect(buildRoutingTable({ deployments: [dep()], policies: [] }).routes[0]?.requests).toBeUndefined();
  });

  it('without a policy: every setting at its zod default', () => {
    const { routes } = buildRoutingTable({ deployments: [dep()], policies: [] });
    expect(routes[0]).toMatchObject({
      routing: RoutingSettings.parse({}),
      admission: Admission.parse({}),
      reuse: ResultReuse.parse({}),
    });
  });
});

describe('buildRoutingTable: one Deployment per served name and namespace', () => {
  it.each([
    [
      'two in one namespace: the older keeps the name',
      [dep({ name: 'b', created: T1 }), dep({ name: 'a', created: T0 })],
      'team-a/a',
      ['team-a/b'],
    ],
    [
      'created in the same second: the name decides',
      [dep({ name: 'b' }), dep({ name: 'a' })],
      'team-a/a',
      ['team-a/b'],
    ],
    [
      'even when the older one is not routable (a name never moves on health)',
      [dep({ name: 'b', created: T1 }), dep({ name: 'a', created: T0, routable: false })],
      'team-a/a',
      ['team-a/b'],
    ],
    [
      'a deleted owner hands the name over',
      [dep({ name: 'b', created: T1 }), dep({ name: 'a', created: T0, deleting: true })],
      'team-a/b',
      [],
    ],
  ])('%s', (_name, deployments, servedBy, refused) => {
    const { routes, issues } = buildRoutingTable({ deployments, policies: [] });
    expect(routes.map((r) => r.deployment)).toEqual([servedBy]);
    expect(issues.filter((i) => i.code === 'DuplicateModel')).toEqual(
      refused.map((d) => ({ code: 'DuplicateModel', path: `Deployment ${d}`, model: 'llama-8b', servedBy })),
    );
  });

  it('another namespace serving the name takes nothing away: each keeps its claim, the younger is reported', () => {
    const { routes, issues } = buildRoutingTable({
      deployments: [
        dep({ ns: 'team-x', name: 'llama', created: T1 }),
        dep({ ns: 'team-y', name: 'squat', created: T0 }),
        dep({ ns: 'team-z', name: 'late', created: T1 }),
      ],
      policies: [],
    });
    expect(routes.map((r) => [r.deployment, r.sharedWith])).toEqual([
      ['team-y/squat', ['team-x', 'team-z']],
      ['team-x/llama', ['team-y', 'team-z']],
      ['team-z/late', ['team-x', 'team-y']],
    ]);
    expect(issues.filter((i) => i.code === 'DuplicateModel')).toEqual([]);
    expect(issues.filter((i) => i.code === 'SharedModelName')).toEqual(
      ['team-x/llama', 'team-z/late'].map((d) => ({
        code: 'SharedModelName',
        path: `Deployment ${d}`,
        model: 'llama-8b',
        firstClaimedBy: 'team-y/squat',
        message: expect.stringContaining('namespace team-y served'),
      })),
    );
  });

  it('a name served in one namespace is not marked shared', () => {
    const { routes } = buildRoutingTable({ deployments: [dep()], policies: [] });
    expect(routes[0]?.sharedWith).toBeUndefined();
  });

  it('a weighted split: the Deployments of one namespace that all set a weight share the name', () => {
    const { routes, issues } = buildRoutingTable({
      deployments: [
        dep({ name: 'r1', created: T0, weight: 90 }),
        dep({ name: 'r2', created: T1, weight: 10 }),
        dep({ name: 'r3', created: T1 }), // no weight: refused as before
        dep({ ns: 'team-b', name: 'r4', created: T1, weight: 50 }), // another namespace: its own claim
      ],
      policies: [],
    });
    expect(routes.map((r) => [r.deployment, r.weight])).toEqual([
      ['team-a/r1', 90],
      ['team-a/r2', 10],
      ['team-b/r4', 50],
    ]);
    expect(issues.filter((i) => i.code === 'DuplicateModel').map((i) => i.path)).toEqual([
      'Deployment team-a/r3',
    ]);
    // The oldest without a weight keeps the name alone, as before.
    const legacy = buildRoutingTable({
      deployments: [dep({ name: 'r1', created: T0 }), dep({ name: 'r2', created: T1, weight: 10 })],
      policies: [],
    });
    expect(legacy.routes.map((r) => r.deployment)).toEqual(['team-a/r1']);
  });

  it('different served names live side by side, sorted', () => {
    const { routes, issues } = buildRoutingTable({
      deployments: [dep({ name: 'z', served: 'zeta' }), dep({ name: 'a', served: 'alpha' })],
      policies: [],
    });
    expect(routes.map((r) => r.model)).toEqual(['alpha', 'zeta']);
    expect(issues).toEqual([]);
  });
});

describe('buildRoutingTable: invalid objects', () => {
  it('refuses an invalid object with a reason and keeps the rest', () => {
    const bad = dep({ name: 'bad', served: 'bad' }) as Json & { spec: { runtime: Json } };
    bad.spec.runtime['image'] = 'lmsysorg/sglang:latest';
    const badPolicy = { ...pol(), kind: 'CachePolicy', spec: {} };
    const { routes, issues } = buildRoutingTable({ deployments: [bad, dep()], policies: [badPolicy] });
    expect(routes.map((r) => r.model)).toEqual(['llama-8b']);
    expect(issues).toEqual([
      {
        code: 'InvalidObject',
        path: 'Deployment team-a/bad',
        message: expect.stringContaining('runtime.image must be pinned by digest'),
      },
      {
        code: 'InvalidObject',
        path: 'CachePolicy team-a/pol',
        message: expect.stringContaining('targetRefs'),
      },
    ]);
  });
});

describe('reuseUnchangedRoutes', () => {
  const build = (deployments: Json[]) => buildRoutingTable({ deployments, policies: [] }).routes;

  it('keeps the previous object of a model that did not change', () => {
    const before = build([dep({ name: 'a', served: 'a' }), dep({ name: 'b', served: 'b' })]);
    const after = build([
      dep({ name: 'a', served: 'a' }),
      dep({ name: 'b', served: 'b', endpoints: [ep('p0'), ep('p1')] }),
    ]);
    const { routes, changed } = reuseUnchangedRoutes(before, after);
    expect(changed).toBe(true);
    expect(routes[0]).toBe(before[0]);
    expect(routes[1]).toBe(after[1]);
  });

  it.each([
    ['nothing changed', [dep()], [dep()], false],
    ['a model removed', [dep({ name: 'a', served: 'a' }), dep()], [dep()], true],
    ['a model added', [dep()], [dep(), dep({ name: 'a', served: 'a' })], true],
  ])('%s → changed %s', (_name, before, after, changed) => {
    expect(reuseUnchangedRoutes(build(before), build(after)).changed).toBe(changed);
  });
});
