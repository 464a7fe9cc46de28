// `make run`: the whole system, locally, without Docker. Outside the private
// network namespace this process keeps host ports that reach into it (so the
// printed kubectl and curl lines work as printed) and starts itself again
// inside hack/in-netns.sh, where everything runs: the control plane with fake
// GPU nodes, an SGLang simulator on every pod IP, the operator and the gateway
// as real processes, and the samples.
//
//   node hack/run-local.ts [--api-port=16443] [--gateway-port=8080] [--admin-port=9090] [--gpu-nodes=9]
//        [--real-sglang[=pd]] [--monitoring [--prometheus-port=9091]] [--real-node] [--picker [--envoy-port=8000]]
//
// --real-sglang (make run REAL_SGLANG=1): the dense sample's pods run the real
// SGLang (the pinned release on CPU with the kit's tiny model,
// hack/sglang/README.md) instead of the simulator; the other samples stay
// simulated (the PD sample's HiSparse decode needs a GPU).
//
// --real-sglang=pd (make run REAL_SGLANG=pd): instead, a prefill/decode Deployment
// (llama-8b-pd: the dense sample split into one prefill and one decode part, KV over
// Mooncake's TCP transport) is added and its pair runs the real SGLang; the dense sample
// is simulated. Either way two real servers, this machine's most.
//
// --monitoring (make run MONITORING=1): a real Prometheus (Debian's) scraping the
// operator, the gateway and every SGLang pod as the chart's scrape objects do,
// with the chart's alerts loaded (hack/monitoring/local-prometheus.ts).
//
// --picker (make run PICKER=1): the gateway also serves as an ext_proc endpoint picker
// (--mode both), the operator keeps an InferencePool per Deployment, and a real Envoy
// (hack/envoy/install.sh) stands for a GIE gateway with one HTTPRoute to the served sample's
// pool: its bootstrap (hack/envoy/bootstrap.ts) follows the pool's failureMode, read at start
// (hack/envoy/pool-route.ts: FailClose, GIE's reference bootstrap; FailOpen, the picker
// health-checked and the pool's Ready pods behind it, with their runtime keys), and a watch on
// the pool keeps Envoy on it (hack/envoy/follow-pool.ts: FailOpen's endpoints and keys from a
// file Envoy follows; a failureMode change is logged, and needs a restart). The printed curl
// goes through Envoy.
//
// --real-node (make run REAL_NODE=1): the operator and the gateway run as the chart's pods,
// `helm install`ed with the images `make images` built, on a real node beside the fake
// ones: a kubelet with containerd, the CNI bridge and kube-proxy (hack/local-real-node.ts,
// test/support/real-node.ts); the gateway's ports bridge to its Services.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { SGLANG_VERSION } from '#sglang/catalogue.ts';
import { eventually } from '../test/support/kubectl.ts';
import { startEnvoy, type RunningEnvoy } from '../test/support/envoy.ts';
import { followInferencePool, type PoolFollower } from './envoy/follow-pool.ts';
import { buildPickerRouteForPool, readInferencePool, type PoolView } from './envoy/pool-route.ts';
import {
  LOCAL_PORTS as LOCAL_SYSTEM_PORTS,
  ROOT,
  servedSample,
  startLocalSystem,
  type RealMode,
} from './local-system.ts';
import { forwardTcpToUnix, forwardUnixToTcp } from './local-bridge.ts';
import { startLocalPrometheus } from './monitoring/local-prometheus.ts';

const log = (msg: string): void => void process.stderr.write(`[run] ${msg}\n`);

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

/** The host's ends of the bridges: the API server, the gateway's API and its admin listener, Prometheus. */
const LOCAL_PORTS = () => ({
  api: flag('api-port', 16443),
  gateway: flag('gateway-port', 8080),
  admin: flag('admin-port', 9090),
  prometheus: flag('prometheus-port', 9091),
  envoy: flag('envoy-port', 8000),
});

