// Tenants of the gateway against the real parts: Tenant objects and labelled
// key Secrets through a real kube-apiserver (CEL refusals, discovery, key
// rotation, a Secret without the label), and rate limits shared by two
// gateway replicas through a real redis-server.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import type { SecretLocation } from '#api/gateway-keys.ts';
import { KubeClient } from '#kube/client.ts';
import { build } from '../../../gateway/src/app.ts';
import { ManualClock } from '../../support/manual-clock.ts';
import { TenantWatcher } from '../../../gateway/src/discovery/tenant-watcher.ts';
import { StaticRoutingTable } from '../../../gateway/src/routing/table.ts';
import { MemoryRateLimiter } from '../../../gateway/src/tenancy/limiter.ts';
import { WINDOW_MS } from '../../../gateway/src/tenancy/rate-window.ts';
import { RedisRateLimiter } from '../../../gateway/src/tenancy/redis-limiter.ts';
import type { Tenant } from '../../../gateway/src/tenancy/tenant.ts';
import { createUserKubeconfig } from '../../support/controlplane.ts';
import { createTestNamespace, eventually, kubectl, kubectlOk } from '../../support/kubectl.ts';
import { startTestOperator } from '../../support/operator/start.ts';
import { startRedis, type RunningRedis } from '../../support/redis.ts';
import { REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');
const controlPlane = inject('controlPlane');
const CRD_DIR = join(REPO_ROOT, 'crds');
const KEY_1 = 'first-key-'.padEnd(40, '1');
const KEY_2 = 'second-key-'.padEnd(40, '2');

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const tenant = (spec: object = {}) => ({
  apiVersion: 'cacheroute.dev/v1alpha1',
  kind: 'Tenant',
  metadata: { name: 'team-a' },
  spec: { apiKeys: { secretRef: { name: 'team-a-keys' } }, models: ['llama-8b'], ...spec },
});

const keySecret = (keys: Record<string, string>, labelled = true) => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: 'team-a-keys', labels: labelled ? { 'cacheroute.dev/api-keys': 'true' } : {} },
  stringData: keys,
});

async function apply(ns: string, doc: unknown): Promise<void> {
  await kubectlOk(['apply', '-n', ns, '-f', '-'], { kubeconfig, input: JSON.stringify(doc) });
}

/**
 * The gateway as the chart grants it, with an operator keeping its keys Secret: the Secret is
 * in a namespace of its own (the gateway's, which the operator does not watch), and the
 * gateway's identity may list and watch Tenants and read that one Secret by name, nothing else.
 */
async function startGateway(ns: string): Promise<{ app: FastifyInstance; keysSecret: SecretLocation }> {
  const gatewayNs = await createTestNamespace(kubeconfig, 'gw-keys');
  const keysSecret = { namespace: gatewayNs, name: 'gateway-keys' };
  await startTestOperator(kubeconfig, [ns], { gatewayKeysSecret: keysSecret });
  const user = `gateway-${gatewayNs}`;
  const grants = [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: user },
      rules: [{ apiGroups: ['cacheroute.dev'], resources: ['tenants'], verbs: ['list', 'watch'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: user },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: user },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'gateway-keys', namespace: gatewayNs },
      rules: [
        {
          apiGroups: [''],
          resources: ['secrets'],
          resourceNames: ['gateway-keys'],
          verbs: ['list', 'watch'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'gateway-keys', namespace: gatewayNs },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'gateway-keys' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    },
  ];
  await kubectlOk(['apply', '-f', '-'], {
    kubeconfig,
    input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: grants }),
  });
  const canI = async (args: string[]): Promise<boolean> =>
    (await kubectl(['auth', 'can-i', ...args, `--as=${user}`], { kubeconfig })).code === 0;
  await eventually(async () =>
    expect(await canI(['list', 'secrets/gateway-keys', '-n', gatewayNs])).toBe(true),
  );
  expect(await canI(['list', 'secrets', '-n', ns])).toBe(false);
  expect(await canI(['get', 'secrets/team-a-keys', '-n', ns])).toBe(false);
  expect(await canI(['list', 'secrets', '-n', gatewayNs])).toBe(false);
  const kc = new KubeConfig();
  kc.loadFromString(readFileSync(await createUserKubeconfig(controlPlane, { user }), 'utf8'));
  const client = await KubeClient.fromKubeConfig(kc);
  const watcher = new TenantWatcher({ client, namespaces: [ns], keysSecret, coalesceMs: 20 });
  const table = new StaticRoutingTable([
    {
      model: 'llama-8b',
      deployment: `${ns}/llama-8b`,
      fingerprint: 'fp1',
      salt: 's',
      routing: RoutingSettings.parse({}),
      admission: Admission.parse({}),
      reuse: ResultReuse.parse({}),
      endpoints: [],
    },
  ]);
  const app = build({ table, tenants: watcher.directory });
  watcher.start();
  cleanups.push(async () => {
    await app.close();
    await watcher.stop();
    await client.close();
  });
  await eventually(() => expect(watcher.directory.ready).toBe(true), { timeoutMs: 30_000 });
  return { app, keysSecret };
}

