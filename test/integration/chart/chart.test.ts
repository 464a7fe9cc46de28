// The Helm chart without installing it: `helm lint`; `helm template` golden files,
// one per values set in testdata/ (UPDATE_GOLDEN=1 rewrites them); every
// rendered object accepted by the real API server (--dry-run=server); the values
// reaching the objects; values.schema.json and the templates refusing bad values
// with messages that say what to change; and the gateway's RBAC being exactly what
// discovery needs, exercised as the gateway's ServiceAccount.
// `helm install` and `helm upgrade` are in test/e2e/chart.test.ts.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { parse, parseAllDocuments } from 'yaml';
import { beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { EndpointSlicePeers } from '../../../gateway/src/discovery/peer-slices.ts';
import { RuntimeKeyWatcher } from '../../../gateway/src/discovery/runtime-key-watcher.ts';
import { TenantWatcher } from '../../../gateway/src/discovery/tenant-watcher.ts';
import { QualificationWatcher } from '../../../gateway/src/discovery/qualification-watcher.ts';
import { DiscoveryWatcher } from '../../../gateway/src/discovery/watcher.ts';
import { renderManifest } from '../../../operator/src/controllers/deployment/render.ts';
import { KubeClient, type RequestInfo } from '#kube/client.ts';
import { createUserKubeconfig } from '../../support/controlplane.ts';
import { CHART_DIR, helm, KUBE_VERSION, type RenderedObject } from '../../support/helm.ts';
import { createTestNamespace, eventually, kubectl, kubectlOk } from '../../support/kubectl.ts';
import { loadSample, REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');
const controlPlane = inject('controlPlane');
const TESTDATA = join(REPO_ROOT, 'test', 'integration', 'chart', 'testdata');
const RELEASE = 'cacheroute';
const NAMESPACE = 'cacheroute-system';
// The APIs a values set needs beyond the built-in ones (helm template cannot ask a cluster).
// Every kind the Prometheus Operator serves.
const MONITORING_KINDS = ['ServiceMonitor', 'PodMonitor', 'PrometheusRule'].map(
  (k) => `monitoring.coreos.com/v1/${k}`,
);
const API_VERSIONS: Record<string, string[]> = {
  monitoring: MONITORING_KINDS,
  restricted: ['monitoring.coreos.com/v1/PodMonitor'],
};
const VALUE_SETS = readdirSync(TESTDATA)
  .filter((f) => f.endsWith('.values.yaml'))
  .map((f) => f.replace(/\.values\.yaml$/, ''))
  .sort();

interface RenderOptions {
  set?: readonly string[];
  valuesFile?: string;
  apiVersions?: readonly string[];
  release?: string;
  namespace?: string;
}

function templateArgs(opts: RenderOptions): string[] {
  return [
    'template',
    opts.release ?? RELEASE,
    CHART_DIR,
    '--namespace',
    opts.namespace ?? NAMESPACE,
    '--kube-version',
    KUBE_VERSION,
    ...(opts.apiVersions ?? []).flatMap((v) => ['--api-versions', v]),
    ...(opts.valuesFile ? ['--values', opts.valuesFile] : []),
    ...(opts.set ?? []).flatMap((s) => ['--set', s]),
  ];
}

async function renderText(opts: RenderOptions): Promise<string> {
  const args = templateArgs(opts);
  const res = await helm(args);
  if (res.code !== 0) throw new Error(`helm ${args.join(' ')} exited ${res.code}: ${res.stderr.trim()}`);
  return res.stdout;
}

async function render(opts: RenderOptions): Promise<RenderedObject[]> {
  return parseAllDocuments(await renderText(opts))
    .map((d) => d.toJS() as RenderedObject | null)
    .filter((o): o is RenderedObject => o !== null && typeof o === 'object');
}

const renderSet = (name: string): Promise<string> =>
  renderText({ valuesFile: join(TESTDATA, `${name}.values.yaml`), apiVersions: API_VERSIONS[name] ?? [] });

interface Container {
  name: string;
  image: string;
  args: string[];
  env?: {
    name: string;
    valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } };
  }[];
  lifecycle?: unknown;
  ports?: { name: string; containerPort: number; protocol?: string }[];
  livenessProbe: { httpGet: { path: string; port: string } };
  readinessProbe: { httpGet: { path: string; port: string } };
  securityContext: Record<string, unknown>;
}
interface PodSpec {
  securityContext: Record<string, unknown>;
  containers: Container[];
  serviceAccountName: string;
  terminationGracePeriodSeconds?: number;
  tolerations?: unknown[];
}
const find = (objs: RenderedObject[], kind: string, name: string): RenderedObject => {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o)
    throw new Error(`no ${kind} ${name} in ${objs.map((x) => `${x.kind}/${x.metadata.name}`).join(', ')}`);
  return o;
};
const podSpec = (o: RenderedObject): PodSpec =>
  (o as unknown as { spec: { template: { spec: PodSpec } } }).spec.template.spec;
const container = (objs: RenderedObject[], component: 'operator' | 'gateway'): Container => {
  const c = podSpec(find(objs, 'Deployment', `${RELEASE}-${component}`)).containers[0];
  if (!c) throw new Error(`the ${component} Deployment has no container`);
  return c;
};

describe('helm lint', () => {
  it.each(VALUE_SETS)('passes --strict with %s values', async (name) => {
    const res = await helm([
      'lint',
      CHART_DIR,
      '--strict',
      '--kube-version',
      KUBE_VERSION,
      '--values',
      join(TESTDATA, `${name}.values.yaml`),
    ]);
    expect(res.stdout + res.stderr).toContain('0 chart(s) failed');
    expect(res.code).toBe(0);
  });
});

describe('helm template golden files', () => {
  it.each(VALUE_SETS)('%s values render as %s.golden.yaml', async (name) => {
    const out = await renderSet(name);
    const golden = join(TESTDATA, `${name}.golden.yaml`);
    if (process.env['UPDATE_GOLDEN'] === '1' || !existsSync(golden)) writeFileSync(golden, out);
    // A difference here is a change of what users install: review it, then
    // `UPDATE_GOLDEN=1 make test-integration` (or this file alone) and commit the goldens.
    expect(out).toBe(readFileSync(golden, 'utf8'));
  });
});

describe('rendered objects on the real API server', () => {
  beforeAll(async () => {
    const crds = join(CHART_DIR, 'crds');
    await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig });
    // The Prometheus Operator's kinds, as stubs that accept any spec: enough to check
    // the objects' names, namespaces and that the API exists where the chart assumes it.
    for (const [kind, plural] of [
      ['ServiceMonitor', 'servicemonitors'],
      ['PodMonitor', 'podmonitors'],
      ['PrometheusRule', 'prometheusrules'],
    ] as const) {
      await kubectlOk(['apply', '--server-side', '-f', '-'], {
        kubeconfig,
        input: JSON.stringify(buildStubCrd('monitoring.coreos.com', kind, plural)),
      });
    }
    await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all'], { kubeconfig });
    for (const ns of [NAMESPACE, 'team-a', 'team-b']) {
      await kubectlOk(['apply', '-f', '-'], {
        kubeconfig,
        input: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }),
      });
    }
  });

  it.each(VALUE_SETS)('%s: every object is accepted by kubectl apply --dry-run=server', async (name) => {
    const text = await renderSet(name);
    const res = await kubectl(['apply', '--dry-run=server', '-f', '-'], { kubeconfig, input: text });
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    const count = parseAllDocuments(text).filter((d) => d.toJS() !== null).length;
    expect(res.stdout.trim().split('\n')).toHaveLength(count);
  });
});

