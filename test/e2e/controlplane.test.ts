import { existsSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GPU_NODE_CAPACITY,
  GPU_NODE_LABELS,
  GPU_NODE_TAINT,
  startControlPlane,
} from '../support/controlplane.ts';
import type { ControlPlane } from '../support/controlplane.ts';
import { createTestNamespace, eventually, kubectl, kubectlOk } from '../support/kubectl.ts';
import { isPidAlive } from '../support/processes.ts';

interface PodView {
  metadata: { name: string };
  spec: { nodeName?: string };
  status: { phase?: string; podIP?: string };
}

describe('full control plane with KWOK GPU nodes', () => {
  let cp: ControlPlane;

  beforeAll(async () => {
    cp = await startControlPlane({ full: true, gpuNodes: 2 });
  });
  afterAll(async () => {
    await cp?.stop();
  });

  it('registers Ready GPU nodes with 8 GPUs and a pod CIDR each', async () => {
    const out = await kubectlOk(['get', 'nodes', '--output=json'], { kubeconfig: cp.kubeconfig });
    const nodes = (
      JSON.parse(out) as {
        items: { spec: { podCIDR?: string }; status: { allocatable: Record<string, string> } }[];
      }
    ).items;
    expect(nodes).toHaveLength(2);
    for (const node of nodes) {
      expect(node.status.allocatable['nvidia.com/gpu']).toBe(GPU_NODE_CAPACITY['nvidia.com/gpu']);
      expect(node.spec.podCIDR).toMatch(/^10\.244\.\d+\.0\/24$/);
    }
  });

  // First on the plane's nodes: the pods KWOK renders at once are where its IP pools could be
  // made twice (buildIpPoolWarmupPod). A guard of the property, not a reproduction: the race was
  // seen once in CI and not in 184 fresh nodes here without the warm-up.
  it('gives pods started at once on its fresh nodes distinct IPs, and leaves no warm-up pod', async () => {
    const kubeconfig = cp.kubeconfig;
    const ns = await createTestNamespace(kubeconfig);
    await kubectlOk(['apply', `--namespace=${ns}`, '-f', '-'], {
      kubeconfig,
      input: JSON.stringify(buildGpuDeployment('burst', 16)),
    });
    const ips = await eventually(
      async () => {
        const out = await kubectlOk(['get', 'pods', `--namespace=${ns}`, '--output=json'], { kubeconfig });
        const pods = (JSON.parse(out) as { items: PodView[] }).items;
        expect(pods.map((p) => p.status.podIP).filter(Boolean)).toHaveLength(16);
        return pods.map((p) => p.status.podIP);
      },
      { timeoutMs: 60_000 },
    );
    expect(new Set(ips).size).toBe(16);
    const warmups = await kubectlOk(['get', 'pods', '--namespace=default', '--output=name'], { kubeconfig });
    expect(warmups.trim()).toBe('');
    await kubectlOk(['delete', 'deployment/burst', `--namespace=${ns}`], { kubeconfig });
  });

  it('runs a GPU Deployment to a Running pod whose IP is in 10.244.0.0/16 and bindable', async () => {
    const kubeconfig = cp.kubeconfig;
    const ns = await createTestNamespace(kubeconfig);
    await kubectlOk(['apply', `--namespace=${ns}`, '-f', '-'], {
      kubeconfig,
      input: JSON.stringify(buildGpuDeployment('llm')),
    });

    const pod = await eventually(
      async () => {
        const out = await kubectlOk(
          ['get', 'pods', `--namespace=${ns}`, '--selector=app=llm', '--output=json'],
          { kubeconfig },
        );
        const pods = (JSON.parse(out) as { items: PodView[] }).items;
        expect(pods).toHaveLength(1);
        expect(pods[0]?.status.phase).toBe('Running');
        return pods[0] as PodView;
      },
      { timeoutMs: 60_000 },
    );
    expect(pod.spec.nodeName).toMatch(/^gpu-node-\d$/);
    expect(pod.status.podIP).toMatch(/^10\.244\.\d+\.\d+$/);
    await eventually(async () => {
      const available = await kubectlOk(
        ['get', 'deployment/llm', `--namespace=${ns}`, '--output=jsonpath={.status.availableReplicas}'],
        {
          kubeconfig,
        },
      );
      expect(available).toBe('1');
    });
    // A simulator will serve on the pod IP: that address must be bindable here.
    await expect(roundTrip(pod.status.podIP ?? '', 30000)).resolves.toBe('pong');
  });

  it('cascades deletion from a Deployment to its pods (garbage collector)', async () => {
    const kubeconfig = cp.kubeconfig;
    const ns = await createTestNamespace(kubeconfig);
    await kubectlOk(['apply', `--namespace=${ns}`, '-f', '-'], {
      kubeconfig,
      input: JSON.stringify(buildGpuDeployment('gc')),
    });
    await eventually(async () => {
      const out = await kubectlOk(['get', 'pods', `--namespace=${ns}`, '--output=name'], { kubeconfig });
      expect(out.trim()).not.toBe('');
    });
    await kubectlOk(['delete', 'deployment/gc', `--namespace=${ns}`, '--cascade=background'], { kubeconfig });
    await eventually(
      async () => {
        const out = await kubectl(['get', 'pods', `--namespace=${ns}`, '--output=name'], { kubeconfig });
        expect(out.stdout.trim()).toBe('');
      },
      { timeoutMs: 60_000 },
    );
  });

  it('leaves no process and no directory behind after stop()', async () => {
    const pids = cp.processes.map((p) => p.pid);
    expect(pids).toHaveLength(5);
    expect(pids.every(isPidAlive)).toBe(true);
    await cp.stop();
    expect(pids.filter(isPidAlive)).toEqual([]);
    if (process.env['CACHEROUTE_KEEP_CONTROLPLANE_DIR'] !== '1') expect(existsSync(cp.dir)).toBe(false);
  });
});

function buildGpuDeployment(name: string, replicas = 1): object {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          nodeSelector: GPU_NODE_LABELS,
          tolerations: [{ key: GPU_NODE_TAINT.key, operator: 'Exists', effect: GPU_NODE_TAINT.effect }],
          containers: [
            {
              name: 'sglang',
              image: 'lmsysorg/sglang:latest',
              resources: { limits: { 'nvidia.com/gpu': '1' } },
            },
          ],
        },
      },
    },
  };
}

// Listens on ip:port and sends one message through it.
async function roundTrip(ip: string, port: number): Promise<string> {
  const server = createServer((socket) => socket.end('pong'));
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, ip, resolve));
  try {
    return await new Promise<string>((resolve, reject) => {
      let data = '';
      createConnection(port, ip)
        .on('data', (chunk: Buffer) => (data += chunk.toString()))
        .on('end', () => resolve(data))
        .on('error', reject);
    });
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