/** The kept Secret's data, decoded: what anyone who may read it learns. */
async function readKept(where: SecretLocation): Promise<string> {
  const secret = JSON.parse(
    await kubectlOk(['get', 'secret', where.name, '-n', where.namespace, '-o', 'json'], { kubeconfig }),
  ) as { data?: Record<string, string> };
  return Object.values(secret.data ?? {})
    .map((v) => Buffer.from(v, 'base64').toString('utf8'))
    .join('\n');
}

const modelsWith = async (app: FastifyInstance, key: string): Promise<number> =>
  (await app.inject({ url: '/v1/models', headers: { authorization: `Bearer ${key}` } })).statusCode;

describe('Tenants through the API server', () => {
  beforeAll(async () => {
    await kubectlOk(['apply', '--server-side', '-f', CRD_DIR], { kubeconfig });
    await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', CRD_DIR], { kubeconfig });
  });

  it('refuses a bad Tenant at apply with a message that says what to change', async () => {
    const ns = await createTestNamespace(kubeconfig, 'tenant-bad');
    for (const [spec, message] of [
      [{ models: [] }, 'spec.models in body should have at least 1 items'],
      [{ priority: 101 }, 'spec.priority in body should be less than or equal to 100'],
      [
        { limits: { requestsPerMinute: 0 } },
        'spec.limits.requestsPerMinute in body should be greater than or equal to 1',
      ],
    ] as const) {
      const r = await kubectl(['apply', '-n', ns, '-f', '-'], {
        kubeconfig,
        input: JSON.stringify(tenant(spec)),
      });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(message);
    }
  });

  it('follows keys as the Secret changes: rotation, an unlabelled Secret, a deleted Tenant', async () => {
    const ns = await createTestNamespace(kubeconfig, 'tenant-keys');
    await apply(ns, tenant());
    await apply(ns, keySecret({ k1: KEY_1 }));
    const { app, keysSecret } = await startGateway(ns);
    await eventually(async () => expect(await modelsWith(app, KEY_1)).toBe(200));
    expect(await modelsWith(app, KEY_2)).toBe(401);
    // The gateway's Secret holds digests: no key, in clear or base64.
    const kept = await readKept(keysSecret);
    expect(kept).toContain(`${ns}/team-a-keys`);
    for (const leak of [KEY_1, Buffer.from(KEY_1).toString('base64')]) expect(kept).not.toContain(leak);

    // Rotation: add the new key, then drop the old one.
    await apply(ns, keySecret({ k1: KEY_1, k2: KEY_2 }));
    await eventually(async () => expect(await modelsWith(app, KEY_2)).toBe(200));
    expect(await modelsWith(app, KEY_1)).toBe(200);
    await kubectlOk(
      [
        'patch',
        'secret',
        'team-a-keys',
        '-n',
        ns,
        '--type=json',
        '-p',
        '[{"op":"remove","path":"/data/k1"}]',
      ],
      {
        kubeconfig,
      },
    );
    await eventually(async () => expect(await modelsWith(app, KEY_1)).toBe(401));
    expect(await modelsWith(app, KEY_2)).toBe(200);

    // Without the label the gateway does not see the Secret, and /status says what to add.
    await kubectlOk(['label', 'secret', 'team-a-keys', '-n', ns, 'cacheroute.dev/api-keys-'], { kubeconfig });
    await eventually(async () => expect(await modelsWith(app, KEY_2)).toBe(401));
    const status = (await app.inject({ url: '/status.json' })).json<{
      auth: { issues: { tenant: string; code: string; message: string }[] };
    }>();
    expect(status.auth.issues).toEqual([
      expect.objectContaining({
        tenant: `${ns}/team-a`,
        code: 'SecretNotFound',
        message: expect.stringContaining('cacheroute.dev/api-keys: "true"'),
      }),
    ]);

    await kubectlOk(['label', 'secret', 'team-a-keys', '-n', ns, 'cacheroute.dev/api-keys=true'], {
      kubeconfig,
    });
    await eventually(async () => expect(await modelsWith(app, KEY_2)).toBe(200));
    await kubectlOk(['delete', 'tenant', 'team-a', '-n', ns], { kubeconfig });
    await eventually(async () => expect(await modelsWith(app, KEY_2)).toBe(401));
    // No Tenant names the Secret any more: it leaves the gateway's Secret.
    await eventually(async () => expect(await readKept(keysSecret)).not.toContain('team-a-keys'));
  });

  it("a Secret's deletion reaches the gateway; a Secret no Tenant names never leaves its namespace", async () => {
    const ns = await createTestNamespace(kubeconfig, 'tenant-del');
    await apply(ns, tenant());
    await apply(ns, keySecret({ k1: KEY_1 }));
    await apply(ns, {
      ...keySecret({ k: KEY_2 }),
      metadata: { name: 'unnamed', labels: { 'cacheroute.dev/api-keys': 'true' } },
    });
    const { app, keysSecret } = await startGateway(ns);
    await eventually(async () => expect(await modelsWith(app, KEY_1)).toBe(200));
    expect(await modelsWith(app, KEY_2)).toBe(401);
    expect(await readKept(keysSecret)).not.toContain(`${ns}/unnamed`);
    await kubectlOk(['delete', 'secret', 'team-a-keys', '-n', ns], { kubeconfig });
    await eventually(async () => expect(await modelsWith(app, KEY_1)).toBe(401));
  });
});

