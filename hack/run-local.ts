// `make run`: the whole system, locally, without Docker. Outside the private
// network namespace this process keeps host ports that reach into it (so the
// printed kubectl and curl lines work as printed) and starts itself again
// inside hack/in-netns.sh, where everything runs: the control plane with fake
// GPU nodes, an SGLang simulator on every pod IP, the operator and the gateway
// as real processes, and the samples.
//
//   node hack/run-local.ts [--api-port=16443] [--gateway-port=8080] [--admin-port=9090] [--gpu-nodes=7] [--real-sglang]
//
// --real-sglang (make run REAL_SGLANG=1): the dense sample's pods run the real
// SGLang (the pinned release on CPU with the kit's tiny model,
// hack/sglang/README.md) instead of the simulator; the other samples stay
// simulated (prefill/decode and HiSparse need GPUs).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { buildDeploymentManifest } from '../test/support/builders.ts';
import { createChartIdentity } from '../test/support/helm.ts';
import { startControlPlane } from '../test/support/controlplane.ts';
import { eventually, kubectlOk } from '../test/support/kubectl.ts';
import { spawnManaged, stopManaged, type ManagedProcess } from '../test/support/processes.ts';
import { removeKitModelLink } from '../test/support/real-sglang.ts';
import { loadSamples } from '../test/support/samples.ts';
import { startSimKubelet } from '../test/support/sim-kubelet.ts';
import { MODEL_DIR } from '../operator/src/controllers/deployment/args.ts';
import { SGLANG_VERSION } from '../operator/src/sglang/catalogue.ts';
import { forwardTcpToUnix, forwardUnixToTcp } from './local-bridge.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const log = (msg: string): void => void process.stderr.write(`[run] ${msg}\n`);
const SYSTEM_NS = 'cacheroute-system';

function flag(name: string, fallback: number): number {
  const raw = process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
  const n = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} wants a whole number, got ${raw}`);
  return n;
}

function waitForSignal(): Promise<void> {
  return new Promise((resolve) => {
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => resolve());
  });
}

/** The host's ends of the bridges: the API server, the gateway's API and its admin listener. */
const LOCAL_PORTS = () => ({
  api: flag('api-port', 16443),
  gateway: flag('gateway-port', 8080),
  admin: flag('admin-port', 9090),
});

async function outside(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-run-'));
  const ports = LOCAL_PORTS();
  const bridges = await Promise.all([
    forwardTcpToUnix(ports.api, join(dir, 'apiserver.sock')),
    forwardTcpToUnix(ports.gateway, join(dir, 'gateway.sock')),
    forwardTcpToUnix(ports.admin, join(dir, 'gateway-admin.sock')),
  ]).catch((err: Error) => {
    throw new Error(
      `cannot listen on 127.0.0.1 (${err.message}); pass --api-port=<free> --gateway-port=<free> --admin-port=<free>`,
    );
  });
  const child = spawn(
    'bash',
    [
      join(ROOT, 'hack/in-netns.sh'),
      process.execPath,
      fileURLToPath(import.meta.url),
      `--inner=${dir}`,
      ...process.argv.slice(2),
    ],
    {
      stdio: 'inherit',
    },
  );
  // Ctrl-C reaches the child through the terminal; SIGTERM is passed on.
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => child.kill('SIGTERM'));
  const code = await new Promise<number>((resolve) =>
    child.on('exit', (c, s) => resolve(c ?? (s ? 130 : 1))),
  );
  for (const b of bridges) b.close();
  rmSync(dir, { recursive: true, force: true });
  process.exitCode = code;
}

/** The admin kubeconfig, pointed at the host end of the bridge instead of the namespace address. */
function writeHostKubeconfig(source: string, target: string, apiPort: number): void {
  const config = parse(readFileSync(source, 'utf8')) as { clusters: { cluster: { server: string } }[] };
  for (const c of config.clusters) c.cluster.server = `https://127.0.0.1:${apiPort}`;
  writeFileSync(target, stringify(config), { mode: 0o600 });
}

/** The samples, runnable on fake GPU nodes: model files from a host path (no PVC, no download). */
function buildLocalSamples(): string {
  const docs = loadSamples()
    .filter((s) => s.file !== 'task-openrouter.yaml') // needs the internet and a paid key
    .map((s) => (s.doc.kind === 'Deployment' ? buildDeploymentManifest({ sample: s.file }) : s.doc));
  return docs.map((d) => `---\n${stringify(d)}`).join('');
}

/** The Secret examples/tenant.yaml names, labelled for the gateway, with one key. */
function buildDemoKeySecret(key: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'team-a-keys', labels: { 'cacheroute.dev/api-keys': 'true' } },
    stringData: { 'key-1': key },
  };
}

// The sample whose pods run the real SGLang under --real-sglang.
const REAL_SAMPLE = 'llama-8b';

const WARMUP_DOCUMENT = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'shared-knowledge' },
  data: {
    'handbook.md': 'cacheroute handbook: every replica starts with this text already in its prefix cache.',
  },
};

function startProcess(dir: string, name: string, args: string[]): ManagedProcess {
  return spawnManaged(name, process.execPath, args, { logPath: join(dir, `${name}.log`), cwd: ROOT });
}

