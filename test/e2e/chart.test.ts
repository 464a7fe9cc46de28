// The chart installed with Helm into a real cluster: install (CRDs included),
// upgrade with changed values, a refused upgrade that leaves the release as it was,
// rollback and uninstall. On the local control plane KWOK runs the pods (it marks
// them Running and Ready; no image is pulled), so this checks what Helm and the
// API server do with the chart, not the images. With CACHEROUTE_E2E_KUBECONFIG
// (hack/kind-up.sh, `make test-e2e-kind`) the same test runs against that cluster,
// where the images really run, with the image values in CACHEROUTE_E2E_VALUES.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { CHART_DIR, helm, type HelmResult } from '../support/helm.ts';
import { eventually, kubectl, kubectlOk } from '../support/kubectl.ts';

const EXTERNAL_KUBECONFIG = process.env['CACHEROUTE_E2E_KUBECONFIG'];
const EXTERNAL_VALUES = process.env['CACHEROUTE_E2E_VALUES'];
// On kind, hack/kind-up.sh's release `cacheroute` owns the cluster-scoped names (the
// ClusterRoles); this one must not collide with them.
const RELEASE = EXTERNAL_KUBECONFIG ? 'cacheroute-e2e' : 'cacheroute';
const NS = 'cacheroute-e2e';
// Real pods pull and start images; KWOK's are Ready at once.
const WAIT = EXTERNAL_KUBECONFIG ? '5m' : '2m';

let cp: ControlPlane | undefined;
let kubeconfig: string;
let dir: string;

interface DeploymentObject {
  spec: { replicas: number; template: { spec: { containers: { image: string; args: string[] }[] } } };
  status: { readyReplicas?: number };
}

async function getJson<T>(args: string[]): Promise<T> {
  return JSON.parse(await kubectlOk([...args, '-o', 'json'], { kubeconfig })) as T;
}
const deployment = (name: string): Promise<DeploymentObject> =>
  getJson<DeploymentObject>(['-n', NS, 'get', 'deployment', name]);
const exists = async (args: string[]): Promise<boolean> =>
  (await kubectl(['get', ...args, '--ignore-not-found', '-o', 'name'], { kubeconfig })).stdout.trim() !== '';

function helmIn(args: string[]): Promise<HelmResult> {
  return helm([...args, '--kubeconfig', kubeconfig], { timeoutMs: 360_000 });
}

async function helmOk(args: string[]): Promise<string> {
  const res = await helmIn(args);
  if (res.code !== 0) throw new Error(`helm ${args.join(' ')} exited ${res.code}: ${res.stderr.trim()}`);
  return res.stdout;
}

function valuesFile(name: string, values: unknown): string {
  const path = join(dir, `${name}.values.json`);
  writeFileSync(path, JSON.stringify(values));
  return path;
}

// The chart's settings for this cluster: KWOK's fake nodes are the GPU pool, tainted,
// so the pods tolerate the taint there; on kind they run on the ordinary node. The
// operator watches only the test namespace (a Role there, no ClusterRole), beside any
// cacheroute already installed.
function base(): string[] {
  const tolerations = EXTERNAL_KUBECONFIG
    ? []
    : [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }];
  const values = valuesFile('base', {
    operator: { watchNamespaces: [NS], tolerations },
    gateway: { tolerations },
  });
  return ['--namespace', NS, '--values', values, ...(EXTERNAL_VALUES ? ['--values', EXTERNAL_VALUES] : [])];
}

async function revision(): Promise<{ revision: number; status: string }[]> {
  const out = await helmOk(['history', RELEASE, '--namespace', NS, '-o', 'json']);
  return (JSON.parse(out) as { revision: number; status: string }[]).map(({ revision, status }) => ({
    revision,
    status,
  }));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cacheroute-chart-e2e-'));
  // helm keeps its cache, config and data here, not in the user's home.
  for (const v of ['HELM_CACHE_HOME', 'HELM_CONFIG_HOME', 'HELM_DATA_HOME'])
    process.env[v] = join(dir, v.toLowerCase());
  if (EXTERNAL_KUBECONFIG) {
    kubeconfig = EXTERNAL_KUBECONFIG;
  } else {
    cp = await startControlPlane({ full: true, gpuNodes: 1 });
    kubeconfig = cp.kubeconfig;
  }
});

