// The stack an e2e test of the gateway with the operator runs on: the full
// control plane with one KWOK GPU node, the CRDs, a namespace, the sim-kubelet
// (a simulator on every pod IP), the operator, and in-process gateways
// discovering from that namespace.
import { join } from 'node:path';
import type { DeploymentStatus } from '../../operator/src/api/index.ts';
import { startOperator, type Operator } from '../../operator/src/operator.ts';
import { createLogger } from '../../operator/src/runtime/logger.ts';
import { startControlPlane, type ControlPlane } from './controlplane.ts';
import { startInProcessGateway, type InProcessGateway } from './gateway.ts';
import { kubectlOk } from './kubectl.ts';
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

export async function startE2eStack(
  namespace: string,
  opts: { gateways?: number; kubelet?: Omit<SimKubeletOptions, 'kubeconfig'> } = {},
): Promise<E2eStack> {
  const cp = await startControlPlane({ full: true, gpuNodes: 1 });
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig: cp.kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], {
    kubeconfig: cp.kubeconfig,
  });
  await kubectlOk(['create', 'namespace', namespace], { kubeconfig: cp.kubeconfig });
  const kubelet = await startSimKubelet({ kubeconfig: cp.kubeconfig, ...opts.kubelet });
  const operator = await startOperator({
    kubeconfig: cp.kubeconfig,
    logger: createLogger({ level: 'warn' }),
    leaderElection: false,
    http: false,
  });
  const gateways: InProcessGateway[] = [];
  for (let i = 0; i < (opts.gateways ?? 1); i++)
    gateways.push(await startInProcessGateway(cp.kubeconfig, [namespace]));
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
