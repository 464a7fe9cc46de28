// A real node (test/support/real-node.ts): a kubelet with containerd as its CRI joins the
// test control plane next to a KWOK node, and runs real pods of the images `make images`
// built. Skipped unless CACHEROUTE_REAL_NODE=1: it needs the node's binaries
// (`bash hack/build-controlplane.sh --node`), the pause image (`bash hack/images/pause.sh`),
// conntrack and the CNI plugins (`bash hack/install-test-deps.sh --real-node`), and it
// changes the machine's cgroup file system while it runs (a cgroup root of its own).
//
//   CACHEROUTE_REAL_NODE=1 bash hack/in-netns.sh npx vitest run --project e2e test/e2e/real-node.test.ts
//
// Ends with one line on stderr, `[real-node] {...}`: the time to the Node Ready and to the
// first pod Running.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { buildImages, type BuiltImage } from '../support/images.ts';
import { eventually, kubectlOk } from '../support/kubectl.ts';
import { startRealNode, REAL_NODE_POD_CIDR, type RealNode } from '../support/real-node.ts';
import { REPO_ROOT } from '../support/samples.ts';

const enabled = process.env['CACHEROUTE_REAL_NODE'] === '1';
const NS = 'e2e-real-node';
const NODE = 'real-node-0';

let cp: ControlPlane;
let node: RealNode;
let simulator: BuiltImage;
let simulatorRef: string;
const report: Record<string, unknown> = {};

function pauseArchive(): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'bash',
      [join(REPO_ROOT, 'hack', 'images', 'pause.sh')],
      { env: { ...process.env, IMAGES_CACHED_ONLY: '1' } },
      (err, stdout, stderr) => {
        const archive = stdout.trim().split(/\s+/)[1];
        if (err || archive === undefined)
          reject(new Error(`hack/images/pause.sh: ${stderr.trim()}`, { cause: err }));
        else resolve(archive);
      },
    );
  });
}

interface PodView {
  status?: { phase?: string; podIP?: string; conditions?: { type: string; status: string }[] };
  spec?: { nodeName?: string };
}

async function getPod(name: string): Promise<PodView> {
  return JSON.parse(
    await kubectlOk(['-n', NS, 'get', 'pod', name, '-o', 'json'], { kubeconfig: cp.kubeconfig }),
  ) as PodView;
}

describe.skipIf(!enabled)('real-node', () => {
  beforeAll(async () => {
    const images = await buildImages();
    const sim = images.get('simulator');
    if (!sim) throw new Error('build.sh printed no simulator image');
    simulator = sim;
    cp = await startControlPlane({ full: true, gpuNodes: 1 });
    node = await startRealNode({ cp, pauseArchive: await pauseArchive(), kubeProxy: true });
    report['nodeReadyMs'] = node.readyMs;
    const imported = await node.importArchive(simulator.archive);
    expect(imported.map((i) => i.digest)).toEqual([simulator.digest]);
    simulatorRef = imported[0]?.ref ?? '';
    await kubectlOk(['create', 'namespace', NS], { kubeconfig: cp.kubeconfig });
  });

  afterAll(async () => {
    await node?.stop();
    await cp?.stop();
    process.stderr.write(`[real-node] ${JSON.stringify(report)}\n`);
  });

  it('the kubelet registers its Node, Ready, beside the KWOK node', async () => {
    const nodes = JSON.parse(
      await kubectlOk(['get', 'nodes', '-o', 'json'], { kubeconfig: cp.kubeconfig }),
    ) as {
      items: {
        metadata: { name: string };
        status: { nodeInfo: Record<string, string>; addresses: { address: string }[] };
      }[];
    };
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
            image: simulatorRef,
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
    await kubectlOk(['apply', '-f', '-'], { kubeconfig: cp.kubeconfig, input: JSON.stringify(pod) });
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
    await kubectlOk(['apply', '-f', '-'], { kubeconfig: cp.kubeconfig, input: JSON.stringify(svc) });
    const clusterIP = (
      await kubectlOk(['-n', NS, 'get', 'svc', 'sim', '-o', 'jsonpath={.spec.clusterIP}'], {
        kubeconfig: cp.kubeconfig,
      })
    ).trim();
    const info = await eventually(
      async () => {
        // eventually() rewrites the last error's message: a fetch timeout's cannot be.
        const res = await fetch(`http://${clusterIP}/server_info`, {
          signal: AbortSignal.timeout(2_000),
        }).catch((err: unknown) => {
          throw new Error(`GET http://${clusterIP}/server_info: ${String(err)}`);
        });
        return (await res.json()) as Record<string, unknown>;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(info).toMatchObject({ model_path: 'm' });
  });
});
