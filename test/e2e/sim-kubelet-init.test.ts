// The sim-kubelet runs a pod's init containers for real, as a kubelet would (init-containers.ts):
// in order, as processes, on the pod's volumes (a hostPath is the pod's node's own directory),
// reported in the pod's status; the runtime starts only once all completed; a failed one is
// retried after a crash-loop backoff and the runtime never starts. Real parts: the
// kube-apiserver, etcd, the controller-manager, KWOK (its pod-ready stage calls every pod Ready
// with its init containers Completed at once: what the sim-kubelet reports must win) and two
// KWOK GPU nodes. Plain pods, bound to a node by name; the init containers are `node -e` scripts.
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Container, V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { eventually, kubectlOk } from '../support/kubectl.ts';
import { computeBackoffMs } from '../support/init-containers.ts';
import { startSimKubelet, type SimKubelet } from '../support/sim-kubelet.ts';

const NS = 'e2e-sim-kubelet-init';
const CACHE = '/var/cache/models';
const BACKOFF = { initialMs: 400, maxMs: 800 };
const TOKEN = 'hf_sim_kubelet_init_token';

let cp: ControlPlane;
let kubelet: SimKubelet;
// The sim kubelet's lines, each stamped as it is written (it runs in this process).
const kubeletLog: { msg: string; at: number }[] = [];
const k = (args: string[], input?: string): Promise<string> =>
  kubectlOk(['-n', NS, ...args], { kubeconfig: cp.kubeconfig, ...(input ? { input } : {}) });

/** An init container running a script under `node -e` with `args` (paths in them are mapped). */
function script(name: string, code: string, args: readonly string[]): V1Container {
  return {
    name,
    image: 'node-script',
    command: ['node'],
    args: ['-e', code, ...args],
    env: [
      { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    ],
    volumeMounts: [
      { name: 'cache', mountPath: '/cache' },
      { name: 'token', mountPath: '/secrets', readOnly: true },
    ],
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'FallbackToLogsOnError',
  };
}

function buildPod(name: string, node: string, initContainers: V1Container[]): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NS },
    spec: {
      nodeName: node,
      tolerations: [{ operator: 'Exists' }],
      initContainers,
      containers: [
        {
          name: 'sglang',
          image: 'sglang',
          args: ['--model-path', 'm', '--port', '30000'],
          volumeMounts: [{ name: 'cache', mountPath: '/models', subPath: 'm', readOnly: true }],
        },
      ],
      volumes: [
        { name: 'cache', hostPath: { path: CACHE, type: 'DirectoryOrCreate' } },
        { name: 'token', secret: { secretName: 'hub-token', items: [{ key: 'token', path: 'token' }] } },
      ],
    },
  };
}

async function getPod(name: string): Promise<V1Pod> {
  return JSON.parse(await k(['get', 'pod', name, '-o', 'json'])) as V1Pod;
}

const condition = (pod: V1Pod, type: string): string | undefined =>
  pod.status?.conditions?.find((c) => c.type === type)?.status;

const initStatus = (pod: V1Pod, name: string): V1ContainerStatus | undefined =>
  pod.status?.initContainerStatuses?.find((s) => s.name === name);

beforeAll(async () => {
  cp = await startControlPlane({ full: true, gpuNodes: 2 });
  await kubectlOk(['create', 'namespace', NS], { kubeconfig: cp.kubeconfig });
  await k(['create', 'secret', 'generic', 'hub-token', `--from-literal=token=${TOKEN}`]);
  kubelet = await startSimKubelet({
    kubeconfig: cp.kubeconfig,
    initBackoff: BACKOFF,
    log: (msg) => kubeletLog.push({ msg, at: performance.now() }),
  });
});

afterAll(async () => {
  await kubelet?.stop();
  await cp?.stop();
});

