// The stack an e2e test of the gateway with the operator runs on: the full
// control plane with one KWOK GPU node, the CRDs, a namespace, the sim-kubelet
// (a simulator on every pod IP), the operator, and in-process gateways
// discovering from that namespace.
import { join } from 'node:path';
import type { DeploymentStatus } from '#api';
import { startOperator, type Operator, type OperatorOptions } from '../../operator/src/operator.ts';
import { createLogger } from '#kube/logger.ts';
import { startControlPlane, type ControlPlane } from './controlplane.ts';
import { startInProcessGateway, testKeysSecret, type InProcessGateway } from './gateway.ts';
import { expect } from 'vitest';
import type { MetricsApiOptions } from '../../operator/src/metrics-api/start.ts';
import { eventually, kubectlOk } from './kubectl.ts';
import { issueMetricsApiCert, registerMetricsApi } from './metrics-api.ts';
import { REPO_ROOT } from './samples.ts';
import { startSimKubelet, type SimKubelet, type SimKubeletOptions } from './sim-kubelet.ts';

export interface E2eStack {
  readonly cp: ControlPlane;
  readonly kubelet: SimKubelet;
  readonly operator: Operator;
  readonly gateways: readonly InProcessGateway[];
  /** kubectl in the test's namespace. */
  readonly k: (args: string[], input?: string) => Promise<string>;
  /** A cacheroute Deployment's status. */
  readonly status: (name: string) => Promise<DeploymentStatus>;
  stop(): Promise<void>;
}

async function prepareMetricsApi(
  cp: ControlPlane,
  gatewayUrl: string | undefined,
): Promise<MetricsApiOptions> {
  if (!gatewayUrl) throw new Error('the metrics API reads a gateway: start one');
  const cert = await issueMetricsApiCert(cp.dir, cp.hostIP);
  return {
    host: cp.hostIP,
    // The kernel picks; registered below once it serves, with the port read back.
    port: 0,
    certFile: cert.cert,
    keyFile: cert.key,
    gatewayAdminUrl: gatewayUrl,
    maxSampleAgeMs: 1000,
  };
}

/** The operator options the stack passes on, those given. */
function pickDefined(
  o: Pick<OperatorOptions, 'modelCache' | 'picker'>,
): Pick<OperatorOptions, 'modelCache' | 'picker'> {
  return {
    ...(o.modelCache ? { modelCache: o.modelCache } : {}),
    ...(o.picker ? { picker: o.picker } : {}),
  };
}

export async function startE2eStack(
  namespace: string,
  opts: {
    gateways?: number;
    kubelet?: Omit<SimKubeletOptions, 'kubeconfig'>;
    /**
     * The operator serves external metrics (from the first gateway, which then listens), registered;
     * it also wakes Deployments sleeping at zero on the gateway's demand.
     */
    metricsApi?: boolean;
    /** kube-controller-manager --controllers (default: the harness's list). */
    controllers?: readonly string[];
    /** More operator options (e.g. modelCache) and where its log lines go. */
    operator?: Pick<OperatorOptions, 'modelCache' | 'picker'> & { logWrite?: (line: string) => void };
    /** KWOK GPU nodes (default 1). */
    gpuNodes?: number;
    /** The real LeaderWorkerSet controller too (multi-node Deployments; lws.ts). */
    leaderWorkerSet?: boolean;
    /** The Gateway API Inference Extension's CRDs too (InferencePools; gie.ts). */
    inferencePool?: boolean;
  } = {},
): Promise<E2eStack> {
  const cp = await startControlPlane({
    full: true,
    gpuNodes: opts.gpuNodes ?? 1,
    leaderWorkerSet: opts.leaderWorkerSet ?? false,
    inferencePool: opts.inferencePool ?? false,
    ...(opts.controllers ? { controllers: opts.controllers } : {}),
  });
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig: cp.kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], {
    kubeconfig: cp.kubeconfig,
  });
  await kubectlOk(['create', 'namespace', namespace], { kubeconfig: cp.kubeconfig });
  const kubelet = await startSimKubelet({ kubeconfig: cp.kubeconfig, ...opts.kubelet });
  const gateways: InProcessGateway[] = [];
  for (let i = 0; i < (opts.gateways ?? 1); i++)
    gateways.push(
      await startInProcessGateway(cp.kubeconfig, [namespace], { listen: opts.metricsApi === true }),
    );
  const metricsApi = opts.metricsApi ? await prepareMetricsApi(cp, gateways[0]?.url) : undefined;
  const operator = await startOperator({
    kubeconfig: cp.kubeconfig,
    logger: createLogger({
      level: 'warn',
      ...(opts.operator?.logWrite ? { level: 'info', write: opts.operator.logWrite } : {}),
    }),
    ...pickDefined(opts.operator ?? {}),
    leaderElection: false,
    http: false,
    gatewayKeysSecret: testKeysSecret(namespace),
    ...(metricsApi ? { metricsApi } : {}),
    // Sleeping Deployments (wakeOnDemand) wake within a second of a held request.
    wakePeriodMs: 500,
  });
  if (metricsApi) {
    await eventually(() => expect(operator.metricsApi?.server()).toBeDefined());
    const port = operator.metricsApi?.server()?.address().port ?? 0;
    await registerMetricsApi(cp.kubeconfig, cp.dir, { hostIP: cp.hostIP, port });
  }
  const k = (args: string[], input?: string): Promise<string> =>
    kubectlOk(['-n', namespace, ...args], { kubeconfig: cp.kubeconfig, ...(input ? { input } : {}) });
  return {
    cp,
    kubelet,
    operator,
    gateways,
    k,
    status: async (name) => {
      const obj = JSON.parse(await k(['get', 'sgd', name, '-o', 'json'])) as { status?: DeploymentStatus };
      return obj.status ?? {};
    },
    async stop() {
      await Promise.all(gateways.map((g) => g.stop()));
      await operator.stop();
      await kubelet.stop();
      await cp.stop();
    },
  };
}