async function inside(dir: string): Promise<void> {
  const ports = LOCAL_PORTS();
  // The scheduler spreads pods (as Kubernetes does by default), so the samples' four small
  // pods can each take a node; seven leave three whole nodes for the 8-GPU prefill/decode pods.
  const cp = await startControlPlane({ full: true, gpuNodes: flag('gpu-nodes', 7), log });
  const server = new URL(cp.server);
  const bridges = [await forwardUnixToTcp(join(dir, 'apiserver.sock'), server.hostname, Number(server.port))];
  const kubeconfig = join(dir, 'kubeconfig');
  writeHostKubeconfig(cp.kubeconfig, kubeconfig, ports.api);
  const k = { kubeconfig: cp.kubeconfig };

  await kubectlOk(['apply', '--server-side', '-f', join(ROOT, 'crds')], k);
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', join(ROOT, 'crds')], k);
  await kubectlOk(['create', 'namespace', SYSTEM_NS], k);
  // The operator and the gateway run with exactly the chart's RBAC, as they would in a cluster.
  const identity = { release: 'cacheroute', namespace: SYSTEM_NS };
  const operatorKubeconfig = await createChartIdentity(cp, { ...identity, component: 'operator' });
  const gatewayKubeconfig = await createChartIdentity(cp, { ...identity, component: 'gateway' });
  const real = process.argv.includes('--real-sglang');
  const linksModelDir = real && !existsSync(MODEL_DIR);
  const kubelet = await startSimKubelet({
    kubeconfig: cp.kubeconfig,
    log: (m) => log(m),
    ...(real
      ? {
          realSglang: (pod) =>
            pod.metadata?.labels?.['cacheroute.dev/deployment'] === REAL_SAMPLE ? [] : undefined,
        }
      : {}),
  });
  const operator = startProcess(dir, 'operator', [
    join(ROOT, 'operator/src/main.ts'),
    `--kubeconfig=${operatorKubeconfig}`,
    `--lease-namespace=${SYSTEM_NS}`,
    '--metrics-host=127.0.0.1',
    '--metrics-port=8081',
  ]);
  const gatewayPort = 8080;
  const adminPort = 9090;
  const gateway = startProcess(dir, 'gateway', [
    '--max-semi-space-size=32', // as the gateway image runs it (gateway/Dockerfile)
    join(ROOT, 'gateway/src/server.ts'),
    `--kubeconfig=${gatewayKubeconfig}`,
    '--host=127.0.0.1',
    `--port=${gatewayPort}`,
    // As the chart runs it: status, metrics and probes on their own port, the API port only the API.
    `--admin-port=${adminPort}`,
  ]);
  bridges.push(await forwardUnixToTcp(join(dir, 'gateway.sock'), '127.0.0.1', gatewayPort));
  bridges.push(await forwardUnixToTcp(join(dir, 'gateway-admin.sock'), '127.0.0.1', adminPort));
  await kubectlOk(['apply', '-f', '-'], { ...k, input: JSON.stringify(WARMUP_DOCUMENT) });
  await kubectlOk(['apply', '-f', '-'], { ...k, input: buildLocalSamples() });
  // The sample Tenant's key: made here, as a user makes one (examples/tenant.yaml).
  const demoKey = randomBytes(24).toString('hex');
  await kubectlOk(['apply', '-f', '-'], { ...k, input: JSON.stringify(buildDemoKeySecret(demoKey)) });

  log(
    `waiting for llama-8b to be Ready (every endpoint verified${real ? ', from two real SGLang servers' : ''})`,
  );
  await eventually(
    async () => {
      const ready = await kubectlOk(
        ['get', 'sgd', 'llama-8b', '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'],
        k,
      );
      if (ready !== 'True') throw new Error(`llama-8b Ready=${ready || 'unknown'}`);
      const res = await fetch(`http://127.0.0.1:${gatewayPort}/v1/models`, {
        headers: { authorization: `Bearer ${demoKey}` },
      });
      const body = (await res.json()) as { data?: { id: string }[] };
      if (!body.data?.some((m) => m.id === 'llama-8b'))
        throw new Error('the gateway does not list llama-8b yet');
    },
    // A real SGLang takes 20-60 s to start on this machine, and the two start one after the other.
    { timeoutMs: real ? 360_000 : 120_000, intervalMs: 500 },
  );

  const kubectl = join(cp.binDir, 'kubectl');
  const request = JSON.stringify({
    model: 'llama-8b',
    messages: [{ role: 'user', content: 'Say hello to cacheroute.' }],
    max_tokens: 32,
  });
  process.stdout.write(
    [
      '',
      `cacheroute is up: kube-apiserver ${cp.version}, ${flag('gpu-nodes', 7)} fake 8-GPU nodes, the operator, the gateway,`,
      real
        ? `the real SGLang ${SGLANG_VERSION} (CPU, tiny model) on the ${REAL_SAMPLE} pods, a simulator on the others, and the samples from examples/.`
        : 'an SGLang simulator on every pod, and the samples from examples/.',
      '',
      `Gateway: http://127.0.0.1:${ports.gateway}   (status page and metrics: http://127.0.0.1:${ports.admin}/status, /metrics)`,
      '',
      `export KUBECONFIG=${kubeconfig}`,
      `${kubectl} get cacheroute`,
      '',
      `curl -s http://127.0.0.1:${ports.gateway}/v1/chat/completions -H 'authorization: Bearer ${demoKey}' -H 'content-type: application/json' -d '${request}'`,
      `(the sample Tenant team-a's key, from the Secret team-a-keys; without it the gateway answers 401)`,
      '',
      `Logs: ${dir}/operator.log ${dir}/gateway.log. Ctrl-C stops everything.`,
      '',
    ].join('\n'),
  );
  await waitForSignal();
  log('stopping');
  for (const b of bridges) b.close();
  await Promise.all([stopManaged(gateway), stopManaged(operator)]);
  await kubelet.stop();
  await cp.stop();
  if (linksModelDir) removeKitModelLink(MODEL_DIR);
}

const inner = process.argv.find((a) => a.startsWith('--inner='))?.slice('--inner='.length);
if (inner !== undefined) await inside(inner);
else await outside();
