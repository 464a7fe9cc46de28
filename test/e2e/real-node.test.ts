// A real node (test/support/real-node.ts): a kubelet with containerd as its CRI joins the
// test control plane next to a KWOK node, and runs real pods of the images `make images`
// built: a plain pod of the simulator image, reached on its pod IP and through a Service
// (kube-proxy); then the chart, `helm install`ed with the locally built operator and gateway
// images, whose pods run there under their ServiceAccounts, and whose gateway serves a
// completion from SGLang simulators on the KWOK node's pod IPs (sim-kubelet.ts), as before
// and after a `helm upgrade` rolls both. On the way: CoreDNS resolves a Service for a pod, and
// kube-router enforces a NetworkPolicy. Skipped unless CACHEROUTE_REAL_NODE=1: it needs the node's binaries
// (`bash hack/build-controlplane.sh --node`), the pause image (`bash hack/images/pause.sh`),
// conntrack and the CNI plugins (`bash hack/install-test-deps.sh --real-node`), and it
// changes the machine's cgroup file system while it runs (a cgroup root of its own).
//
//   CACHEROUTE_REAL_NODE=1 bash hack/in-netns.sh npx vitest run --project e2e test/e2e/real-node.test.ts
//
// Ends with one line on stderr, `[real-node] {...}`: the time to the Node Ready and to the
// first pod Running.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDeploymentManifest } from '../support/builders.ts';
import { DEFAULT_CONTROLLERS } from '../support/components.ts';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { CHART_DIR, helm } from '../support/helm.ts';
import { buildImages, type BuiltImage, type ImageName } from '../support/images.ts';
import { eventually, kubectlOk } from '../support/kubectl.ts';
import {
  buildChartImageValues,
  findPauseArchive,
  importBuiltImages,
  startRealNode,
  REAL_NODE_POD_CIDR,
  type RealNode,
} from '../support/real-node.ts';
import { startSimKubelet, type SimKubelet } from '../support/sim-kubelet.ts';

const enabled = process.env['CACHEROUTE_REAL_NODE'] === '1';
const NS = 'e2e-real-node';
const NODE = 'real-node-0';

const RELEASE = 'cacheroute';
const RELEASE_NS = 'cacheroute-system';
const MODEL_NS = 'e2e-real-node-models';

let cp: ControlPlane;
let node: RealNode;
let images: Map<ImageName, BuiltImage>;
// The images as the node's CRI names them.
let refs: Map<ImageName, string>;
const report: Record<string, unknown> = {};

interface PodView {
  status?: { phase?: string; podIP?: string; conditions?: { type: string; status: string }[] };
  spec?: { nodeName?: string };
}

const k = (args: readonly string[], input?: string): Promise<string> =>
  kubectlOk(args, { kubeconfig: cp.kubeconfig, ...(input === undefined ? {} : { input }) });

async function getJson<T>(args: readonly string[]): Promise<T> {
  return JSON.parse(await k([...args, '-o', 'json'])) as T;
}

const getPod = (name: string): Promise<PodView> => getJson<PodView>(['-n', NS, 'get', 'pod', name]);

// A pod is refused until its namespace's default ServiceAccount exists (the admission plugin is on).
async function createNamespace(name: string): Promise<void> {
  await k(['create', 'namespace', name]);
  await eventually(() => k(['-n', name, 'get', 'serviceaccount', 'default']), { timeoutMs: 30_000 });
}

// eventually() rewrites the last error's message: a fetch failure's (a DOMException on a
// timeout) cannot be rewritten, so it is wrapped.
async function fetchOrThrow(url: string, init: RequestInit = {}): Promise<Response> {
  return fetch(url, { signal: AbortSignal.timeout(5_000), ...init }).catch((err: unknown) => {
    throw new Error(`${init.method ?? 'GET'} ${url}: ${String(err)}`);
  });
}

