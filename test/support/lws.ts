// The real LeaderWorkerSet controller (sigs.k8s.io/lws, built by hack/build-controlplane.sh)
// beside a test control plane, run as its release runs it but out of cluster: its CRD
// applied, the manager on the host address with a serving certificate from the plane's
// serving CA (its internal cert rotation wants a Service and Secret in a cluster, so it
// is off), and its webhooks registered by URL, as the release's kustomize config
// registers them by Service. Leader election is off (one manager) and metrics are off.
// Needs hack/in-netns.sh, like a full plane.
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:tls';
import { dirname, join } from 'node:path';
import { expect } from 'vitest';
import { listensOn, withFreshPorts } from './fresh-ports.ts';
import { eventually, kubectlOk } from './kubectl.ts';
import { issueServingCert, pkiPaths } from './pki.ts';
import { httpStatus, spawnManaged, stopManaged, waitUntilAnswering } from './processes.ts';

export const LWS_VERSION = process.env['LWS_VERSION'] ?? 'v0.7.0';
export const LWS_BINARY = 'lws-manager';

/** Where the build script puts the LWS CRD: beside bin/, named by version. */
export function findLwsCrd(binDir: string): string {
  const path = join(dirname(binDir), `lws-${LWS_VERSION}-crd.yaml`);
  if (!existsSync(path) || !existsSync(join(binDir, LWS_BINARY)))
    throw new Error(`the LeaderWorkerSet controller ${LWS_VERSION} is not built: run \`make controlplane\``);
  return path;
}

/** The manager's Configuration (config.lws.x-k8s.io/v1alpha1): out of cluster, one replica. */
export function buildLwsConfig(at: {
  hostIP: string;
  webhookPort: number;
  probePort: number;
  certDir: string;
}): string {
  return JSON.stringify({
    apiVersion: 'config.lws.x-k8s.io/v1alpha1',
    kind: 'Configuration',
    leaderElection: { leaderElect: false },
    internalCertManagement: { enable: false },
    webhook: { host: at.hostIP, port: at.webhookPort, certDir: at.certDir },
    metrics: { bindAddress: '0' },
    health: { healthProbeBindAddress: `127.0.0.1:${at.probePort}` },
  });
}

const POD_SELECTOR = {
  matchExpressions: [{ key: 'leaderworkerset.sigs.k8s.io/name', operator: 'Exists' }],
};

/**
 * The release's webhook configurations (config/webhook/manifests.yaml with its patches: the pod
 * webhooks only see LWS pods), each pointing at `base` by URL instead of at a Service.
 */
export function buildLwsWebhooks(base: string, caBundle: string): object[] {
  const hook = (name: string, path: string, resources: object, extra: object = {}) => ({
    name,
    admissionReviewVersions: ['v1'],
    clientConfig: { url: `${base}${path}`, caBundle },
    failurePolicy: 'Fail',
    sideEffects: 'None',
    rules: [resources],
    ...extra,
  });
  const lws = {
    apiGroups: ['leaderworkerset.x-k8s.io'],
    apiVersions: ['v1'],
    operations: ['CREATE', 'UPDATE'],
    resources: ['leaderworkersets'],
  };
  const pods = (operations: string[]) => ({
    apiGroups: [''],
    apiVersions: ['v1'],
    operations,
    resources: ['pods'],
  });
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: 'lws-mutating-webhook-configuration' },
      webhooks: [
        hook('mleaderworkerset.kb.io', '/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset', lws),
        hook('mpod.kb.io', '/mutate--v1-pod', pods(['CREATE', 'UPDATE']), { objectSelector: POD_SELECTOR }),
      ],
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata: { name: 'lws-validating-webhook-configuration' },
      webhooks: [
        hook('vleaderworkerset.kb.io', '/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset', lws),
        hook('vpod.kb.io', '/validate--v1-pod', pods(['CREATE', 'UPDATE']), { objectSelector: POD_SELECTOR }),
      ],
    },
  ];
}

export interface LwsController {
  readonly logPath: string;
  stop(): Promise<void>;
}