describe('rate limits across gateway replicas (Redis)', () => {
  let redis: RunningRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis.stop();
  });

  const tenantWith = (limits: Tenant['limits'], id: string): Tenant => ({
    id,
    deployments: new Set(),
    limits,
    priority: 0,
  });

  it('two replicas share one limit: together they admit requestsPerMinute, not twice that', async () => {
    const clock = new ManualClock();
    clock.advance(WINDOW_MS * 1000);
    const replicas = [0, 1].map(() => new RedisRateLimiter({ url: redis.url, clock }));
    cleanups.push(async () => void (await Promise.all(replicas.map((r) => r.close()))));
    const t = tenantWith({ requestsPerMinute: 10 }, `ns/shared-${Date.now()}`);
    const decisions = [];
    for (let i = 0; i < 14; i++)
      decisions.push(await (replicas[i % 2] as RedisRateLimiter).admit(t, { requests: 1, tokens: 5 }));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(10);
    expect(decisions.slice(10).every((d) => !d.allowed && d.limited === 'requests')).toBe(true);
    expect(replicas.map((r) => r.errors)).toEqual([0, 0]);
  });

  it('decides as the in-memory limiter does (one rule, in Lua and TypeScript)', async () => {
    const clock = new ManualClock();
    clock.advance(WINDOW_MS * 2000);
    const redisLimiter = new RedisRateLimiter({ url: redis.url, clock });
    cleanups.push(() => redisLimiter.close());
    const memory = new MemoryRateLimiter(clock);
    const t = tenantWith({ requestsPerMinute: 20, tokensPerMinute: 3000 }, `ns/parity-${Date.now()}`);
    let seed = 7;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    let disagreements = 0;
    let refused = 0;
    for (let i = 0; i < 400; i++) {
      clock.advance(rand(2500));
      // Mostly single requests, now and then a batch (prompts x n) of up to 6.
      const cost = { requests: rand(4) === 0 ? 1 + rand(6) : 1, tokens: rand(300) };
      const [a, b] = [await redisLimiter.admit(t, cost), await memory.admit(t, cost)];
      if (JSON.stringify(a) !== JSON.stringify(b)) disagreements++;
      if (!a.allowed) refused++;
      if (a.allowed && b.allowed && rand(2) === 0) {
        const completion = rand(200);
        redisLimiter.charge(t, completion);
        memory.charge(t, completion);
      }
    }
    expect({ disagreements, refusedSome: refused > 20 }).toEqual({ disagreements: 0, refusedSome: true });
  });

  it('a Redis that does not answer lets requests in and counts the failure', async () => {
    const limiter = new RedisRateLimiter({
      url: 'redis://127.0.0.1:1',
      clock: new ManualClock(),
      commandTimeoutMs: 200,
    });
    cleanups.push(() => limiter.close());
    expect(
      await limiter.admit(tenantWith({ requestsPerMinute: 1 }, 'ns/x'), { requests: 1, tokens: 1 }),
    ).toEqual({ allowed: true });
    expect(limiter.errors).toBe(1);
  });
});
