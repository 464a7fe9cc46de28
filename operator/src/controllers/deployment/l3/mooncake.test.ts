import { describe, expect, it } from 'vitest';
import { validateResource, type DeploymentResource } from '#api';
import { buildDeploymentManifest } from '../../../../../test/support/builders.ts';
import { buildL3PodParts, planL3 } from './plan.ts';
import { buildMooncakeNetworkPolicy, buildMooncakeStoreName, type MooncakePlan } from './mooncake.ts';
import { computeMooncakeStatus, parseMasterGauges } from './mooncake-status.ts';

function parse(mooncake: Record<string, unknown> | undefined, extraConfig?: string) {
  return validateResource(
    buildDeploymentManifest({
      name: 'llama',
      spec: {
        profile: 'hicache',
        hicache: {
          ratio: 2,
          storage: {
            backend: 'mooncake',
            ...(mooncake ? { mooncake } : {}),
            ...(extraConfig ? { extraConfig } : {}),
          },
        },
      },
    }),
  );
}

function plan(mooncake?: Record<string, unknown>): MooncakePlan {
  const r = parse(mooncake);
  if (!r.ok || r.value.kind !== 'Deployment') throw new Error(JSON.stringify(r));
  const root: DeploymentResource = r.value;
  const [p] = planL3(
    root,
    [{ role: 'standalone', profile: 'hicache', hicache: root.spec.hicache }],
    'f00dcafe12345678',
    {
      mooncakeImage: 'registry.example/mooncake:1',
    },
  );
  if (p?.backend !== 'mooncake') throw new Error('no mooncake plan');
  return p;
}

describe('planMooncake', () => {
  it('runs a master and a store node of the declared capacity, per identity, tokenless', () => {
    const p = plan({ capacity: '8Gi' });
    expect(p).toMatchObject({
      store: 'llama-sglang-l3-f00dcafe',
      master: 'llama-sglang-l3-f00dcafe.default.svc:50051',
      capacityBytes: 8 * 2 ** 30,
    });
    const pod = p.workload.spec?.template.spec;
    expect(pod?.automountServiceAccountToken).toBe(false);
    expect(pod?.containers.map((c) => [c.name, c.image, c.command?.[0]])).toEqual([
      ['master', 'registry.example/mooncake:1', 'mooncake_master'],
      ['store', 'registry.example/mooncake:1', 'mooncake_client'],
    ]);
    const store = pod?.containers[1];
    expect(store?.args).toContain(`--global_segment_size=${8 * 2 ** 30}`);
    expect(store?.resources?.requests?.['memory']).toBe(String(8 * 2 ** 30 + 256 * 2 ** 20));
    expect(p.service.spec?.selector).toEqual(p.workload.spec?.selector.matchLabels);
    expect(pod?.tolerations).toBeUndefined();
  });

  it('has the default capacity, and a new store for a new identity', () => {
    expect(plan().capacity).toBe('4Gi');
    expect(buildMooncakeStoreName('llama', 'decode', 'aaaaaaaabbbb')).toBe('llama-decode-l3-aaaaaaaa');
    expect(buildMooncakeStoreName('x'.repeat(70), 'standalone', 'f00d').length).toBeLessThanOrEqual(63);
  });

  it('tells each replica the store, over TCP, lending no memory', () => {
    const env = buildL3PodParts(plan()).env;
    expect(Object.fromEntries(env.map((e) => [e.name, e.value ?? e.valueFrom?.fieldRef?.fieldPath]))).toEqual(
      {
        MOONCAKE_MASTER: 'llama-sglang-l3-f00dcafe.default.svc:50051',
        MOONCAKE_MASTER_METRICS_PORT: '9003',
        MOONCAKE_PROTOCOL: 'tcp',
        MOONCAKE_DEVICE: '',
        MOONCAKE_TE_META_DATA_SERVER: 'P2PHANDSHAKE',
        MOONCAKE_GLOBAL_SEGMENT_SIZE: '0',
        MOONCAKE_LOCAL_HOSTNAME: 'status.podIP',
      },
    );
  });

  it('admits only the Deployment own pods, and the operator on the metrics port', () => {
    const r = parse(undefined);
    if (!r.ok || r.value.kind !== 'Deployment') throw new Error('invalid');
    const np = buildMooncakeNetworkPolicy(r.value, plan(), { namespace: 'ops', podLabels: { app: 'op' } });
    expect(np.spec.ingress).toEqual([
      { from: [{ podSelector: { matchLabels: { 'cacheroute.dev/deployment': 'llama' } } }] },
      {
        from: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ops' } },
            podSelector: { matchLabels: { app: 'op' } },
          },
        ],
        ports: [{ protocol: 'TCP', port: 9003 }],
      },
    ]);
  });
});

describe('the mooncake API', () => {
  it('bounds the capacity and refuses a master named in the extra config', () => {
    const refused = (r: ReturnType<typeof parse>) => (r.ok ? [] : r.issues.map((i) => i.message).join('; '));
    expect(refused(parse({ capacity: '2Ti' }))).toContain('between 64Mi and 1Ti');
    expect(refused(parse({ capacity: '32Mi' }))).toContain('between 64Mi and 1Ti');
    expect(refused(parse({ capacity: '4G' }))).toContain('a whole number of Mi, Gi or Ti');
    expect(parse({ capacity: '1Ti' }).ok).toBe(true);
    expect(refused(parse(undefined, '{"master_server_address":"10.0.0.9:50051"}'))).toContain(
      'remove master_server_address',
    );
    expect(parse(undefined, '{"extra_backend_tag":"t"}').ok).toBe(true);
  });
});

describe('computeMooncakeStatus', () => {
  const gauges = (text: string) => ({ ok: true as const, gauges: parseMasterGauges(text) });

  it('is reachable once the master counts the segment, with its usage', () => {
    const s = computeMooncakeStatus(
      plan(),
      { ip: '10.0.0.5', ready: true },
      gauges(
        '# HELP master_key_count keys\nmaster_key_count 48\nmaster_allocated_bytes 1572864\nmaster_total_capacity_bytes 4294967296\n',
      ),
    );
    expect(s).toMatchObject({
      backend: 'mooncake',
      reachable: true,
      capacity: '4Gi',
      capacityBytes: 4294967296,
      usedBytes: 1572864,
      objects: 48,
    });
  });

  it('says why not: starting, unreachable, no segment', () => {
    expect(computeMooncakeStatus(plan(), undefined, undefined)).toMatchObject({
      reachable: false,
      reason: 'StoreStarting',
    });
    expect(
      computeMooncakeStatus(plan(), { ip: '10.0.0.5', ready: true }, { ok: false, error: 'ECONNREFUSED' }),
    ).toMatchObject({ reachable: false, reason: 'MasterUnreachable' });
    expect(
      computeMooncakeStatus(
        plan(),
        { ip: '10.0.0.5', ready: true },
        gauges('master_total_capacity_bytes 0\n'),
      ),
    ).toMatchObject({ reachable: false, reason: 'NoSegment' });
  });
});