/** Starts the LWS manager for a full control plane and waits until its webhooks answer. */
export async function startLwsController(cp: {
  binDir: string;
  dir: string;
  kubeconfig: string;
  hostIP: string;
}): Promise<LwsController> {
  const started = performance.now();
  const crd = findLwsCrd(cp.binDir);
  await kubectlOk(['apply', '--server-side', '-f', crd], { kubeconfig: cp.kubeconfig });
  // Not `kubectl wait`: it fails outright on a CRD whose status has no conditions yet.
  await eventually(
    async () => {
      const established = await kubectlOk(
        [
          'get',
          'crd',
          'leaderworkersets.leaderworkerset.x-k8s.io',
          '-o',
          'jsonpath={.status.conditions[?(@.type=="Established")].status}',
        ],
        { kubeconfig: cp.kubeconfig },
      );
      expect(established).toBe('True');
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  const pkiDir = pkiPaths(join(cp.dir, 'pki')).dir;
  const cert = await issueServingCert(pkiDir, 'lws-webhook', { ips: [cp.hostIP], dnsNames: [] });
  // controller-runtime's webhook server reads tls.crt and tls.key from its cert dir.
  const certDir = join(cp.dir, 'lws-certs');
  mkdirSync(certDir, { recursive: true, mode: 0o700 });
  copyFileSync(cert.cert, join(certDir, 'tls.crt'));
  copyFileSync(cert.key, join(certDir, 'tls.key'));
  const configPath = join(cp.dir, 'lws-config.yaml');
  const logPath = join(cp.dir, `${LWS_BINARY}.log`);
  // Its webhook port is in the webhook configuration, so known before it starts (fresh-ports.ts).
  const { proc, webhookPort } = await withFreshPorts(
    2,
    async ([webhookPort = 0, probePort = 0]) => {
      writeFileSync(configPath, buildLwsConfig({ hostIP: cp.hostIP, webhookPort, probePort, certDir }));
      const proc = spawnManaged(
        LWS_BINARY,
        join(cp.binDir, LWS_BINARY),
        [
          '--kubeconfig',
          cp.kubeconfig,
          '--config',
          configPath,
          '--leader-elect=false',
          '--metrics-bind-address=0',
        ],
        { logPath },
      );
      try {
        await waitUntilAnswering(
          proc,
          async () =>
            (await httpStatus(`http://127.0.0.1:${probePort}/readyz`)) === 200 &&
            listensOn(proc.pid, probePort),
          { what: '/readyz', timeoutMs: 60_000, intervalMs: 200 },
        );
        await waitUntilAnswering(
          proc,
          async () => (await acceptsTls(cp.hostIP, webhookPort)) && listensOn(proc.pid, webhookPort),
          { what: 'TLS on its webhook port', timeoutMs: 60_000, intervalMs: 200 },
        );
      } catch (err) {
        await stopManaged(proc);
        throw err;
      }
      return { proc, webhookPort };
    },
    { what: LWS_BINARY },
  );
  const stop = (): Promise<void> => stopManaged(proc);
  try {
    const caBundle = readFileSync(pkiPaths(pkiDir).servingCa.cert).toString('base64');
    await kubectlOk(['apply', '-f', '-'], {
      kubeconfig: cp.kubeconfig,
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: buildLwsWebhooks(`https://${cp.hostIP}:${webhookPort}`, caBundle),
      }),
    });
    // The API server calls the defaulting webhook for a dry-run create: it answers once wired.
    await eventually(
      async () => {
        const out = await kubectlOk(['create', '--dry-run=server', '-o', 'json', '-f', '-'], {
          kubeconfig: cp.kubeconfig,
          input: JSON.stringify(PROBE_LWS),
        });
        const probe = JSON.parse(out) as { spec?: { networkConfig?: { subdomainPolicy?: string } } };
        expect(probe.spec?.networkConfig?.subdomainPolicy).toBe('Shared');
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
  } catch (err) {
    await stop();
    throw err;
  }
  process.stderr.write(
    `[controlplane] LeaderWorkerSet ${LWS_VERSION} ready in ${Math.round(performance.now() - started)}ms\n`,
  );
  return { logPath, stop };
}

// A LeaderWorkerSet only the defaulting webhook fills in: networkConfig.subdomainPolicy, which the CRD does not default.
const PROBE_LWS = {
  apiVersion: 'leaderworkerset.x-k8s.io/v1',
  kind: 'LeaderWorkerSet',
  metadata: { name: 'webhook-probe', namespace: 'default' },
  spec: {
    leaderWorkerTemplate: {
      size: 2,
      workerTemplate: { spec: { containers: [{ name: 'c', image: 'example.invalid/probe' }] } },
    },
  },
};

function acceptsTls(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, rejectUnauthorized: false, timeout: 2_000 }, () => {
      socket.end();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
    socket.on('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}