async function outside(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-run-'));
  const ports = LOCAL_PORTS();
  const bridges = await Promise.all([
    forwardTcpToUnix(ports.api, join(dir, 'apiserver.sock')),
    forwardTcpToUnix(ports.gateway, join(dir, 'gateway.sock')),
    forwardTcpToUnix(ports.admin, join(dir, 'gateway-admin.sock')),
    ...(process.argv.includes('--monitoring')
      ? [forwardTcpToUnix(ports.prometheus, join(dir, 'prometheus.sock'))]
      : []),
    ...(process.argv.includes('--picker') ? [forwardTcpToUnix(ports.envoy, join(dir, 'envoy.sock'))] : []),
  ]).catch((err: Error) => {
    throw new Error(
      `cannot listen on 127.0.0.1 (${err.message}); pass --api-port=<free> --gateway-port=<free> --admin-port=<free> --prometheus-port=<free> --envoy-port=<free>`,
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

/** --real-sglang: the dense sample's pods; --real-sglang=pd: a prefill/decode pair. */
function realMode(): RealMode {
  const arg = process.argv.find((a) => a === '--real-sglang' || a.startsWith('--real-sglang='));
  if (arg === undefined) return false;
  const value = arg.split('=')[1];
  if (value === undefined || value === '1' || value === 'dense') return 'dense';
  if (value === 'pd') return 'pd';
  throw new Error(
    `--real-sglang wants nothing, 1, dense or pd, got ${value} (make run REAL_SGLANG=1 or REAL_SGLANG=pd)`,
  );
}

/**
 * Envoy as a GIE gateway with one HTTPRoute to the served sample's pool, which the operator keeps
 * (the samples go to the default namespace): its bootstrap follows the pool's failureMode, and
 * the follower the pool's endpoints and keys from then on.
 */
async function startPickerEnvoy(
  kubeconfig: string,
  model: string,
): Promise<{ envoy: RunningEnvoy; pool: PoolView; follower: PoolFollower }> {
  const pool = await eventually(() => readInferencePool(kubeconfig, 'default', model), {
    timeoutMs: 60_000,
    intervalMs: 500,
  });
  const route = buildPickerRouteForPool(pool, {
    port: LOCAL_SYSTEM_PORTS.picker,
    healthPort: LOCAL_SYSTEM_PORTS.pickerHealth,
  });
  const envoy = await startEnvoy(route);
  const follower = await followInferencePool({
    kubeconfig,
    namespace: pool.namespace,
    name: pool.name,
    failureMode: pool.failureMode,
    file: envoy.poolEndpointsFile,
    onOutcome: (o) => {
      if (o.kind === 'written') log(`Envoy's pool: ${o.view.endpoints.join(', ') || 'no Ready pod'}`);
      if (o.kind === 'not-followed') log(`Envoy's pool not followed: ${o.reason}`);
    },
  });
  return { envoy, pool, follower };
}

/** The lines that say how to go through Envoy, and what a picker outage does there. */
function envoyLines(pool: PoolView, envoyPort: number, demoKey: string, request: string): string[] {
  const outage =
    pool.failureMode === 'FailOpen'
      ? `with the picker down, Envoy sends to the pool's Ready pods itself (${pool.endpoints.length} now), with their runtime key and no tenant's`
      : 'with the picker down, Envoy answers 500';
  return [
    '',
    `Through Envoy 1.40 asking the gateway's endpoint picker (ext_proc) which pod serves it, as a GIE gateway`,
    `routing to the InferencePool ${pool.namespace}/${pool.name} would (failureMode ${pool.failureMode}: ${outage};`,
    pool.failureMode === 'FailOpen'
      ? `the CachePolicy's inferencePool.failureMode sets it, read at start; the pool's pods and keys are followed):`
      : `the CachePolicy's inferencePool.failureMode sets it, read at start):`,
    `curl -si http://127.0.0.1:${envoyPort}/v1/chat/completions -H 'authorization: Bearer ${demoKey}' -H 'content-type: application/json' -d '${request}'`,
    '(x-cacheroute-endpoint in the answer names the pod the picker chose)',
  ];
}

async function inside(dir: string): Promise<void> {
  const ports = LOCAL_PORTS();
  const real = realMode();
  const monitoring = process.argv.includes('--monitoring');
  const realNode = process.argv.includes('--real-node');
  // local-prometheus.ts scrapes the operator and the gateway as local processes.
  const picker = process.argv.includes('--picker');
  if (monitoring && realNode)
    throw new Error('--monitoring and --real-node do not go together yet: pick one');
  if (picker && realNode) throw new Error('--picker and --real-node do not go together yet: pick one');
  const system = await startLocalSystem({ dir, gpuNodes: flag('gpu-nodes', 9), real, realNode, picker, log });
  const { cp, demoKey } = system;
  const server = new URL(cp.server);
  const bridges = [await forwardUnixToTcp(join(dir, 'apiserver.sock'), server.hostname, Number(server.port))];
  const kubeconfig = join(dir, 'kubeconfig');
  writeHostKubeconfig(cp.kubeconfig, kubeconfig, ports.api);
  bridges.push(await forwardUnixToTcp(join(dir, 'gateway.sock'), system.gateway.host, system.gateway.port));
  bridges.push(await forwardUnixToTcp(join(dir, 'gateway-admin.sock'), system.admin.host, system.admin.port));
  const prometheus = monitoring
    ? await startLocalPrometheus({ dir, kubeconfig: cp.kubeconfig, log })
    : undefined;
  if (prometheus)
    bridges.push(await forwardUnixToTcp(join(dir, 'prometheus.sock'), '127.0.0.1', prometheus.port));
  const model = servedSample(real);
  const { envoy, pool, follower } = picker ? await startPickerEnvoy(cp.kubeconfig, model) : {};
  if (envoy) {
    const at = new URL(envoy.url);
    bridges.push(await forwardUnixToTcp(join(dir, 'envoy.sock'), at.hostname, Number(at.port)));
  }

  const kubectl = join(cp.binDir, 'kubectl');
  const request = JSON.stringify({
    model,
    messages: [{ role: 'user', content: 'Say hello to cacheroute.' }],
    max_tokens: 32,
  });
  const streamed = JSON.stringify({ ...(JSON.parse(request) as object), stream: true });
  const curl = (body: string, opts = '') =>
    `curl -s${opts} http://127.0.0.1:${ports.gateway}/v1/chat/completions -H 'authorization: Bearer ${demoKey}' -H 'content-type: application/json' -d '${body}'`;
  process.stdout.write(
    [
      '',
      realNode
        ? `cacheroute is up: kube-apiserver ${cp.version}, ${flag('gpu-nodes', 9)} fake 8-GPU nodes, a real node (kubelet, containerd, kube-proxy) running the chart's operator and gateway pods,`
        : `cacheroute is up: kube-apiserver ${cp.version}, ${flag('gpu-nodes', 9)} fake 8-GPU nodes, the operator, the gateway,`,
      real === 'pd'
        ? `the real SGLang ${SGLANG_VERSION} (CPU, tiny model) as the prefill and the decode of ${model} (KV over Mooncake's TCP transport), a simulator on the other pods, and the samples from examples/.`
        : real
          ? `the real SGLang ${SGLANG_VERSION} (CPU, tiny model) on the ${model} pods, a simulator on the others, and the samples from examples/.`
          : 'an SGLang simulator on every pod, and the samples from examples/.',
      '',
      `Gateway: http://127.0.0.1:${ports.gateway}   (status page and metrics: http://127.0.0.1:${ports.admin}/status, /metrics)`,
      ...(prometheus
        ? [
            `Prometheus: http://127.0.0.1:${ports.prometheus}   (scraping the operator, the gateway and every SGLang pod; the chart's alerts loaded)`,
          ]
        : []),
      '',
      `export KUBECONFIG=${kubeconfig}`,
      `${kubectl} get cacheroute`,
      '',
      curl(request),
      `(the sample Tenant team-a's key, from the Secret team-a-keys; without it the gateway answers 401)`,
      ...(real === 'pd'
        ? [
            `The gateway sends it to both parts with one bootstrap room; the decode's answer comes back. Streamed:`,
            curl(streamed, 'N'),
          ]
        : []),
      ...(envoy && pool ? envoyLines(pool, ports.envoy, demoKey, request) : []),
      '',
      `Logs: ${system.logs}. Ctrl-C stops everything.`,
      '',
    ].join('\n'),
  );
  await waitForSignal();
  log('stopping');
  for (const b of bridges) b.close();
  await prometheus?.stop();
  await follower?.stop();
  await envoy?.close();
  await system.stop();
}

const inner = process.argv.find((a) => a.startsWith('--inner='))?.slice('--inner='.length);
if (inner !== undefined) await inside(inner);
else await outside();