describe.skipIf(!enabled)('real-node', () => {
  beforeAll(async () => {
    images = await buildImages();
    // As a cluster has them for real pods: ServiceAccount tokens, and the kube-root-ca.crt
    // ConfigMap their projected volume reads the CA from.
    cp = await startControlPlane({
      full: true,
      gpuNodes: 1,
      serviceAccountAdmission: true,
      controllers: [...DEFAULT_CONTROLLERS, 'root-ca-cert-publisher'],
    });
    node = await startRealNode({
      cp,
      pauseArchive: await findPauseArchive(),
      kubeProxy: true,
      dns: true,
      networkPolicy: true,
    });
    report['nodeReadyMs'] = node.readyMs;
    refs = await importBuiltImages(node, images);
    await createNamespace(NS);
  });

  afterAll(async () => {
    await node?.stop();
    await cp?.stop();
    process.stderr.write(`[real-node] ${JSON.stringify(report)}\n`);
  });

  it('the kubelet registers its Node, Ready, beside the KWOK node', async () => {
    const nodes = await getJson<{
      items: {
        metadata: { name: string };
        status: { nodeInfo: Record<string, string>; addresses: { address: string }[] };
      }[];
    }>(['get', 'nodes']);
    expect(nodes.items.map((n) => n.metadata.name).sort()).toEqual(['gpu-node-0', NODE]);
    const real = nodes.items.find((n) => n.metadata.name === NODE);
    expect(real?.status.nodeInfo).toMatchObject({
      kubeletVersion: cp.version,
      containerRuntimeVersion: expect.stringMatching(/^containerd:\/\/1\.6\./),
    });
    expect(real?.status.addresses.map((a) => a.address)).toContain(cp.hostIP);
  });

  it('runs a pod of the simulator image under its securityContext, reachable on its pod IP', async () => {
    const started = performance.now();
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'sim', namespace: NS, labels: { app: 'sim' } },
      spec: {
        nodeSelector: { 'cacheroute.dev/real-node': 'true' },
        automountServiceAccountToken: false,
        securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
        containers: [
          {
            name: 'sim',
            image: refs.get('simulator'),
            imagePullPolicy: 'Never',
            args: ['--model-path', 'm', '--host', '0.0.0.0', '--port', '30000'],
            ports: [{ containerPort: 30000 }],
            readinessProbe: { httpGet: { path: '/health', port: 30000 }, periodSeconds: 1 },
            securityContext: {
              readOnlyRootFilesystem: true,
              allowPrivilegeEscalation: false,
              capabilities: { drop: ['ALL'] },
            },
            volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
          },
        ],
        volumes: [{ name: 'tmp', emptyDir: {} }],
      },
    };
    await k(['apply', '-f', '-'], JSON.stringify(pod));
    const ready = await eventually(
      async () => {
        const p = await getPod('sim');
        expect(p.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
        return p;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    report['podReadyMs'] = Math.round(performance.now() - started);
    expect(ready.spec?.nodeName).toBe(NODE);
    expect(ready.status?.phase).toBe('Running');
    const ip = ready.status?.podIP ?? '';
    expect(ip.startsWith(REAL_NODE_POD_CIDR.split('.').slice(0, 3).join('.'))).toBe(true);
    const info = (await (await fetch(`http://${ip}:30000/server_info`)).json()) as Record<string, unknown>;
    expect(info).toMatchObject({ model_path: 'm', port: 30000 });
  });

  it('kube-proxy routes a ClusterIP Service to that pod', async () => {
    const svc = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'sim', namespace: NS },
      spec: { selector: { app: 'sim' }, ports: [{ port: 80, targetPort: 30000 }] },
    };
    await k(['apply', '-f', '-'], JSON.stringify(svc));
    const clusterIP = (await k(['-n', NS, 'get', 'svc', 'sim', '-o', 'jsonpath={.spec.clusterIP}'])).trim();
    const info = await eventually(
      async () =>
        (await (await fetchOrThrow(`http://${clusterIP}/server_info`)).json()) as Record<string, unknown>,
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(info).toMatchObject({ model_path: 'm' });
  });

  // A pod of the simulator image's Node as a client: resolves `sim` (CoreDNS, the search
  // domains), fetches its /server_info through the Service (kube-proxy), exits 0 only on the
  // right answer, 2 when it got none. Returns its phase and its log.
  const runClient = async (
    name: string,
    labels: Record<string, string>,
    attempts = 30,
  ): Promise<{ phase: string | undefined; log: string }> => {
    // Tries `attempts` times a second apart: a new pod's address reaches kube-router's rules a
    // moment after it starts (seconds on a busy machine), as on any cluster that enforces
    // NetworkPolicies.
    const script = [
      "const dns = require('node:dns').promises;",
      '(async () => {',
      '  let last;',
      `  for (let i = 0; i < ${attempts}; i++) {`,
      '    try {',
      "      const { address } = await dns.lookup('sim');",
      "      const res = await fetch('http://sim.e2e-real-node.svc/server_info', { signal: AbortSignal.timeout(3000) });",
      '      const info = await res.json();',
      '      console.log(`sim is ${address}, serving ${info.model_path}`);',
      "      process.exit(info.model_path === 'm' ? 0 : 1);",
      '    } catch (err) {',
      '      last = err;',
      '      await new Promise((r) => setTimeout(r, 1000));',
      '    }',
      '  }',
      '  console.error(`failed: ${last.cause?.code ?? last.name}`);',
      '  process.exit(2);',
      '})();',
    ].join('\n');
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: NS, labels },
      spec: {
        nodeSelector: { 'cacheroute.dev/real-node': 'true' },
        restartPolicy: 'Never',
        automountServiceAccountToken: false,
        securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
        containers: [
          {
            name: 'client',
            image: refs.get('simulator'),
            imagePullPolicy: 'Never',
            command: ['/usr/local/bin/node', '-e', script],
            securityContext: {
              readOnlyRootFilesystem: true,
              allowPrivilegeEscalation: false,
              capabilities: { drop: ['ALL'] },
            },
          },
        ],
      },
    };
    await k(['apply', '-f', '-'], JSON.stringify(pod));
    const phase = await eventually(
      async () => {
        const p = await getPod(name);
        expect(['Succeeded', 'Failed']).toContain(p.status?.phase);
        return p.status?.phase;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    return { phase, log: node.podLog(NS, name, 'client') };
  };

  it('a pod resolves that Service by name (CoreDNS) and reaches it through kube-proxy', async () => {
    const { phase, log } = await runClient('client', {});
    const clusterIP = (await k(['-n', NS, 'get', 'svc', 'sim', '-o', 'jsonpath={.spec.clusterIP}'])).trim();
    expect(phase, log).toBe('Succeeded');
    expect(log).toContain(`sim is ${clusterIP}, serving m`);
  });

  it('enforces a NetworkPolicy (kube-router): only the pods it admits reach the simulator pod', async () => {
    const policy = {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'sim', namespace: NS },
      spec: {
        podSelector: { matchLabels: { app: 'sim' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ podSelector: { matchLabels: { access: 'allowed' } } }] }],
      },
    };
    await k(['apply', '-f', '-'], JSON.stringify(policy));
    // kube-router applies a policy a moment after its event: a client that ran before that got
    // through, and the next one is tried.
    let attempt = 0;
    const refused = await eventually(
      async () => {
        const r = await runClient(`client-refused-${attempt++}`, { access: 'other' }, 5);
        expect(r.phase, r.log).toBe('Failed');
        return r;
      },
      { timeoutMs: 120_000, intervalMs: 1_000 },
    );
    expect(refused.log).toMatch(/^failed: /m);
    // The policy admits what it names: not everything is refused.
    const admitted = await runClient('client-admitted', { access: 'allowed' });
    expect(admitted.phase, admitted.log).toBe('Succeeded');
    report['networkPolicyAttempts'] = attempt;
    await k(['-n', NS, 'delete', 'networkpolicy', 'sim']);
  });

  describe('the chart, helm-installed with the images built here', () => {
    let helmDir: string;
    let simKubelet: SimKubelet;

    const helmOk = async (args: readonly string[]): Promise<string> => {
      const res = await helm([...args, '--kubeconfig', cp.kubeconfig], { timeoutMs: 360_000 });
      if (res.code !== 0) throw new Error(`helm ${args.join(' ')} exited ${res.code}: ${res.stderr.trim()}`);
      return res.stdout;
    };
    interface ChartPod {
      metadata: { name: string; labels: Record<string, string> };
      spec: {
        nodeName?: string;
        serviceAccountName?: string;
        volumes?: { name: string; projected?: { sources: { serviceAccountToken?: unknown }[] } }[];
      };
      status: {
        phase?: string;
        conditions?: { type: string; status: string }[];
        containerStatuses?: { ready: boolean; restartCount: number }[];
      };
    }
    const chartPods = async (component: 'operator' | 'gateway'): Promise<ChartPod[]> =>
      (
        await getJson<{ items: ChartPod[] }>([
          '-n',
          RELEASE_NS,
          'get',
          'pods',
          '-l',
          `app.kubernetes.io/component=${component}`,
        ])
      ).items;
    // Each Ready on the real node, probes passing, under the chart's ServiceAccount with a projected token.
    const expectRunningHere = async (component: 'operator' | 'gateway'): Promise<ChartPod[]> => {
      const pods = await chartPods(component);
      const sa = (
        await k([
          '-n',
          RELEASE_NS,
          'get',
          'sa',
          '-l',
          `app.kubernetes.io/component=${component}`,
          '-o',
          'name',
        ])
      )
        .trim()
        .replace(/^serviceaccount\//, '');
      expect(pods.length).toBeGreaterThan(0);
      for (const pod of pods) {
        expect(pod.spec.nodeName, pod.metadata.name).toBe(NODE);
        expect(pod.status.phase).toBe('Running');
        expect(pod.status.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
        expect(pod.status.containerStatuses?.every((c) => c.ready)).toBe(true);
        expect(pod.spec.serviceAccountName).toBe(sa);
        expect(
          pod.spec.volumes?.some((v) =>
            v.projected?.sources.some((src) => src.serviceAccountToken !== undefined),
          ),
        ).toBe(true);
      }
      return pods;
    };
    const chatCompletion = async (): Promise<{ status: number; endpoint: string | null; body: string }> => {
      const clusterIP = (
        await k(['-n', RELEASE_NS, 'get', 'svc', `${RELEASE}-gateway`, '-o', 'jsonpath={.spec.clusterIP}'])
      ).trim();
      const res = await fetchOrThrow(`http://${clusterIP}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'llama-8b',
          messages: [{ role: 'user', content: 'Hello from the real node' }],
          max_tokens: 4,
        }),
      });
      return {
        status: res.status,
        endpoint: res.headers.get('x-cacheroute-endpoint'),
        body: await res.text(),
      };
    };

    beforeAll(async () => {
      helmDir = mkdtempSync(join(tmpdir(), 'cacheroute-real-node-helm-'));
      for (const v of ['HELM_CACHE_HOME', 'HELM_CONFIG_HOME', 'HELM_DATA_HOME'])
        process.env[v] = join(helmDir, v.toLowerCase());
      // The SGLang pods go to the KWOK GPU node, where simulators serve on their pod IPs.
      simKubelet = await startSimKubelet({ kubeconfig: cp.kubeconfig });
    });

    afterAll(async () => {
      await simKubelet?.stop();
      if (helmDir) rmSync(helmDir, { recursive: true, force: true });
    });

    it('helm install: the operator and gateway run as real pods on the real node, probes passing, PDBs and NetworkPolicies applied', async () => {
      const started = performance.now();
      const values = join(helmDir, 'images.values.json');
      const images = buildChartImageValues(refs);
      writeFileSync(
        values,
        JSON.stringify({
          operator: images.operator,
          gateway: { ...images.gateway, auth: { mode: 'open' } },
          // Enforced on the real node's pods by kube-router (their default peers admit every source).
          networkPolicy: { enabled: true },
        }),
      );
      const out = await helmOk([
        'install',
        RELEASE,
        CHART_DIR,
        '--namespace',
        RELEASE_NS,
        '--create-namespace',
        '--values',
        values,
        '--wait',
        '--timeout',
        '4m',
      ]);
      expect(out).toContain('STATUS: deployed');
      report['helmInstallMs'] = Math.round(performance.now() - started);
      await expectRunningHere('operator');
      await expectRunningHere('gateway');
      // The disruption controller counts the pods the PDBs cover.
      await eventually(
        async () => {
          const pdbs = await getJson<{
            items: { metadata: { name: string }; status?: { currentHealthy?: number } }[];
          }>(['-n', RELEASE_NS, 'get', 'pdb']);
          expect(pdbs.items.map((p) => [p.metadata.name, p.status?.currentHealthy]).sort()).toEqual([
            [`${RELEASE}-gateway`, 1],
            [`${RELEASE}-operator`, 1],
          ]);
        },
        { timeoutMs: 30_000 },
      );
      const policies = await getJson<{ items: { metadata: { name: string } }[] }>([
        '-n',
        RELEASE_NS,
        'get',
        'networkpolicy',
      ]);
      expect(policies.items.map((p) => p.metadata.name).sort()).toEqual([
        `${RELEASE}-gateway`,
        `${RELEASE}-operator`,
      ]);
    });

    it('the gateway pod serves a chat completion, through its Service, from the SGLang pods the operator pod verified', async () => {
      await createNamespace(MODEL_NS);
      await k(
        ['-n', MODEL_NS, 'apply', '-f', '-'],
        JSON.stringify(buildDeploymentManifest({ name: 'dense', replicas: 1 })),
      );
      await eventually(
        async () => {
          const d = await getJson<{ status?: { conditions?: { type: string; status: string }[] } }>([
            '-n',
            MODEL_NS,
            'get',
            'sgd',
            'dense',
          ]);
          expect(d.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
        },
        { timeoutMs: 120_000, intervalMs: 500 },
      );
      const res = await eventually(
        async () => {
          const r = await chatCompletion();
          expect(r.status, r.body).toBe(200);
          return r;
        },
        { timeoutMs: 60_000, intervalMs: 500 },
      );
      expect(
        (JSON.parse(res.body) as { usage?: { completion_tokens: number } }).usage?.completion_tokens,
      ).toBe(4);
      expect(res.endpoint).toMatch(new RegExp(`^${MODEL_NS}/dense-sglang-`));
      // The runtime's NetworkPolicy the operator pod made (runtimeNetworkPolicy.enabled, the default).
      const policies = await getJson<{ items: unknown[] }>(['-n', MODEL_NS, 'get', 'networkpolicy']);
      expect(policies.items).toHaveLength(1);
    });

    it('helm upgrade rolls both onto new pods on the real node, which serve as the old ones did', async () => {
      const before = new Set(
        [...(await chartPods('operator')), ...(await chartPods('gateway'))].map((p) => p.metadata.name),
      );
      const started = performance.now();
      await helmOk([
        'upgrade',
        RELEASE,
        CHART_DIR,
        '--namespace',
        RELEASE_NS,
        '--reuse-values',
        '--set',
        'operator.logLevel=debug',
        '--set',
        'gateway.logLevel=debug',
        '--wait',
        '--timeout',
        '4m',
      ]);
      report['helmUpgradeMs'] = Math.round(performance.now() - started);
      await eventually(
        async () => {
          const after = [...(await expectRunningHere('operator')), ...(await expectRunningHere('gateway'))];
          expect(after.filter((p) => before.has(p.metadata.name))).toEqual([]);
        },
        { timeoutMs: 120_000, intervalMs: 1_000 },
      );
      const res = await eventually(
        async () => {
          const r = await chatCompletion();
          expect(r.status, r.body).toBe(200);
          return r;
        },
        { timeoutMs: 60_000, intervalMs: 500 },
      );
      expect(res.endpoint).toMatch(new RegExp(`^${MODEL_NS}/dense-sglang-`));
    });
  });
});