describe('sim-kubelet init containers', () => {
  it('runs them in order on the pod node hostPath, and the runtime only after they completed', async () => {
    const pod = buildPod('ordered', 'gpu-node-0', [
      script('write', "require('node:fs').writeFileSync(process.argv[1], process.env.POD_IP)", [
        '/cache/greeting',
      ]),
      // Slow enough to be seen running, with the runtime not started.
      script(
        'read',
        "const fs = require('node:fs'); const read = (f) => fs.readFileSync(f, 'utf8'); setTimeout(() => fs.writeFileSync(process.argv[2], `read ${read(process.argv[1])} with ${read(process.argv[3])}`), 2000)",
        ['/cache/greeting', '/cache/read-back', '/secrets/token'],
      ),
    ]);
    await k(['apply', '-f', '-'], JSON.stringify(pod));

    const reading = await eventually(async () => {
      const p = await getPod('ordered');
      expect(initStatus(p, 'write')?.state?.terminated).toMatchObject({ exitCode: 0, reason: 'Completed' });
      expect(initStatus(p, 'read')?.state?.running).toBeDefined();
      return p;
    });
    expect(kubelet.sims.has('ordered')).toBe(false);
    // KWOK had called the pod Ready at once; while initializing it is not.
    expect(condition(reading, 'Initialized')).toBe('False');
    expect(condition(reading, 'Ready')).toBe('False');
    expect(reading.status?.containerStatuses?.[0]?.state?.waiting?.reason).toBe('PodInitializing');

    await eventually(() => expect(kubelet.sims.has('ordered')).toBe(true));
    const done = await getPod('ordered');
    expect(initStatus(done, 'read')).toMatchObject({
      ready: true,
      restartCount: 0,
      state: { terminated: { exitCode: 0, reason: 'Completed' } },
    });
    expect(condition(done, 'Initialized')).toBe('True');
    expect(condition(done, 'Ready')).toBe('True');
    const dir = kubelet.hostPathOn('gpu-node-0', CACHE);
    expect(readFileSync(join(dir, 'read-back'), 'utf8')).toBe(
      `read ${done.status?.podIP ?? '?'} with ${TOKEN}`,
    );
  });

  it('retries a failed init container after a backoff, reports its exit and message, never starts the runtime', async () => {
    const pod = buildPod('failing', 'gpu-node-1', [
      script(
        'fetch',
        "require('node:fs').writeFileSync(process.argv[1], 'digest mismatch'); process.exit(3)",
        ['/dev/termination-log'],
      ),
      script('after', "require('node:fs').writeFileSync(process.argv[1], 'ran')", ['/cache/after']),
    ]);
    await k(['apply', '-f', '-'], JSON.stringify(pod));

    const failed = await eventually(
      async () => {
        const p = await getPod('failing');
        expect(initStatus(p, 'fetch')?.restartCount).toBeGreaterThanOrEqual(3);
        return p;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const s = initStatus(failed, 'fetch');
    expect(s?.lastState?.terminated).toMatchObject({
      exitCode: 3,
      reason: 'Error',
      message: 'digest mismatch',
    });
    expect(s?.ready).toBe(false);
    // Each restart waited out its backoff (400 ms, then 800, 800) before running again. Taken
    // between the kubelet's own lines for an exit and the next run, not by polling the pod:
    // a poll that runs late on a loaded machine would shorten the gap it sees.
    const fetchLines = kubeletLog.filter((l) => l.msg.startsWith('pod failing: init container fetch '));
    const waitedMs = fetchLines.flatMap((l, i) => {
      const next = fetchLines[i + 1];
      return l.msg.includes(' exited ') && next?.msg.includes(' runs ') ? [next.at - l.at] : [];
    });
    expect(waitedMs.length).toBeGreaterThanOrEqual(3);
    for (const [restarts, ms] of waitedMs.slice(0, 3).entries())
      expect(ms).toBeGreaterThanOrEqual(computeBackoffMs(restarts, BACKOFF));
    expect(initStatus(failed, 'after')?.state?.waiting?.reason).toBe('PodInitializing');
    expect(condition(failed, 'Ready')).toBe('False');
    expect(condition(failed, 'Initialized')).toBe('False');

    // Between runs it waits in CrashLoopBackOff, the failure in lastState, as a kubelet shows it.
    await eventually(
      async () => {
        const w = initStatus(await getPod('failing'), 'fetch');
        expect(w?.state?.waiting?.reason).toBe('CrashLoopBackOff');
        expect(w?.lastState?.terminated?.exitCode).toBe(3);
      },
      { intervalMs: 50 },
    );
    expect(kubelet.sims.has('failing')).toBe(false);
    expect(() => readFileSync(join(kubelet.hostPathOn('gpu-node-1', CACHE), 'after'))).toThrow();

    // Once the pod is gone, no more runs: the longest backoff and then some, and none started.
    const runsOf = (): number =>
      kubeletLog.filter((l) => l.msg.startsWith('pod failing: init container fetch runs')).length;
    await k(['delete', 'pod', 'failing', '--wait=true']);
    const runsAtDelete = runsOf();
    await new Promise((resolve) => setTimeout(resolve, 3 * BACKOFF.maxMs));
    expect(runsOf()).toBe(runsAtDelete);
  });

  it('gives each node its own hostPath directory, shared by the pods on that node', async () => {
    const mark = (): V1Container =>
      script('mark', "require('node:fs').appendFileSync(process.argv[1], process.argv[2] + '\\n')", [
        '/cache/seen',
        '$(POD_NAME)',
      ]);
    const pods = [
      buildPod('first-on-0', 'gpu-node-0', [mark()]),
      buildPod('second-on-0', 'gpu-node-0', [mark()]),
      buildPod('first-on-1', 'gpu-node-1', [mark()]),
    ];
    for (const p of pods) await k(['apply', '-f', '-'], JSON.stringify(p));
    await eventually(() => {
      for (const p of pods) expect(kubelet.sims.has(p.metadata?.name ?? '')).toBe(true);
    });
    const seen = (node: string): string[] =>
      readFileSync(join(kubelet.hostPathOn(node, CACHE), 'seen'), 'utf8')
        .trim()
        .split('\n')
        .sort();
    expect(seen('gpu-node-0')).toEqual(['first-on-0', 'second-on-0']);
    expect(seen('gpu-node-1')).toEqual(['first-on-1']);
  });

  it('waits for a hostPath of type Directory to be there, as a kubelet retries the mount', async () => {
    const pod = buildPod('staged', 'gpu-node-1', [
      script('check', "require('node:fs').readdirSync(process.argv[1])", ['/cache']),
    ]);
    const volume = pod.spec?.volumes?.[0];
    if (volume?.hostPath) volume.hostPath = { path: '/srv/staged', type: 'Directory' };
    await k(['apply', '-f', '-'], JSON.stringify(pod));
    await eventually(async () =>
      expect(initStatus(await getPod('staged'), 'check')?.state?.waiting?.reason).toBe('PodInitializing'),
    );
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(initStatus(await getPod('staged'), 'check')?.state?.waiting?.reason).toBe('PodInitializing');
    expect(kubelet.sims.has('staged')).toBe(false);
    mkdirSync(kubelet.hostPathOn('gpu-node-1', '/srv/staged'), { recursive: true });
    await eventually(() => expect(kubelet.sims.has('staged')).toBe(true));
  });
});
