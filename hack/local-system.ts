// The system `make run` brings up, as a function: the control plane with fake GPU
// nodes, an SGLang simulator on every pod IP (or the real SGLang on the dense
// sample's pods, or on a prefill/decode pair: RealMode), the operator and the gateway as real processes with the chart's
// RBAC (or, with realNode, as the chart's pods on a real node: local-real-node.ts),
// and the samples from examples/. Runs inside the private network
// namespace (hack/in-netns.sh): run-local.ts serves it to a person,
// test-monitoring.ts replays traffic through it for a real Prometheus.

import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { MODEL_DIR } from '../operator/src/controllers/deployment/model-cache/names.ts';
import { buildDeploymentManifest } from '../test/support/builders.ts';
import { startControlPlane, type ControlPlane } from '../test/support/controlplane.ts';
import { createChartIdentity } from '../test/support/helm.ts';
import { eventually, kubectlOk } from '../test/support/kubectl.ts';
import { spawnManaged, stopManaged, type ManagedProcess } from '../test/support/processes.ts';
import { removeKitModelLink } from '../test/support/real-sglang.ts';
import { loadSamples } from '../test/support/samples.ts';
import { startSimKubelet } from '../test/support/sim-kubelet.ts';
import { DEFAULT_CONTROLLERS } from '../test/support/components.ts';
import { gatewayNodeFlags } from './images/gateway-node-flags.ts';
import { startChartOnRealNode, type Address } from './local-real-node.ts';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const SYSTEM_NS = 'cacheroute-system';
/** Inside the namespace: the gateway's API and admin listeners, the operator's metrics. */
export const LOCAL_PORTS = {
  gateway: 8080,
  admin: 9090,
  operatorMetrics: 8081,
  picker: 9002,
  pickerHealth: 9003,
} as const;
/** The chart's picker Service (release cacheroute) the operator's InferencePools name. */
export const PICKER_SERVICE = 'cacheroute-picker';
// The sample whose pods run the real SGLang under `real: 'dense'`.
export const REAL_SAMPLE = 'llama-8b';
// Under `real: 'pd'`: the dense sample split into one prefill and one decode part over
// Mooncake's TCP transport, the one prefill/decode shape a CPU runs (the PD sample's decode
// uses HiSparse, which needs a GPU). Its pods run the real SGLang; everything else is simulated.
export const REAL_PD_SAMPLE = 'llama-8b-pd';

/**
 * Which pods run the real SGLang on CPU (the tiny model): none; the dense sample's two
 * replicas; or the pair of REAL_PD_SAMPLE. Two real servers either way: this machine's most.
 */
export type RealMode = false | 'dense' | 'pd';

/** The Deployment whose readiness (and whose name in the gateway's model list) `make run` waits for. */
export const servedSample = (real: RealMode): string => (real === 'pd' ? REAL_PD_SAMPLE : REAL_SAMPLE);

export interface LocalSystemOptions {
  /** Logs and scratch files. */
  readonly dir: string;
  readonly gpuNodes: number;
  /** Which pods run the real SGLang on CPU instead of the simulator. */
  readonly real: RealMode;
  /** The operator and the gateway as the chart's pods on a real node, from the images `make images` built. */
  readonly realNode?: boolean;
  /** The gateway in `--mode both`: its proxy, and its endpoint picker on LOCAL_PORTS.picker for an Envoy. */
  readonly picker?: boolean;
  readonly log: (msg: string) => void;
}

export interface LocalSystem {
  readonly cp: ControlPlane;
  /** The sample Tenant team-a's API key (Secret team-a-keys). */
  readonly demoKey: string;
  /** The gateway's API and admin listeners, inside the namespace. */
  readonly gateway: Address;
  readonly admin: Address;
  /** Where the operator's and the gateway's logs are, for a person. */
  readonly logs: string;
  stop(): Promise<void>;
}

interface Components {
  gateway: Address;
  admin: Address;
  logs: string;
  stop(): Promise<void>;
}