describe('values reach the objects', () => {
  it('defaults: non-root, read-only, no capabilities, RuntimeDefault seccomp, probes on /healthz and /readyz', async () => {
    const objs = await render({});
    for (const component of ['operator', 'gateway'] as const) {
      const spec = podSpec(find(objs, 'Deployment', `${RELEASE}-${component}`));
      expect(spec.securityContext).toMatchObject({
        runAsNonRoot: true,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      const c = container(objs, component);
      expect(c.securityContext).toEqual({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
      expect(c.livenessProbe.httpGet.path).toBe('/healthz');
      expect(c.readinessProbe.httpGet.path).toBe('/readyz');
      expect(c.image).toBe(`ghcr.io/cacheroute/${component}:0.1.0`);
    }
    expect(container(objs, 'operator').args).toEqual(
      expect.arrayContaining([
        '--leader-elect=true',
        `--lease-namespace=${NAMESPACE}`,
        '--lease-name=cacheroute-operator',
        '--metrics-port=8080',
      ]),
    );
    const gatewayPod = podSpec(find(objs, 'Deployment', `${RELEASE}-gateway`));
    expect(gatewayPod.serviceAccountName).toBe(`${RELEASE}-gateway`);
    // The drain: preStop 5 s, then 25 s for requests in flight, and a 5 s margin.
    expect(gatewayPod.terminationGracePeriodSeconds).toBe(35);
    const gw = container(objs, 'gateway');
    expect(gw.lifecycle).toEqual({ preStop: { sleep: { seconds: 5 } } });
    expect(gw.args).toEqual(
      expect.arrayContaining(['--drain-timeout-seconds=25', `--peers-service=${RELEASE}-gateway`]),
    );
    // The replicas share the runtimes' load by default (adr/0035), on a port the NetworkPolicy admits among them.
    expect(gw.args).toContain('--load-exchange-port=7190');
    expect(gw.ports).toContainEqual({ name: 'load-exchange', containerPort: 7190, protocol: 'TCP' });
    expect(gw.env).toEqual([
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    ]);
    expect(objs.filter((o) => o.apiVersion.startsWith('monitoring.coreos.com'))).toEqual([]);
    // On by default (issue 30): the gateway's and the operator's.
    expect(objs.filter((o) => o.kind === 'NetworkPolicy').map((o) => o.metadata.name)).toEqual([
      `${RELEASE}-operator`,
      `${RELEASE}-gateway`,
    ]);
  });

  it('tracing.otlpEndpoint gives both containers the OTEL_* environment; without it neither has any', async () => {
    const off = await render({});
    for (const component of ['operator', 'gateway'] as const)
      expect((container(off, component).env ?? []).filter((e) => e.name.startsWith('OTEL_'))).toEqual([]);
    const objs = await render({
      set: ['tracing.otlpEndpoint=http://otel-collector.observability:4318', 'tracing.sampleRatio=0.1'],
    });
    for (const component of ['operator', 'gateway'] as const) {
      const env = container(objs, component).env ?? [];
      const names = env.map((e) => e.name);
      expect(
        Object.fromEntries(env.filter((e) => e.name.startsWith('OTEL_')).map((e) => [e.name, e])),
      ).toEqual({
        OTEL_EXPORTER_OTLP_ENDPOINT: {
          name: 'OTEL_EXPORTER_OTLP_ENDPOINT',
          value: 'http://otel-collector.observability:4318',
        },
        OTEL_SERVICE_NAME: { name: 'OTEL_SERVICE_NAME', value: `cacheroute-${component}` },
        OTEL_TRACES_SAMPLER: { name: 'OTEL_TRACES_SAMPLER', value: 'parentbased_traceidratio' },
        OTEL_TRACES_SAMPLER_ARG: { name: 'OTEL_TRACES_SAMPLER_ARG', value: '0.1' },
        OTEL_RESOURCE_ATTRIBUTES: {
          name: 'OTEL_RESOURCE_ATTRIBUTES',
          value: 'k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE)',
        },
      });
      // $(POD_NAME) expands only from a variable defined earlier in the list.
      expect(names.indexOf('POD_NAME')).toBeLessThan(names.indexOf('OTEL_RESOURCE_ATTRIBUTES'));
      expect(names.filter((n) => n === 'POD_NAME')).toHaveLength(1);
    }
  });

  it('the gateway API Service exposes only the API; status, metrics and probes are on the admin port', async () => {
    const objs = await render({
      set: ['gateway.adminPort=9191', 'networkPolicy.enabled=true', 'monitoring.serviceMonitor.enabled=true'],
      apiVersions: ['monitoring.coreos.com/v1/ServiceMonitor'],
    });
    const gw = container(objs, 'gateway') as Container & { ports: { name: string; containerPort: number }[] };
    expect(gw.args).toContain('--admin-port=9191');
    expect(gw.ports.map((p) => [p.name, p.containerPort])).toEqual([
      ['http', 8080],
      ['admin', 9191],
      // Gateway replicas share the runtimes' load (gateway.loadExchangePort), pod to pod only.
      ['load-exchange', 7190],
    ]);
    expect(gw.livenessProbe.httpGet.port).toBe('admin');
    expect(gw.readinessProbe.httpGet.port).toBe('admin');
    type Svc = { spec: { type: string; ports: { name: string; port: number }[] } };
    const api = find(objs, 'Service', `${RELEASE}-gateway`) as unknown as Svc;
    expect(api.spec.ports.map((p) => p.name)).toEqual(['http']);
    const admin = find(objs, 'Service', `${RELEASE}-gateway-admin`) as unknown as Svc;
    expect(admin.spec).toMatchObject({ type: 'ClusterIP', ports: [{ name: 'admin', port: 9191 }] });
    const scrapes = objs
      .filter((o) => o.apiVersion === 'monitoring.coreos.com/v1' && o.metadata.name === `${RELEASE}-gateway`)
      .map((o) => JSON.stringify(o));
    expect(scrapes).toHaveLength(1);
    for (const m of scrapes) expect(m).toMatch(/"port":"admin"/);
    const np = JSON.stringify(find(objs, 'NetworkPolicy', `${RELEASE}-gateway`));
    expect(np).toContain('"port":"admin"');
  });

  it('gateway.mode: standalone by default, no picker; picker or both: its Service, flags, ports and the operator pools', async () => {
    const standalone = await render({});
    expect(standalone.filter((o) => o.metadata.name === `${RELEASE}-picker`)).toEqual([]);
    expect(container(standalone, 'gateway').args.filter((a) => /^--(mode|picker)/.test(a))).toEqual([]);
    expect(container(standalone, 'operator').args.filter((a) => a.startsWith('--inference-pool'))).toEqual(
      [],
    );
    expect(standalone.filter((o) => o.kind === 'CustomResourceDefinition')).toEqual([]);
    for (const mode of ['picker', 'both']) {
      const objs = await render({ set: [`gateway.mode=${mode}`, 'gateway.picker.port=9102'] });
      const gw = container(objs, 'gateway') as Container & {
        ports: { name: string; containerPort: number }[];
      };
      expect(gw.args.filter((a) => /^--(mode|picker)/.test(a))).toEqual([
        `--mode=${mode}`,
        '--picker-port=9102',
        '--picker-health-port=9003',
      ]);
      expect(gw.ports.map((p) => [p.name, p.containerPort])).toEqual([
        ['http', 8080],
        ['admin', 9090],
        ['grpc', 9102],
        ['grpc-health', 9003],
        ['load-exchange', 7190],
      ]);
      const svc = find(objs, 'Service', `${RELEASE}-picker`) as unknown as {
        spec: {
          selector: Record<string, string>;
          ports: { name: string; port: number; targetPort: string }[];
        };
      };
      expect(svc.spec.selector).toEqual(
        (find(objs, 'Service', `${RELEASE}-gateway`) as unknown as typeof svc).spec.selector,
      );
      expect(svc.spec.ports.map((p) => [p.name, p.port, p.targetPort])).toEqual([
        ['grpc', 9102, 'grpc'],
        ['grpc-health', 9003, 'grpc-health'],
      ]);
      expect(container(objs, 'operator').args.filter((a) => a.startsWith('--inference-pool'))).toEqual([
        `--inference-pool-picker-service=${RELEASE}-picker`,
        `--inference-pool-picker-namespace=${NAMESPACE}`,
        '--inference-pool-picker-port=9102',
      ]);
    }
    // No gateway, no picker: nothing names one.
    const off = await render({
      set: ['gateway.enabled=false', 'gateway.mode=picker', 'operator.runtimeNetworkPolicy.enabled=false'],
    });
    expect(off.filter((o) => o.metadata.name === `${RELEASE}-picker`)).toEqual([]);
    expect(container(off, 'operator').args.filter((a) => a.startsWith('--inference-pool'))).toEqual([]);
  });

  it("inferencePool.installCRDs: GIE v1.6.2's CRDs as pinned, kept on uninstall", async () => {
    const objs = await render({ set: ['inferencePool.installCRDs=true'] });
    const crds = objs.filter((o) => o.kind === 'CustomResourceDefinition');
    const dir = join(CHART_DIR, 'gie-crds');
    const pinned = readdirSync(dir)
      .sort()
      .map((f) => parse(readFileSync(join(dir, f), 'utf8')) as RenderedObject);
    expect(crds.map((c) => c.metadata.name).sort()).toEqual([
      'inferencepoolimports.inference.networking.x-k8s.io',
      'inferencepools.inference.networking.k8s.io',
    ]);
    type Crd = RenderedObject & { metadata: { annotations?: Record<string, string> } };
    for (const want of pinned) {
      const got = crds.find((c) => c.metadata.name === want.metadata.name) as Crd | undefined;
      const { ['helm.sh/resource-policy']: keep, ...annotations } = got?.metadata.annotations ?? {};
      expect(keep).toBe('keep');
      expect(annotations['inference.networking.k8s.io/bundle-version']).toBe('v1.6.2');
      expect({ ...got, metadata: { ...got?.metadata, annotations } }).toEqual(want);
    }
  });

  it('a digest pins the image and wins over the tag', async () => {
    const digest = `sha256:${'ab'.repeat(32)}`;
    const objs = await render({ set: [`gateway.image.digest=${digest}`, 'gateway.image.tag=ignored'] });
    expect(container(objs, 'gateway').image).toBe(`ghcr.io/cacheroute/gateway@${digest}`);
  });

  it('the Redis URL from a Secret stays in the Secret: mounted and read from a file, never in argv', async () => {
    const objs = await render({
      set: [
        'gateway.redis.existingSecret.name=redis-url',
        'gateway.redis.reuseHmac.existingSecret.name=reuse-hmac',
      ],
    });
    const c = container(objs, 'gateway') as Container & { volumeMounts: unknown[] };
    const redisArgs = c.args.filter((a) => a.startsWith('--redis') || a.startsWith('--reuse'));
    expect(redisArgs).toEqual([
      '--redis-url-file=/var/run/secrets/cacheroute/redis/url',
      '--redis-max-entries=10000',
      '--reuse-hmac-key-file=/var/run/secrets/cacheroute/reuse-hmac/key',
    ]);
    // Nothing the kubelet would expand into the command line, and no URL anywhere in the container.
    expect(c.args.join(' ')).not.toMatch(/\$\(|redis:\/\//);
    expect(JSON.stringify(c.env ?? [])).not.toContain('REDIS_URL');
    expect(c.volumeMounts).toEqual(
      expect.arrayContaining([
        { name: 'redis-url', mountPath: '/var/run/secrets/cacheroute/redis', readOnly: true },
        { name: 'reuse-hmac', mountPath: '/var/run/secrets/cacheroute/reuse-hmac', readOnly: true },
      ]),
    );
    const spec = podSpec(find(objs, 'Deployment', `${RELEASE}-gateway`)) as PodSpec & { volumes: unknown[] };
    expect(spec.volumes).toEqual(
      expect.arrayContaining([
        { name: 'redis-url', secret: { secretName: 'redis-url', items: [{ key: 'url', path: 'url' }] } },
        {
          name: 'reuse-hmac',
          secret: { secretName: 'reuse-hmac', items: [{ key: 'hmac-key', path: 'key' }] },
        },
      ]),
    );
  });

  it('gateway.redis.reuseHmac.existingSecret.previousKey: the previous key is mounted and accepted too', async () => {
    const objs = await render({
      set: [
        'gateway.redis.url=redis://redis:6379',
        'gateway.redis.reuseHmac.existingSecret.name=reuse-hmac',
        'gateway.redis.reuseHmac.existingSecret.previousKey=old-hmac-key',
      ],
    });
    expect(container(objs, 'gateway').args).toEqual(
      expect.arrayContaining([
        '--redis-url=redis://redis:6379',
        '--reuse-hmac-previous-key-file=/var/run/secrets/cacheroute/reuse-hmac/previous-key',
      ]),
    );
    const spec = podSpec(find(objs, 'Deployment', `${RELEASE}-gateway`)) as PodSpec & { volumes: unknown[] };
    expect(spec.volumes).toContainEqual({
      name: 'reuse-hmac',
      secret: {
        secretName: 'reuse-hmac',
        items: [
          { key: 'hmac-key', path: 'key' },
          { key: 'old-hmac-key', path: 'previous-key' },
        ],
      },
    });
  });

  it('gateway.tokenizers.volume: mounted read-only at /tokenizers and passed as --tokenizers', async () => {
    const objs = await render({
      set: ['gateway.tokenizers.volume.persistentVolumeClaim.claimName=tokenizers'],
    });
    const c = container(objs, 'gateway') as Container & { volumeMounts: unknown[] };
    expect(c.args).toContain('--tokenizers=/tokenizers');
    expect(c.volumeMounts).toContainEqual({ name: 'tokenizers', mountPath: '/tokenizers', readOnly: true });
    const spec = podSpec(find(objs, 'Deployment', `${RELEASE}-gateway`)) as PodSpec & { volumes: unknown[] };
    expect(spec.volumes).toContainEqual({
      name: 'tokenizers',
      persistentVolumeClaim: { claimName: 'tokenizers' },
    });
    expect(container(await render({}), 'gateway').args).not.toContain('--tokenizers=/tokenizers');
  });

  it("gateway.runtimeReadyIntervalMs: each routed runtime's /ready every second by default; 0 never", async () => {
    expect(container(await render({}), 'gateway').args).toContain('--runtime-ready-interval-ms=1000');
    const off = await render({ set: ['gateway.runtimeReadyIntervalMs=0'] });
    expect(container(off, 'gateway').args).toContain('--runtime-ready-interval-ms=0');
  });

  it('gateway.shareAdmission=false: each replica admits the whole bound, and reads no EndpointSlices', async () => {
    const objs = await render({
      set: [
        'gateway.shareAdmission=false',
        'gateway.drainTimeoutSeconds=60',
        'gateway.preStopSleepSeconds=0',
      ],
    });
    const c = container(objs, 'gateway');
    expect(c.args.filter((a: string) => a.startsWith('--peers-service'))).toEqual([]);
    expect(c.args.filter((a: string) => a.startsWith('--load-exchange-port'))).toEqual([]);
    expect(c.args).toContain('--drain-timeout-seconds=60');
    expect(c.lifecycle).toBeUndefined();
    expect(podSpec(find(objs, 'Deployment', `${RELEASE}-gateway`)).terminationGracePeriodSeconds).toBe(65);
    expect(objs.filter((o) => o.metadata.name === `${RELEASE}-gateway-peers`)).toEqual([]);
  });

  it('the gateway reads no Secret but the one the operator keeps for it, by name, in either auth mode', async () => {
    type Rule = { apiGroups: string[]; resources: string[]; resourceNames?: string[]; verbs: string[] };
    const rules = (objs: RenderedObject[], kind: string, name: string, namespace?: string) =>
      (
        objs.find(
          (o) =>
            o.kind === kind &&
            o.metadata.name === name &&
            (namespace === undefined || o.metadata.namespace === namespace),
        ) as unknown as { rules: Rule[] } | undefined
      )?.rules ?? [];
    const kept = `${RELEASE}-gateway-keys`;
    for (const set of [
      [],
      ['gateway.auth.mode=open'],
      ['gateway.watchNamespaces={team-a}', 'operator.watchNamespaces={team-a}'],
    ]) {
      const objs = await render({ set });
      // Neither the ClusterRole nor a Role of a watched namespace names Secrets.
      for (const r of [
        ...rules(objs, 'ClusterRole', `${RELEASE}-gateway`),
        ...rules(objs, 'Role', `${RELEASE}-gateway`, 'team-a'),
      ])
        expect(r.resources, set.join(' ')).not.toContain('secrets');
      // One Role in the release namespace: that Secret, by name, list and watch (an informer).
      expect(rules(objs, 'Role', `${RELEASE}-gateway-keys`, NAMESPACE)).toEqual([
        { apiGroups: [''], resources: ['secrets'], resourceNames: [kept], verbs: ['list', 'watch'] },
      ]);
      expect(container(objs, 'gateway').args).toContain(`--keys-secret=${NAMESPACE}/${kept}`);
      expect(container(objs, 'operator').args).toContain(`--gateway-keys-secret=${NAMESPACE}/${kept}`);
      // The operator writes it by name, in the release namespace only; the chart makes it (empty),
      // so that it goes with the release and the operator needs no create there.
      expect(rules(objs, 'Role', `${RELEASE}-operator-gateway-keys`, NAMESPACE)).toEqual([
        { apiGroups: [''], resources: ['secrets'], resourceNames: [kept], verbs: ['patch'] },
      ]);
      const secret = find(objs, 'Secret', kept) as unknown as {
        data?: unknown;
        metadata: { namespace: string };
      };
      expect(secret.metadata.namespace).toBe(NAMESPACE);
      expect(secret.data).toBeUndefined();
    }
    const open = await render({ set: ['gateway.auth.mode=open'] });
    expect(container(open, 'gateway').args).toContain('--auth=open');
    expect(container(await render({}), 'gateway').args).toContain('--auth=keys');
  });

  it('NetworkPolicies on by default: admin and metrics ports from the operator and monitoring only, the API port as gatewayFrom says', async () => {
    type Ingress = { ports: { port: string }[]; from?: unknown[] };
    const ingress = (objs: RenderedObject[], name: string): Ingress[] =>
      (find(objs, 'NetworkPolicy', name) as unknown as { spec: { ingress: Ingress[] } }).spec.ingress;
    const fromOf = (list: Ingress[], port: string) =>
      list.find((i) => i.ports.some((p) => p.port === port))?.from;
    const operatorPods = {
      podSelector: {
        matchLabels: {
          'app.kubernetes.io/name': 'cacheroute',
          'app.kubernetes.io/instance': RELEASE,
          'app.kubernetes.io/component': 'operator',
        },
      },
    };
    const prometheus = {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
    };
    const objs = await render({});
    const gateway = ingress(objs, `${RELEASE}-gateway`);
    expect(fromOf(gateway, 'http')).toBeUndefined(); // the API port: every source, as before
    expect(fromOf(gateway, 'admin')).toEqual([operatorPods, prometheus]);
    expect(fromOf(ingress(objs, `${RELEASE}-operator`), 'metrics')).toEqual([operatorPods, prometheus]);

    // Another monitoring stack, and more peers for the admin ports.
    const other = await render({
      set: [
        'networkPolicy.monitoring.namespace=observability',
        'networkPolicy.monitoring.podLabels.app=vmagent',
        'networkPolicy.metricsFrom[0].ipBlock.cidr=10.0.0.0/8',
      ],
    });
    expect(fromOf(ingress(other, `${RELEASE}-gateway`), 'admin')).toEqual([
      operatorPods,
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'observability' } },
        podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus', app: 'vmagent' } },
      },
      { ipBlock: { cidr: '10.0.0.0/8' } },
    ]);
    expect(
      (await render({ set: ['networkPolicy.enabled=false'] })).filter((o) => o.kind === 'NetworkPolicy'),
    ).toEqual([]);
  });

  it("operator.runtimeNetworkPolicy: on by default, admitting this release's gateway and operator, and Prometheus with monitoring on", async () => {
    const ingress = (objs: RenderedObject[]) =>
      container(objs, 'operator').args.filter((a) => a.startsWith('--runtime-'));
    const selector = (component: string) =>
      `namespace=${NAMESPACE},app.kubernetes.io/component=${component},app.kubernetes.io/instance=${RELEASE},app.kubernetes.io/name=cacheroute`;
    expect(ingress(await render({}))).toEqual([
      '--runtime-network-policy=true',
      `--runtime-ingress-gateway=${selector('gateway')}`,
      `--runtime-ingress-operator=${selector('operator')}`,
    ]);
    expect(ingress(await render({ set: ['monitoring.podMonitor.enabled=true'] }))).toEqual([
      '--runtime-network-policy=true',
      `--runtime-ingress-gateway=${selector('gateway')}`,
      `--runtime-ingress-operator=${selector('operator')}`,
      '--runtime-ingress-metrics=namespace=monitoring,app.kubernetes.io/name=prometheus',
    ]);
    const elsewhere = await render({
      set: [
        'gateway.enabled=false',
        'operator.runtimeNetworkPolicy.gateway.namespace=edge',
        'operator.runtimeNetworkPolicy.gateway.podLabels.app=gw',
      ],
    });
    expect(ingress(elsewhere)).toContain('--runtime-ingress-gateway=namespace=edge,app=gw');
    expect(ingress(await render({ set: ['operator.runtimeNetworkPolicy.enabled=false'] }))).toEqual([]);
  });

  it('gateway.watchNamespaces: Roles in those namespaces and no ClusterRole', async () => {
    const objs = await render({ set: ['gateway.watchNamespaces={a,b}'] });
    expect(container(objs, 'gateway').args).toContain('--namespace=a,b');
    const gatewayRbac = objs.filter(
      (o) =>
        o.metadata.labels?.['app.kubernetes.io/component'] === 'gateway' && o.apiVersion.startsWith('rbac'),
    );
    expect(gatewayRbac.map((o) => `${o.kind}/${o.metadata.namespace ?? ''}`).sort()).toEqual([
      'Role/a',
      'Role/b',
      `Role/${NAMESPACE}`, // the keys Secret, by name
      `Role/${NAMESPACE}`, // the peers' EndpointSlices
      'RoleBinding/a',
      'RoleBinding/b',
      `RoleBinding/${NAMESPACE}`,
      `RoleBinding/${NAMESPACE}`,
    ]);
  });

  it('operator.hostPathRoots: --host-path-roots, else the node cache root; a relative path is refused', async () => {
    const roots = (objs: RenderedObject[]) =>
      container(objs, 'operator').args.filter((a) => a.startsWith('--host-path-roots'));
    expect(roots(await render({ set: ['operator.modelCache.nodeRoot=/mnt/cache'] }))).toEqual([
      '--host-path-roots=/mnt/cache',
    ]);
    expect(roots(await render({ set: ['operator.hostPathRoots={/data/models,/mnt/cache}'] }))).toEqual([
      '--host-path-roots=/data/models,/mnt/cache',
    ]);
    const refused = await helm(templateArgs({ set: ['operator.hostPathRoots={models}'] }));
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('hostPathRoots');
  });

  it('operator.watchNamespaces: --namespace and Roles in those namespaces, no operator ClusterRole', async () => {
    const objs = await render({ set: ['operator.watchNamespaces={a,b}'] });
    expect(container(objs, 'operator').args).toContain('--namespace=a,b');
    const operatorRbac = objs.filter(
      (o) =>
        o.metadata.labels?.['app.kubernetes.io/component'] === 'operator' && o.apiVersion.startsWith('rbac'),
    );
    expect(operatorRbac.map((o) => `${o.kind}/${o.metadata.namespace ?? ''}`).sort()).toEqual([
      'Role/a',
      'Role/b',
      `Role/${NAMESPACE}`, // the gateway's keys Secret, by name
      `Role/${NAMESPACE}`, // the leader-election Lease
      'RoleBinding/a',
      'RoleBinding/b',
      `RoleBinding/${NAMESPACE}`,
      `RoleBinding/${NAMESPACE}`,
    ]);
    // Every namespace (the default): no --namespace, a ClusterRole.
    const all = await render({});
    expect(container(all, 'operator').args.filter((a) => a.startsWith('--namespace'))).toEqual([]);
    expect(find(all, 'ClusterRole', `${RELEASE}-operator`)).toBeDefined();
  });

  it('operator.metricsApi: the APIService trusts a CA the chart made, its Service reaches every operator pod, and the operator may delegate authorization', async () => {
    const objs = await render({
      set: ['operator.metricsApi.enabled=true', 'operator.cacheHealth.readGateway=false'],
    });
    const secret = find(objs, 'Secret', `${RELEASE}-metrics-api-tls`) as RenderedObject & {
      data: Record<string, string>;
    };
    const apiService = find(objs, 'APIService', 'v1beta1.external.metrics.k8s.io') as RenderedObject & {
      spec: { caBundle: string; service: { name: string; namespace: string; port: number } };
    };
    expect(apiService.spec.caBundle).toBe(secret.data['ca.crt']);
    expect(apiService.spec.service).toEqual({
      name: `${RELEASE}-metrics-api`,
      namespace: NAMESPACE,
      port: 443,
    });
    // The certificate names the Service as the aggregator dials it.
    const pem = Buffer.from(secret.data['tls.crt'] ?? '', 'base64').toString();
    const { X509Certificate } = await import('node:crypto');
    const cert = new X509Certificate(pem);
    expect(cert.subjectAltName).toContain(`DNS:${RELEASE}-metrics-api.${NAMESPACE}.svc`);
    expect(
      cert.verify(new X509Certificate(Buffer.from(secret.data['ca.crt'] ?? '', 'base64')).publicKey),
    ).toBe(true);
    expect(container(objs, 'operator').args).toEqual(
      expect.arrayContaining([
        '--metrics-api-port=6443',
        '--metrics-api-tls-cert-file=/etc/cacheroute/metrics-api/tls.crt',
        // Read for the metrics even with cache health's reading of the gateway off.
        `--gateway-admin-url=http://${RELEASE}-gateway-replicas.${NAMESPACE}.svc:9090`,
      ]),
    );
    find(objs, 'Service', `${RELEASE}-gateway-replicas`);
    const bindings = objs.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding');
    expect(bindings.map((b) => (b as RenderedObject & { roleRef: { name: string } }).roleRef.name)).toEqual(
      expect.arrayContaining(['system:auth-delegator', 'extension-apiserver-authentication-reader']),
    );
    await kubectlOk(['apply', '-f', '-'], {
      kubeconfig,
      input: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } }),
    });
    const res = await kubectl(['apply', '--dry-run=server', '-f', '-'], {
      kubeconfig,
      input: await renderText({ set: ['operator.metricsApi.enabled=true'] }),
    });
    expect(res.stderr).toBe('');
    // Given a Secret of one's own, the CA comes with it.
    const refused = await helm(
      templateArgs({ set: ['operator.metricsApi.enabled=true', 'operator.metricsApi.tlsSecretName=mine'] }),
    );
    expect(refused.stderr).toContain('give operator.metricsApi.caBundle');
    const noGateway = await helm(
      templateArgs({ set: ['operator.metricsApi.enabled=true', 'gateway.enabled=false'] }),
    );
    expect(noGateway.stderr).toContain('it needs gateway.enabled=true');
  });

  it('operator.modelCache.insecureEndpointHosts: none by default (https only); listed, one --insecure-endpoint-hosts', async () => {
    const flag = (args: string[]) => args.filter((a) => a.startsWith('--insecure-endpoint-hosts'));
    expect(flag(container(await render({}), 'operator').args)).toEqual([]);
    const objs = await render({
      set: ['operator.modelCache.insecureEndpointHosts={minio.storage,10.0.0.7}'],
    });
    expect(flag(container(objs, 'operator').args)).toEqual([
      '--insecure-endpoint-hosts=minio.storage,10.0.0.7',
    ]);
  });

  it('referencePolicy: a policy and a binding per kind that holds references, bound everywhere or only in operator.watchNamespaces; off renders none', async () => {
    const admission = (objs: RenderedObject[]) =>
      objs.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy'));
    const everywhere = admission(await render({}));
    expect(everywhere.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual(
      ['cachepolicies', 'deployments', 'qualifications', 'tasks', 'tenants']
        .flatMap((k) => [
          `ValidatingAdmissionPolicy/${RELEASE}-references-${k}`,
          `ValidatingAdmissionPolicyBinding/${RELEASE}-references-${k}`,
        ])
        .sort(),
    );
    const selectorOf = (o: RenderedObject) =>
      (o as unknown as { spec: { matchResources?: { namespaceSelector?: unknown } } }).spec.matchResources
        ?.namespaceSelector;
    expect(everywhere.filter((o) => o.kind.endsWith('Binding')).map(selectorOf)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    const listed = admission(await render({ set: ['operator.watchNamespaces={team-a,team-b}'] }));
    for (const b of listed.filter((o) => o.kind.endsWith('Binding')))
      expect(selectorOf(b)).toEqual({
        matchExpressions: [
          { key: 'kubernetes.io/metadata.name', operator: 'In', values: ['team-a', 'team-b'] },
        ],
      });
    expect(admission(await render({ set: ['referencePolicy.enabled=false'] }))).toEqual([]);
  });

  it('gateway.enabled=false renders no gateway object', async () => {
    // No gateway here to admit to the SGLang pods: their NetworkPolicies are off (or name one).
    const objs = await render({
      set: ['gateway.enabled=false', 'operator.runtimeNetworkPolicy.enabled=false'],
    });
    expect(objs.filter((o) => o.metadata.labels?.['app.kubernetes.io/component'] === 'gateway')).toEqual([]);
    expect(find(objs, 'Deployment', `${RELEASE}-operator`)).toBeDefined();
  });

  it('monitoring enabled on a cluster without the Prometheus Operator renders nothing for it', async () => {
    const objs = await render({ set: ['monitoring.serviceMonitor.enabled=true'] });
    expect(objs.filter((o) => o.apiVersion.startsWith('monitoring.coreos.com'))).toEqual([]);
  });

  const SERVICE_MONITORS = [`ServiceMonitor/${RELEASE}-gateway`, `ServiceMonitor/${RELEASE}-operator`];
  const monitoringObjects = (objs: RenderedObject[]): string[] =>
    objs
      .filter((o) => o.apiVersion === 'monitoring.coreos.com/v1')
      .map((o) => `${o.kind}/${o.metadata.name}`)
      .sort();

  it('monitoring on: the alerts (PrometheusRule) and the SGLang PodMonitor too, each only where its kind is served', async () => {
    const sm = 'monitoring.serviceMonitor.enabled=true';
    expect(monitoringObjects(await render({ apiVersions: MONITORING_KINDS }))).toEqual([]);
    expect(monitoringObjects(await render({ set: [sm], apiVersions: MONITORING_KINDS }))).toEqual([
      `PodMonitor/${RELEASE}-sglang`,
      `PrometheusRule/${RELEASE}`,
      ...SERVICE_MONITORS,
    ]);
    expect(
      monitoringObjects(
        await render({ set: [sm], apiVersions: ['monitoring.coreos.com/v1/ServiceMonitor'] }),
      ),
    ).toEqual(SERVICE_MONITORS);
    expect(
      monitoringObjects(
        await render({
          set: ['monitoring.podMonitor.enabled=true'],
          apiVersions: ['monitoring.coreos.com/v1/PodMonitor'],
        }),
      ),
    ).toEqual([
      `PodMonitor/${RELEASE}-gateway`,
      `PodMonitor/${RELEASE}-operator`,
      `PodMonitor/${RELEASE}-sglang`,
    ]);
    const neither = await render({
      set: [sm, 'monitoring.prometheusRule.enabled=false', 'monitoring.sglangPodMonitor.enabled=false'],
      apiVersions: MONITORING_KINDS,
    });
    expect(monitoringObjects(neither)).toEqual(SERVICE_MONITORS);
  });

  it('the PrometheusRule is monitoring/alerts.yaml, whose jobs are the ones the scrape objects name', async () => {
    const alerts = parse(readFileSync(join(CHART_DIR, 'monitoring', 'alerts.yaml'), 'utf8')) as {
      groups: { rules: { expr: string }[] }[];
    };
    const named = new Set<string>();
    for (const mode of ['serviceMonitor', 'podMonitor']) {
      const objs = await render({ set: [`monitoring.${mode}.enabled=true`], apiVersions: MONITORING_KINDS });
      expect(find(objs, 'PrometheusRule', RELEASE)['spec']).toEqual(alerts);
      for (const o of objs.filter(
        (x) => x.apiVersion === 'monitoring.coreos.com/v1' && x.kind !== 'PrometheusRule',
      )) {
        const spec = o['spec'] as Record<
          string,
          { relabelings?: { targetLabel?: string; replacement?: string }[] }[]
        >;
        const endpoints = spec['endpoints'] ?? spec['podMetricsEndpoints'] ?? [];
        for (const r of endpoints.flatMap((e) => e.relabelings ?? []))
          if (r.targetLabel === 'job' && r.replacement) named.add(r.replacement);
      }
    }
    expect([...named].sort()).toEqual(['cacheroute-gateway', 'cacheroute-operator', 'cacheroute-sglang']);
    const selected = alerts.groups
      .flatMap((g) => g.rules)
      .flatMap((r) => [...r.expr.matchAll(/job=~?"([^"]+)"/g)].flatMap((m) => (m[1] ?? '').split('|')));
    expect(selected.length).toBeGreaterThan(0);
    expect(selected.filter((j) => !named.has(j))).toEqual([]);
  });

  it("the SGLang PodMonitor selects the operator's SGLang pods on their HTTP port and labels series from their labels", async () => {
    const objs = await render({ set: ['monitoring.podMonitor.enabled=true'], apiVersions: MONITORING_KINDS });
    const pm = find(objs, 'PodMonitor', `${RELEASE}-sglang`)['spec'] as {
      namespaceSelector: unknown;
      selector: { matchLabels: Record<string, string> };
      podMetricsEndpoints: { port: string; path: string; relabelings: { sourceLabels?: string[] }[] }[];
    };
    expect(pm.namespaceSelector).toEqual({ any: true });
    const [endpoint] = pm.podMetricsEndpoints;
    expect(endpoint?.path).toBe('/metrics');
    const podLabelsRead = (endpoint?.relabelings ?? [])
      .flatMap((r) => r.sourceLabels ?? [])
      .filter((l) => l.startsWith('__meta_kubernetes_pod_label_'));
    expect(podLabelsRead.length).toBeGreaterThan(0);
    // Every role the operator renders: standalone, prefill and decode.
    for (const sample of ['deployment-dense.yaml', 'deployment-pd-hisparse.yaml']) {
      const rendered = renderManifest(loadSample(sample));
      if (!rendered.ok) throw new Error(`${sample}: ${JSON.stringify(rendered.issues)}`);
      const workloads = rendered.objects.filter((o) => o.kind === 'Deployment') as unknown as {
        spec: { template: { metadata: { labels: Record<string, string> }; spec: PodSpec } };
      }[];
      expect(workloads.length).toBeGreaterThan(0);
      for (const w of workloads) {
        const labels = w.spec.template.metadata.labels;
        expect(labels).toMatchObject(pm.selector.matchLabels);
        const ports = w.spec.template.spec.containers.flatMap(
          (c) => (c as unknown as { ports?: { name: string }[] }).ports ?? [],
        );
        expect(ports.map((p) => p.name)).toContain(endpoint?.port);
        // Prometheus names a pod label's meta label with every non-alphanumeric character as _.
        const meta = new Set(
          Object.keys(labels).map((k) => `__meta_kubernetes_pod_label_${k.replace(/[^a-zA-Z0-9_]/g, '_')}`),
        );
        expect(podLabelsRead.filter((l) => !meta.has(l))).toEqual([]);
      }
    }
    const namespaced = await render({
      set: ['monitoring.podMonitor.enabled=true', 'operator.watchNamespaces={team-a,team-b}'],
      apiVersions: MONITORING_KINDS,
    });
    expect(
      (find(namespaced, 'PodMonitor', `${RELEASE}-sglang`)['spec'] as { namespaceSelector: unknown })
        .namespaceSelector,
    ).toEqual({
      matchNames: ['team-a', 'team-b'],
    });
  });
});

describe('bad values are refused with a message that says what to change', () => {
  it.each([
    ['operator.replica=2', "at '/operator': additional properties 'replica' not allowed"],
    ['gateway.image.digest=latest', "at '/gateway/image/digest': 'latest' does not match pattern"],
    [
      'operator.logLevel=verbose',
      "at '/operator/logLevel': value must be one of 'debug', 'info', 'warn', 'error'",
    ],
    [
      'gateway.redis.url=http://redis:6379',
      "at '/gateway/redis/url': 'http://redis:6379' does not match pattern",
    ],
    ['gateway.port=0', "at '/gateway/port': minimum: got 0, want 1"],
    [
      'tracing.otlpEndpoint=collector:4317',
      "at '/tracing/otlpEndpoint': 'collector:4317' does not match pattern",
    ],
    ['tracing.sampleRatio=1.5', "at '/tracing/sampleRatio': '1.5' does not match pattern"],
    ['gateway.auth.mode=none', "at '/gateway/auth/mode': value must be one of"],
    ['operator.concurrency=100', "at '/operator/concurrency': maximum: got 100, want 64"],
    ['gateway.service.type=Ingress', "at '/gateway/service/type': value must be one of"],
    ['operator.extraArgs={-v}', "at '/operator/extraArgs/0': '-v' does not match pattern '^--'"],
    ['gateway.watchNamespaces={Team_A}', "at '/gateway/watchNamespaces/0': 'Team_A' does not match pattern"],
    [
      'operator.watchNamespaces={Team_A}',
      "at '/operator/watchNamespaces/0': 'Team_A' does not match pattern",
    ],
    ['operator.watchNamespaces={a,a}', "at '/operator/watchNamespaces': items at 0 and 1 are equal"],
    [
      'operator.watchNamespace=team-a',
      'operator.watchNamespace was replaced by operator.watchNamespaces, a list (Roles in those namespaces instead of a ClusterRole): set operator.watchNamespaces={team-a}',
    ],
    [
      'monitoring.serviceMonitor.enabled=true,monitoring.podMonitor.enabled=true',
      'monitoring.serviceMonitor.enabled and monitoring.podMonitor.enabled are both true',
    ],
    [
      'gateway.redis.url=redis://r:6379,gateway.redis.existingSecret.name=s',
      'gateway.redis.url and gateway.redis.existingSecret.name are both set',
    ],
    [
      'gateway.redis.url=redis://:s3cret@r:6379,gateway.redis.reuseHmac.existingSecret.name=h',
      'gateway.redis.url carries a password',
    ],
    [
      'gateway.redis.existingSecret.name=redis-url',
      'gateway.redis needs gateway.redis.reuseHmac.existingSecret.name',
    ],
    [
      'gateway.serviceAccount.create=false',
      'gateway.serviceAccount.name is required when gateway.serviceAccount.create is false',
    ],
    [
      'gateway.enabled=false',
      'operator.runtimeNetworkPolicy.enabled with gateway.enabled=false: set operator.runtimeNetworkPolicy.gateway.namespace and .podLabels',
    ],
    [
      'operator.runtimeNetworkPolicy.prometheus.namespace=Mon',
      "at '/operator/runtimeNetworkPolicy/prometheus/namespace': 'Mon' does not match pattern",
    ],
  ])('--set %s', async (set, message) => {
    const res = await helm(templateArgs({ set: [set] }));
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(message);
  });
});

describe("the gateway's RBAC is what discovery needs, and no more", () => {
  // Runs the gateway's discovery as the chart's ServiceAccount (a client certificate
  // for its user name, rights only from the rendered RBAC objects).
  // Short names: the user name is a certificate CN, 64 characters at most.
  async function runDiscoveryAs(
    release: string,
    ns: string,
    namespaces: string[],
  ): Promise<{ stop: () => Promise<RequestInfo[]> }> {
    const set = namespaces.length > 0 ? [`gateway.watchNamespaces={${namespaces.join(',')}}`] : [];
    const objs = (await render({ release, namespace: ns, set })).filter(
      (o) =>
        o.metadata.labels?.['app.kubernetes.io/component'] === 'gateway' &&
        ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding', 'Secret'].includes(
          o.kind,
        ),
    );
    const input = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objs });
    await kubectlOk(['apply', '-f', '-'], { kubeconfig, input });
    onTestFinished(async () => {
      await kubectl(['delete', '--ignore-not-found', '--wait=false', '-f', '-'], { kubeconfig, input });
    });
    const sa = find(objs, 'ServiceAccount', `${release}-cacheroute-gateway`).metadata.name;
    const userKubeconfig = await createUserKubeconfig(controlPlane, {
      user: `system:serviceaccount:${ns}:${sa}`,
      groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`, 'system:authenticated'],
    });
    const kc = new KubeConfig();
    kc.loadFromString(await readFile(userKubeconfig, 'utf8'));
    const client = await KubeClient.fromKubeConfig(kc);
    const requests: RequestInfo[] = [];
    client.observe((info) => void requests.push(info));
    const watcher = new DiscoveryWatcher({ client, namespaces, coalesceMs: 20 });
    watcher.start();
    // The Secret the operator keeps for the gateway (rendered empty by the chart, in the release
    // namespace): the only Secret the gateway reads.
    const keysSecret = { namespace: ns, name: `${release}-cacheroute-gateway-keys` };
    const tenants = new TenantWatcher({ client, namespaces, keysSecret, coalesceMs: 20 });
    tenants.start();
    const runtimeKeys = new RuntimeKeyWatcher({ client, keysSecret });
    runtimeKeys.start();
    // The Qualifications /status plots: their status only, never a ConfigMap (ADR 0040).
    const qualifications = new QualificationWatcher({ client, namespaces, coalesceMs: 20 });
    qualifications.start();
    // --peers-service, as the chart passes it: the gateway's own Service in the release namespace.
    const peers = new EndpointSlicePeers({
      client,
      namespace: ns,
      service: `${release}-cacheroute-gateway`,
      self: 'gateway-0',
    });
    peers.start();
    let stopped: Promise<RequestInfo[]> | undefined;
    // A watch is reported when its stream ends: stop, then read what was asked.
    const stop = (): Promise<RequestInfo[]> =>
      (stopped ??= (async () => {
        await watcher.stop();
        await tenants.stop();
        await runtimeKeys.stop();
        await qualifications.stop();
        await peers.stop();
        await client.close();
        return requests;
      })());
    onTestFinished(async () => void (await stop()));
    // RBAC bindings take effect within moments; until then lists are 403 and retried.
    await eventually(() => expect(watcher.table.ready).toBe(true), { timeoutMs: 30_000 });
    await eventually(() => expect(tenants.directory.ready).toBe(true), { timeoutMs: 30_000 });
    await eventually(() => expect(runtimeKeys.keys.ready).toBe(true), { timeoutMs: 30_000 });
    await eventually(() => expect(peers.hasSynced()).toBe(true), { timeoutMs: 30_000 });
    await eventually(() => expect(qualifications.hasSynced()).toBe(true), { timeoutMs: 30_000 });
    return { stop };
  }

  // What the gateway's informers list and watch (discovery/watcher.ts): routing and the Tenants;
  // their keys' digests and the runtimes' keys come from one Secret, by name (below).
  const GATEWAY_KINDS = [
    'deployments.cacheroute.dev',
    'cachepolicies.cacheroute.dev',
    'tenants.cacheroute.dev',
    'qualifications.cacheroute.dev',
  ];
  const SECRET_VERBS = ['list secrets', 'watch secrets'];

  const canI = async (ns: string, sa: string, args: string[]): Promise<string> =>
    (
      await kubectl(['auth', 'can-i', ...args, `--as=system:serviceaccount:${ns}:${sa}`], { kubeconfig })
    ).stdout.trim();

  beforeAll(async () => {
    await kubectlOk(['apply', '--server-side', '-f', join(CHART_DIR, 'crds')], { kubeconfig });
  });

  it('every namespace: the ClusterRole lets discovery list and watch, and grants nothing else', async () => {
    const ns = await createTestNamespace(kubeconfig, 'gw');
    const discovery = await runDiscoveryAs('gw1', ns, []);
    const requests = await discovery.stop();
    // Everything discovery asked for is in the ClusterRole, and it listed both kinds.
    // (A watch is reported when its stream ends; one cut short before it was sent is not.)
    const asked = [...new Set(requests.map((r) => `${r.verb} ${r.resource}`))];
    const granted = [
      ...['list', 'watch'].flatMap((verb) =>
        [...GATEWAY_KINDS, 'endpointslices.discovery.k8s.io'].map((kind) => `${verb} ${kind}`),
      ),
      ...SECRET_VERBS,
    ];
    expect(granted).toEqual(expect.arrayContaining(asked));
    expect(asked).toEqual(
      expect.arrayContaining([
        'list deployments.cacheroute.dev',
        'list cachepolicies.cacheroute.dev',
        'list endpointslices.discovery.k8s.io',
        'list qualifications.cacheroute.dev',
        'list secrets',
      ]),
    );
    const sa = 'gw1-cacheroute-gateway';
    const kept = 'gw1-cacheroute-gateway-keys';
    for (const verb of ['list', 'watch'])
      expect(await canI(ns, sa, [verb, `secrets/${kept}`, '-n', ns]), `${verb} secrets/${kept}`).toBe('yes');
    for (const kind of GATEWAY_KINDS)
      for (const verb of ['list', 'watch'])
        expect(await canI(ns, sa, [verb, kind, '-A']), `${verb} ${kind} -A`).toBe('yes');
    expect(await canI(ns, sa, ['watch', 'endpointslices.discovery.k8s.io', '-n', ns])).toBe('yes');
    for (const denied of [
      ['get', 'deployments.cacheroute.dev', '-n', ns],
      ['update', 'deployments.cacheroute.dev/status', '-n', ns],
      ['list', 'tasks.cacheroute.dev', '-A'],
      ['list', 'pods', '-A'],
      ['get', 'secrets', '-n', ns],
      ['list', 'secrets', '-n', ns],
      ['list', 'secrets', '-A'],
      ['watch', 'secrets', '-A'],
      ['list', 'secrets/other', '-n', ns],
      ['list', 'endpointslices.discovery.k8s.io', '-n', 'default'],
      ['get', 'services', '-n', ns],
      // The Qualifications' record ConfigMaps (and every other) are not the gateway's to read.
      ['get', 'configmaps', '-n', ns],
      ['list', 'configmaps', '-A'],
    ])
      expect(await canI(ns, sa, denied), denied.join(' ')).toBe('no');
  });

  it('gateway.watchNamespaces: Roles let discovery watch those namespaces only', async () => {
    const ns = await createTestNamespace(kubeconfig, 'gw');
    await runDiscoveryAs('gw2', ns, [ns]);
    const sa = 'gw2-cacheroute-gateway';
    for (const kind of GATEWAY_KINDS) {
      expect(await canI(ns, sa, ['list', kind, '-n', ns]), `list ${kind} -n ${ns}`).toBe('yes');
      expect(await canI(ns, sa, ['watch', kind, '-n', ns]), `watch ${kind} -n ${ns}`).toBe('yes');
      expect(await canI(ns, sa, ['list', kind, '-n', 'default']), `list ${kind} -n default`).toBe('no');
      expect(await canI(ns, sa, ['list', kind, '-A']), `list ${kind} -A`).toBe('no');
    }
    expect(await canI(ns, sa, ['get', 'secrets', '-n', ns])).toBe('no');
    expect(await canI(ns, sa, ['list', 'secrets', '-n', ns])).toBe('no');
    expect(await canI(ns, sa, ['list', 'secrets/gw2-cacheroute-gateway-keys', '-n', ns])).toBe('yes');
  });
});

function buildStubCrd(group: string, kind: string, plural: string): unknown {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  };
}

describe('GitOps examples', () => {
  // examples/gitops: the values an Argo CD Application or a Flux HelmRelease hands the
  // chart pass its schema and render (the files themselves need Argo CD or Flux CRDs).
  const gitops = (file: string): Record<string, unknown>[] =>
    parseAllDocuments(readFileSync(join(REPO_ROOT, 'examples', 'gitops', file), 'utf8')).map(
      (d) => d.toJS() as Record<string, unknown>,
    );
  const chartValues = (doc: Record<string, unknown>): unknown => {
    const spec = doc['spec'] as {
      values?: unknown;
      source?: { path?: string; helm?: { valuesObject?: unknown } };
    };
    return spec.values ?? spec.source?.helm?.valuesObject;
  };

  it.each([
    ['argocd-application.yaml', 'Application'],
    ['flux-helmrelease.yaml', 'HelmRelease'],
  ])('%s: the %s values render the chart', async (file, kind) => {
    const docs = gitops(file).filter((d) => d['kind'] === kind && chartValues(d) !== undefined);
    expect(docs).toHaveLength(1);
    const path = join(controlPlane.dir, `gitops-${kind}.values.json`);
    writeFileSync(path, JSON.stringify(chartValues(docs[0] ?? {})));
    const objs = await render({ valuesFile: path, apiVersions: ['monitoring.coreos.com/v1/ServiceMonitor'] });
    expect(find(objs, 'Deployment', `${RELEASE}-gateway`)).toBeDefined();
    expect(objs.filter((o) => o.kind === 'ServiceMonitor')).toHaveLength(2);
  });
});