afterAll(async () => {
  if (EXTERNAL_KUBECONFIG) await helmIn(['uninstall', RELEASE, '--namespace', NS, '--wait']);
  await cp?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('helm install, upgrade, rollback, uninstall', () => {
  it('installs the CRDs, the operator and the gateway, and prints what to do next', async () => {
    const out = await helmOk([
      'install',
      RELEASE,
      CHART_DIR,
      ...base(),
      // Asked for, but this cluster has no Prometheus Operator: skipped, and the notes say so.
      ...(EXTERNAL_KUBECONFIG ? [] : ['--set', 'monitoring.podMonitor.enabled=true']),
      '--create-namespace',
      '--wait',
      '--timeout',
      WAIT,
    ]);
    expect(out).toContain('STATUS: deployed');
    expect(out).toContain(`http://${RELEASE}-gateway.${NS}.svc:80/v1`);
    expect(out).toContain('kubectl get cacheroute');
    if (!EXTERNAL_KUBECONFIG) {
      expect(out).toContain('WARNING: monitoring.podMonitor.enabled is true but this cluster does not serve');
      expect(await exists(['crd', 'podmonitors.monitoring.coreos.com'])).toBe(false);
    }
    for (const crd of ['deployments', 'cachepolicies', 'tasks'])
      await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', `crd/${crd}.cacheroute.dev`], {
        kubeconfig,
      });
    const operator = await deployment(`${RELEASE}-operator`);
    expect(operator.status.readyReplicas).toBe(1);
    expect(operator.spec.template.spec.containers[0]?.args).toEqual(
      expect.arrayContaining([`--namespace=${NS}`, `--lease-namespace=${NS}`, '--log-level=info']),
    );
    const gateway = await deployment(`${RELEASE}-gateway`);
    expect(gateway.status.readyReplicas).toBe(1);
    if (!EXTERNAL_VALUES)
      expect(gateway.spec.template.spec.containers[0]?.image).toBe('ghcr.io/cacheroute/gateway:0.1.0');
    expect(await exists(['clusterrole', `${RELEASE}-gateway`])).toBe(true);
    expect(await exists(['clusterrole', `${RELEASE}-operator`])).toBe(false);
    expect(await exists(['-n', NS, 'role', `${RELEASE}-operator`])).toBe(true);
    expect(await exists(['-n', NS, 'poddisruptionbudget', `${RELEASE}-gateway`])).toBe(true);
    expect(await exists(['-n', NS, 'service', `${RELEASE}-operator-metrics`])).toBe(true);
    // The category answers (no objects yet), which needs all three CRDs served.
    const res = await kubectl(['get', 'cacheroute', '-n', NS], { kubeconfig });
    expect(res.code).toBe(0);
    expect(await revision()).toEqual([{ revision: 1, status: 'deployed' }]);
  });

  it('upgrades with new values: replicas, Redis, log level, gateway RBAC narrowed to Roles', async () => {
    // The key that signs reuse entries, which the chart requires with Redis.
    await kubectlOk(
      ['-n', NS, 'create', 'secret', 'generic', 'reuse-hmac', `--from-literal=hmac-key=${'k'.repeat(64)}`],
      { kubeconfig },
    );
    const values = valuesFile('upgrade', {
      operator: { logLevel: 'debug' },
      gateway: {
        replicas: 2,
        redis: {
          url: `redis://redis.${NS}.svc:6379/0`,
          reuseHmac: { existingSecret: { name: 'reuse-hmac' } },
        },
        watchNamespaces: [NS],
      },
    });
    await helmOk(['upgrade', RELEASE, CHART_DIR, ...base(), '--values', values, '--wait', '--timeout', WAIT]);
    const gateway = await deployment(`${RELEASE}-gateway`);
    expect(gateway.spec.replicas).toBe(2);
    expect(gateway.spec.template.spec.containers[0]?.args).toEqual(
      expect.arrayContaining([
        `--redis-url=redis://redis.${NS}.svc:6379/0`,
        '--reuse-hmac-key-file=/var/run/secrets/cacheroute/reuse-hmac/key',
        `--namespace=${NS}`,
      ]),
    );
    await eventually(
      async () => expect((await deployment(`${RELEASE}-gateway`)).status.readyReplicas).toBe(2),
      {
        timeoutMs: 60_000,
      },
    );
    const operator = await deployment(`${RELEASE}-operator`);
    expect(operator.spec.template.spec.containers[0]?.args).toContain('--log-level=debug');
    expect(await exists(['clusterrole', `${RELEASE}-gateway`])).toBe(false);
    expect(await exists(['-n', NS, 'role', `${RELEASE}-gateway`])).toBe(true);
    expect(await revision()).toEqual([
      { revision: 1, status: 'superseded' },
      { revision: 2, status: 'deployed' },
    ]);
  });

  it('refuses an upgrade with bad values and leaves the release as it was', async () => {
    const res = await helmIn(['upgrade', RELEASE, CHART_DIR, ...base(), '--set', 'gateway.replicas=-1']);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain("at '/gateway/replicas': minimum: got -1, want 0");
    expect((await revision()).at(-1)).toEqual({ revision: 2, status: 'deployed' });
    expect((await deployment(`${RELEASE}-gateway`)).spec.replicas).toBe(2);
  });

  it('rolls back to the first revision', async () => {
    await helmOk(['rollback', RELEASE, '1', '--namespace', NS, '--wait', '--timeout', WAIT]);
    expect((await deployment(`${RELEASE}-gateway`)).spec.replicas).toBe(1);
    expect(await exists(['clusterrole', `${RELEASE}-gateway`])).toBe(true);
    expect((await revision()).at(-1)).toEqual({ revision: 3, status: 'deployed' });
  });

  it('uninstalls everything but the CRDs (Helm never deletes CRDs: that would delete every resource)', async () => {
    if (EXTERNAL_KUBECONFIG) return; // afterAll uninstalls, after any failure too.
    await helmOk(['uninstall', RELEASE, '--namespace', NS, '--wait']);
    expect(await exists(['-n', NS, 'deployment', `${RELEASE}-operator`])).toBe(false);
    expect(await exists(['clusterrole', `${RELEASE}-gateway`])).toBe(false);
    expect(await exists(['crd', 'deployments.cacheroute.dev'])).toBe(true);
  });
});
