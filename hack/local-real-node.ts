// `make run REAL_NODE=1`: the operator and the gateway as the chart's pods on a real node
// (test/support/real-node.ts: a kubelet, containerd, the CNI bridge, kube-proxy) instead of
// local processes: the images `make images` built imported into the node's containerd, the
// chart `helm install`ed with them. The SGLang pods stay on the fake GPU nodes, served by
// simulators on their pod IPs, which the gateway pod reaches through the namespace's routes.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ControlPlane } from '../test/support/controlplane.ts';
import { CHART_DIR, helm } from '../test/support/helm.ts';
import { buildImages } from '../test/support/images.ts';
import { kubectlOk } from '../test/support/kubectl.ts';
import {
  buildChartImageValues,
  findPauseArchive,
  importBuiltImages,
  startRealNode,
} from '../test/support/real-node.ts';

export interface Address {
  host: string;
  port: number;
}

export interface ChartOnRealNode {
  /** The gateway's Service (its API), and its admin Service (status, metrics, probes). */
  gateway: Address;
  admin: Address;
  nodeReadyMs: number;
  /** Where the pods' logs are, and the node's own (kubelet, containerd, kube-proxy). */
  logs: string;
  stop(): Promise<void>;
}

export async function startChartOnRealNode(opts: {
  cp: ControlPlane;
  dir: string;
  release: string;
  namespace: string;
  log: (msg: string) => void;
}): Promise<ChartOnRealNode> {
  const { cp, dir, log } = opts;
  const images = await buildImages({ log });
  const node = await startRealNode({
    cp,
    pauseArchive: await findPauseArchive(),
    kubeProxy: true,
    // The operator reaches the gateway replicas by their headless Service's name.
    dns: true,
    // The chart's and the operator's NetworkPolicies hold here as on a cluster that enforces them.
    networkPolicy: true,
    log,
  });
  try {
    const refs = await importBuiltImages(node, images);
    const values = join(dir, 'real-node.values.json');
    // The chart's NetworkPolicies too: kube-router enforces them here.
    writeFileSync(
      values,
      JSON.stringify({ ...buildChartImageValues(refs), networkPolicy: { enabled: true } }),
    );
    // helm keeps its cache, config and data under dir, not in the user's home.
    const env = Object.fromEntries(
      ['HELM_CACHE_HOME', 'HELM_CONFIG_HOME', 'HELM_DATA_HOME'].map((v) => [
        v,
        join(dir, 'helm', v.toLowerCase()),
      ]),
    );
    for (const path of Object.values(env)) mkdirSync(path, { recursive: true });
    Object.assign(process.env, env);
    log(`helm install ${opts.release} (the images ${[...refs.values()].join(', ')}) onto ${node.name}`);
    const res = await helm(
      [
        'install',
        opts.release,
        CHART_DIR,
        '--namespace',
        opts.namespace,
        '--values',
        values,
        '--wait',
        '--timeout',
        '5m',
        '--kubeconfig',
        cp.kubeconfig,
      ],
      { timeoutMs: 360_000 },
    );
    if (res.code !== 0) throw new Error(`helm install exited ${res.code}: ${res.stderr.trim()}`);
    const service = async (name: string): Promise<Address> => {
      const out = await kubectlOk(
        ['-n', opts.namespace, 'get', 'svc', name, '-o', 'jsonpath={.spec.clusterIP} {.spec.ports[0].port}'],
        { kubeconfig: cp.kubeconfig },
      );
      const [host = '', port = ''] = out.trim().split(' ');
      return { host, port: Number(port) };
    };
    return {
      gateway: await service(`${opts.release}-gateway`),
      admin: await service(`${opts.release}-gateway-admin`),
      nodeReadyMs: node.readyMs,
      // `kubectl logs` is not served: the API server has no client certificate for the kubelet.
      logs: `${join(node.dir, 'pod-logs')} (the pods'), ${join(node.dir, 'logs')} (kubelet, containerd, kube-proxy)`,
      stop: () => node.stop(),
    };
  } catch (err) {
    await node.stop();
    throw err;
  }
}