/** The samples, runnable on fake GPU nodes: model files from a host path (no PVC, no download). */
function buildLocalSamples(real: RealMode): string {
  const docs = loadSamples()
    .filter((s) => s.file !== 'task-openrouter.yaml') // needs the internet and a paid key
    .map((s) => (s.doc.kind === 'Deployment' ? buildDeploymentManifest({ sample: s.file }) : s.doc));
  if (real === 'pd') {
    docs.push(buildRealPdSample());
    // The sample Tenant may call it, and the sample CachePolicy routes and warms it (through the pair).
    for (const d of docs) {
      const spec = d.spec as Record<string, unknown> | undefined;
      if (d.kind === 'Tenant' && Array.isArray(spec?.['models'])) spec['models'].push(REAL_PD_SAMPLE);
      if (d.kind === 'CachePolicy' && Array.isArray(spec?.['targetRefs']))
        spec['targetRefs'].push({ kind: 'Deployment', name: REAL_PD_SAMPLE });
    }
  }
  return docs.map((d) => `---\n${stringify(d)}`).join('');
}

/** The dense sample as one prefill and one decode part of one GPU each, KV over Mooncake's TCP transport. */
function buildRealPdSample(): ReturnType<typeof buildDeploymentManifest> {
  const m = buildDeploymentManifest({ name: REAL_PD_SAMPLE });
  delete m.spec['replicas'];
  delete m.spec['profile'];
  m.spec['deploymentId'] = 'llama-3-1-8b-instruct-pd-r1';
  m.spec['model'] = { ...(m.spec['model'] as object), servedName: REAL_PD_SAMPLE };
  m.spec['disaggregation'] = {
    transferBackend: 'mooncake_tcp',
    prefill: { replicas: 1 },
    decode: { replicas: 1 },
  };
  return m;
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

/** Everything up, the samples applied, and llama-8b Ready and listed by the gateway. */
export async function startLocalSystem(opts: LocalSystemOptions): Promise<LocalSystem> {
  const { dir, log, real } = opts;
  // The scheduler spreads pods (as Kubernetes does by default), so the samples' six small
  // pods (the multi-node sample's two among them) can each take a node; nine leave three whole
  // nodes for the 8-GPU prefill/decode pods. The multi-node sample's groups need the real
  // LeaderWorkerSet controller, as a cluster would run it.
  const cp = await startControlPlane({
    full: true,
    gpuNodes: opts.gpuNodes,
    leaderWorkerSet: true,
    // InferencePools, as a cluster with a GIE gateway serves them (ADR 0026).
    inferencePool: true,
    log,
    // A real kubelet's pods get ServiceAccount tokens, and the CA beside them.
    ...(opts.realNode
      ? { serviceAccountAdmission: true, controllers: [...DEFAULT_CONTROLLERS, 'root-ca-cert-publisher'] }
      : {}),
  });
  const k = { kubeconfig: cp.kubeconfig };
  await kubectlOk(['apply', '--server-side', '-f', join(ROOT, 'crds')], k);
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', join(ROOT, 'crds')], k);
  await kubectlOk(['create', 'namespace', SYSTEM_NS], k);
  const linksModelDir = real !== false && !existsSync(MODEL_DIR);
  const sample = servedSample(real);
  const kubelet = await startSimKubelet({
    kubeconfig: cp.kubeconfig,
    log: (m) => log(m),
    ...(real
      ? {
          realSglang: (pod) =>
            pod.metadata?.labels?.['cacheroute.dev/deployment'] === sample ? [] : undefined,
        }
      : {}),
  });
  const components = opts.realNode
    ? await startChartOnRealNode({ cp, dir, release: 'cacheroute', namespace: SYSTEM_NS, log })
    : await startProcesses(cp, dir, opts.picker ?? false);
  await kubectlOk(['apply', '-f', '-'], { ...k, input: JSON.stringify(WARMUP_DOCUMENT) });
  await kubectlOk(['apply', '-f', '-'], { ...k, input: buildLocalSamples(real) });
  // The sample Tenant's key: made here, as a user makes one (examples/tenant.yaml).
  const demoKey = randomBytes(24).toString('hex');
  await kubectlOk(['apply', '-f', '-'], { ...k, input: JSON.stringify(buildDemoKeySecret(demoKey)) });

  const from = { dense: ', from two real SGLang servers', pd: ', from a real SGLang prefill and decode' };
  log(`waiting for ${sample} to be Ready (every endpoint verified${real ? from[real] : ''})`);
  await eventually(
    async () => {
      const ready = await kubectlOk(
        ['get', 'sgd', sample, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'],
        k,
      );
      if (ready !== 'True') throw new Error(`${sample} Ready=${ready || 'unknown'}`);
      const res = await fetch(`http://${components.gateway.host}:${components.gateway.port}/v1/models`, {
        headers: { authorization: `Bearer ${demoKey}` },
      });
      const body = (await res.json()) as { data?: { id: string }[] };
      if (!body.data?.some((m) => m.id === sample))
        throw new Error(`the gateway does not list ${sample} yet`);
    },
    // A real SGLang takes 20-60 s to start on this machine, and the two start one after the other.
    { timeoutMs: real ? 360_000 : 120_000, intervalMs: 500 },
  );
  return {
    cp,
    demoKey,
    gateway: components.gateway,
    admin: components.admin,
    logs: components.logs,
    async stop() {
      await components.stop();
      await kubelet.stop();
      await cp.stop();
      if (linksModelDir) removeKitModelLink(MODEL_DIR);
    },
  };
}

/** The operator and the gateway as local processes, with exactly the chart's RBAC, as they would run in a cluster. */
async function startProcesses(cp: ControlPlane, dir: string, picker: boolean): Promise<Components> {
  // In picker mode the chart's picker RBAC too (InferencePools, the picker's mirrors).
  const identity = {
    release: 'cacheroute',
    namespace: SYSTEM_NS,
    ...(picker ? { values: { 'gateway.mode': 'both' } } : {}),
  };
  const operatorKubeconfig = await createChartIdentity(cp, { ...identity, component: 'operator' });
  const gatewayKubeconfig = await createChartIdentity(cp, { ...identity, component: 'gateway' });
  const operator = startProcess(dir, 'operator', [
    join(ROOT, 'operator/src/main.ts'),
    `--kubeconfig=${operatorKubeconfig}`,
    `--lease-namespace=${SYSTEM_NS}`,
    '--metrics-host=127.0.0.1',
    `--metrics-port=${LOCAL_PORTS.operatorMetrics}`,
    // The CacheHealthy condition compares the runtimes with the gateway's predictions, as the chart wires it.
    `--gateway-admin-url=http://127.0.0.1:${LOCAL_PORTS.admin}`,
    // The one Secret the gateway reads keys from, as the chart names it (ADR 0027).
    `--gateway-keys-secret=${SYSTEM_NS}/cacheroute-gateway-keys`,
    // As the chart runs it in picker mode: an InferencePool per Deployment, naming the picker.
    ...(picker
      ? [
          `--inference-pool-picker-service=${PICKER_SERVICE}`,
          `--inference-pool-picker-namespace=${SYSTEM_NS}`,
          `--inference-pool-picker-port=${LOCAL_PORTS.picker}`,
        ]
      : []),
  ]);
  const gateway = startProcess(dir, 'gateway', [
    ...gatewayNodeFlags(ROOT), // as the gateway image runs it (gateway/Containerfile)
    join(ROOT, 'gateway/src/server.ts'),
    `--kubeconfig=${gatewayKubeconfig}`,
    '--host=127.0.0.1',
    `--port=${LOCAL_PORTS.gateway}`,
    // As the chart runs it: status, metrics and probes on their own port, the API port only the API.
    `--admin-port=${LOCAL_PORTS.admin}`,
    `--keys-secret=${SYSTEM_NS}/cacheroute-gateway-keys`,
    ...(picker
      ? [
          '--mode=both',
          `--picker-port=${LOCAL_PORTS.picker}`,
          `--picker-health-port=${LOCAL_PORTS.pickerHealth}`,
        ]
      : []),
  ]);
  return {
    gateway: { host: '127.0.0.1', port: LOCAL_PORTS.gateway },
    admin: { host: '127.0.0.1', port: LOCAL_PORTS.admin },
    logs: `${join(dir, 'operator.log')} ${join(dir, 'gateway.log')}`,
    stop: async () => {
      await Promise.all([stopManaged(gateway), stopManaged(operator)]);
    },
  };
}
