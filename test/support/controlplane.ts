// A real Kubernetes control plane for integration and e2e tests: etcd and
// kube-apiserver, and with `full` also kube-controller-manager, kube-scheduler and
// KWOK with fake GPU nodes whose pods "run" with IPs in 10.244.0.0/16.
//
// Full planes must run inside hack/in-netns.sh: kube-apiserver needs a non-loopback
// address to advertise and pod IPs must be bindable, both only safe in a private
// network namespace (docs/controlplane.md).
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CONTROL_PLANE_BINARIES,
  FULL_CONTROL_PLANE_BINARIES,
  findBinDir,
  findKwokStages,
} from './binaries.ts';
import {
  DEFAULT_CONTROLLERS,
  buildApiserverArgs,
  buildControllerManagerArgs,
  buildEtcdArgs,
  buildGpuNode,
  buildIpPoolWarmupPod,
  buildKwokArgs,
  buildSchedulerArgs,
} from './components.ts';
import type { ComponentConfig, Ports } from './components.ts';
import { apiJson, apiRequest, writeKubeconfig } from './kube-api.ts';
import type { Credentials } from './kube-api.ts';
import { installGieCrds } from './gie.ts';
import { startLwsController, type LwsController } from './lws.ts';
import { createPki, issueClientCert, pkiPaths } from './pki.ts';
import { readLogTail, registerCleanup, spawnManaged, stopManaged } from './processes.ts';
import type { ManagedProcess } from './processes.ts';
import { listensOn, withFreshPorts } from './fresh-ports.ts';
import { writeKwokStages } from './kwok-stages.ts';

export {
  GPU_NODE_CAPACITY,
  GPU_NODE_LABELS,
  GPU_NODE_TAINT,
  KWOK_NODE_ANNOTATION,
  POD_CIDR,
  SERVICE_CIDR,
} from './components.ts';

export interface ControlPlaneOptions {
  // Also kube-controller-manager, kube-scheduler and KWOK (needs hack/in-netns.sh).
  full?: boolean;
  // Fake KWOK GPU nodes to create (full only), named gpu-node-0, gpu-node-1, ...
  gpuNodes?: number;
  // kube-controller-manager --controllers (full only).
  controllers?: readonly string[];
  // Also the LeaderWorkerSet controller, its CRD and webhooks (full only; lws.ts).
  leaderWorkerSet?: boolean;
  // Also the Gateway API Inference Extension's CRDs (InferencePool; gie.ts), plain or full.
  inferencePool?: boolean;
  // The ServiceAccount admission plugin, for pods a real kubelet runs (real-node.ts).
  serviceAccountAdmission?: boolean;
  log?: (msg: string) => void;
  binDir?: string;
  // Address kube-apiserver advertises; default CACHEROUTE_HOST_IP from hack/in-netns.sh.
  hostIP?: string;
  startTimeoutMs?: number;
}

// What tests need to reach the plane; plain data, so vitest can provide() it.
export interface ControlPlaneInfo {
  // The admin (system:masters) kubeconfig; adminKubeconfig is the same file, for call
  // sites that want the privilege to be visible next to a least-privilege one.
  kubeconfig: string;
  adminKubeconfig: string;
  server: string;
  version: string;
  binDir: string;
  dir: string;
}

export interface ControlPlane extends ControlPlaneInfo {
  hostIP: string;
  processes: readonly ManagedProcess[];
  startupMs: number;
  // Stops every process (SIGTERM, SIGKILL after 5s), waits, removes dir. Idempotent.
  stop(): Promise<void>;
}

/**
 * etcd's and the API server's ports are in each other's flags and in the kubeconfig before
 * either starts, and --secure-port 0 turns serving off: ports free now (fresh-ports.ts), and
 * the whole plane again on fresh ones if a component lost its port to another process.
 */
export function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  return withFreshPorts(
    5,
    ([etcdClient = 0, etcdPeer = 0, apiserver = 0, controllerManager = 0, scheduler = 0]) =>
      startControlPlaneOn({ etcdClient, etcdPeer, apiserver, controllerManager, scheduler }, opts),
    { what: 'the control plane' },
  );
}

async function startControlPlaneOn(ports: Ports, opts: ControlPlaneOptions): Promise<ControlPlane> {
  const started = performance.now();
  const full = opts.full ?? false;
  const log = opts.log ?? ((msg: string) => void process.stderr.write(`[controlplane] ${msg}\n`));
  const required = full
    ? [...CONTROL_PLANE_BINARIES, ...FULL_CONTROL_PLANE_BINARIES]
    : CONTROL_PLANE_BINARIES;
  const binDir = opts.binDir ?? findBinDir(required);
  const hostIP = opts.hostIP ?? process.env['CACHEROUTE_HOST_IP'];
  if (full && hostIP === undefined) {
    throw new Error(
      'a full control plane runs inside a private network namespace: bash hack/in-netns.sh <command>',
    );
  }
  const deadline = Date.now() + (opts.startTimeoutMs ?? 120_000);
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-cp-'));
  const processes: ManagedProcess[] = [];
  const removeDir = (): void => {
    if (process.env['CACHEROUTE_KEEP_CONTROLPLANE_DIR'] === '1') log(`kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  };
  // On a signal or exit the processes get SIGKILL and the dir goes (processes.ts).
  const unregister = registerCleanup(removeDir);
  let lws: LwsController | undefined;
  const stop = memoize(async () => {
    await lws?.stop();
    for (const p of [...processes].reverse()) await stopManaged(p);
    unregister();
    removeDir();
  });
  const startProcess = (name: string, args: readonly string[]): ManagedProcess => {
    const proc = spawnManaged(name, join(binDir, name), args, { logPath: join(dir, `${name}.log`) });
    processes.push(proc);
    return proc;
  };

  try {
    const pki = await createPki(join(dir, 'pki'), {
      ips: ['127.0.0.1', ...(hostIP === undefined ? [] : [hostIP]), '10.0.0.1'],
      dnsNames: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc'],
    });
    const server = `https://127.0.0.1:${ports.apiserver}`;
    const admin: Credentials = {
      server,
      caFile: pki.servingCa.cert,
      certFile: pki.admin.cert,
      keyFile: pki.admin.key,
    };
    const kubeconfig = join(dir, 'admin.kubeconfig');
    writeKubeconfig(kubeconfig, admin, 'admin');
    const config: ComponentConfig = {
      dir,
      ports,
      pki,
      kubeconfig,
      hostIP,
      controllers: opts.controllers ?? DEFAULT_CONTROLLERS,
      kwokStages: full ? writeKwokStages(findKwokStages(binDir), dir) : '',
      serviceAccountAdmission: opts.serviceAccountAdmission === true,
    };

    const etcd = startProcess('etcd', buildEtcdArgs(config));
    await waitFor(
      etcd,
      deadline,
      async () =>
        (await httpStatus(`http://127.0.0.1:${ports.etcdClient}/health`)) === 200 &&
        listensOn(etcd.pid, ports.etcdClient),
    );
    const apiserver = startProcess('kube-apiserver', buildApiserverArgs(config));
    await waitFor(
      apiserver,
      deadline,
      async () => (await apiRequest(admin, 'GET', '/readyz')).status === 200,
    );
    const version = (await apiJson<{ gitVersion: string }>(admin, 'GET', '/version')).gitVersion;
    log(`kube-apiserver ${version} ready at ${server} in ${ms(started)}`);

    if (full) {
      const cm = startProcess('kube-controller-manager', buildControllerManagerArgs(config));
      const scheduler = startProcess('kube-scheduler', buildSchedulerArgs(config));
      startProcess('kwok', buildKwokArgs(config));
      await Promise.all([
        waitFor(
          cm,
          deadline,
          async () =>
            (await httpStatus(healthz(ports.controllerManager))) === 200 &&
            listensOn(cm.pid, ports.controllerManager),
        ),
        waitFor(
          scheduler,
          deadline,
          async () =>
            (await httpStatus(healthz(ports.scheduler))) === 200 && listensOn(scheduler.pid, ports.scheduler),
        ),
      ]);
      const names = await addGpuNodes(admin, opts.gpuNodes ?? 0, deadline);
      log(`full control plane with ${names.length} GPU node(s) ready in ${ms(started)}`);
      // hostIP is set: a full plane runs only inside the namespace (checked above).
      if (opts.leaderWorkerSet)
        lws = await startLwsController({ binDir, dir, kubeconfig, hostIP: hostIP ?? '' });
    }
    if (opts.inferencePool) await installGieCrds(kubeconfig);

    return {
      kubeconfig,
      adminKubeconfig: kubeconfig,
      server,
      version,
      binDir,
      dir,
      hostIP: hostIP ?? '127.0.0.1',
      processes,
      startupMs: Math.round(performance.now() - started),
      stop,
    };
  } catch (err) {
    const tails = logTails(processes, lws);
    await stop();
    // The logs' tails go with the error: a port lost to another process shows there.
    throw new Error(`control plane failed to start: ${String(err)}\n${tails.join('\n')}`, { cause: err });
  }
}

function logTails(processes: readonly ManagedProcess[], lws: LwsController | undefined): string[] {
  const logs = [...processes, ...(lws ? [{ name: 'lws-manager', logPath: lws.logPath }] : [])];
  return logs.map((p) => `--- ${p.name} (${p.logPath}) ---\n${readLogTail(p.logPath)}`);
}

// A kubeconfig for a non-admin identity: a client certificate for user/groups, signed
// by the plane's client CA. It can do nothing until roles are bound to it.
export async function createUserKubeconfig(
  cp: Pick<ControlPlaneInfo, 'dir' | 'server'>,
  identity: { user: string; groups?: readonly string[] },
): Promise<string> {
  const pkiDir = join(cp.dir, 'pki');
  const name = `user-${identity.user.replace(/[^A-Za-z0-9._-]/g, '_')}`;
  const pair = await issueClientCert(pkiDir, name, identity.user, identity.groups ?? []);
  const path = join(cp.dir, `${name}.kubeconfig`);
  const caFile = pkiPaths(pkiDir).servingCa.cert;
  writeKubeconfig(path, { server: cp.server, caFile, certFile: pair.cert, keyFile: pair.key }, identity.user);
  return path;
}

async function isNodeSchedulable(admin: Credentials, name: string): Promise<boolean> {
  interface NodeView {
    spec?: { podCIDR?: string; taints?: { key: string }[] };
    status?: { conditions?: { type: string; status: string }[] };
  }
  const node = await apiJson<NodeView>(admin, 'GET', `/api/v1/nodes/${name}`);
  const ready = node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
  const notReadyTaint = node.spec?.taints?.some((t) => t.key.startsWith('node.kubernetes.io/')) ?? false;
  return ready && !notReadyTaint && node.spec?.podCIDR !== undefined;
}

// gpu-node-0.. `count`-1, schedulable, each with its KWOK IP pool made.
async function addGpuNodes(admin: Credentials, count: number, deadline: number): Promise<string[]> {
  const names = Array.from({ length: count }, (_, i) => `gpu-node-${i}`);
  for (const name of names) await apiJson(admin, 'POST', '/api/v1/nodes', buildGpuNode(name));
  await waitFor(`${names.length} GPU node(s) Ready`, deadline, async () =>
    (await Promise.all(names.map((n) => isNodeSchedulable(admin, n)))).every(Boolean),
  );
  for (const name of names) await warmIpPool(admin, name, deadline);
  return names;
}

// KWOK's IP pool for `node`, made by one pod alone (buildIpPoolWarmupPod says why); the pod goes.
async function warmIpPool(admin: Credentials, node: string, deadline: number): Promise<void> {
  const pod = buildIpPoolWarmupPod(node) as { metadata: { name: string; namespace: string } };
  const path = `/api/v1/namespaces/${pod.metadata.namespace}/pods`;
  // Retried: with ServiceAccount admission on, the namespace's default account comes a moment later.
  await waitFor(`KWOK's IP pool on ${node}`, deadline, async () => {
    const got = await apiRequest(admin, 'GET', `${path}/${pod.metadata.name}`);
    if (got.status === 404) await apiJson(admin, 'POST', path, pod);
    const status =
      got.status === 200 ? (JSON.parse(got.body) as { status?: { podIP?: string } }).status : undefined;
    return status?.podIP !== undefined;
  });
  await apiJson(admin, 'DELETE', `${path}/${pod.metadata.name}`, { gracePeriodSeconds: 0 });
  await waitFor(`${pod.metadata.name} gone`, deadline, async () => {
    return (await apiRequest(admin, 'GET', `${path}/${pod.metadata.name}`)).status === 404;
  });
}

// Polls check until it returns true. Given a process, fails as soon as it exits.
async function waitFor(
  what: ManagedProcess | string,
  deadline: number,
  check: () => Promise<boolean>,
): Promise<void> {
  let last: unknown;
  const name = typeof what === 'string' ? what : what.name;
  while (Date.now() < deadline) {
    if (typeof what !== 'string' && !what.isRunning()) {
      const exit = await what.exited;
      throw new Error(`${name} exited (code ${exit.code}, signal ${exit.signal}) before it was ready`);
    }
    try {
      if (await check()) return;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${name}`, { cause: last });
}

function healthz(port: number): string {
  return `https://127.0.0.1:${port}/healthz`;
}

// Status of a GET; the controller manager and scheduler serve self-signed certs.
async function httpStatus(url: string): Promise<number> {
  const request = url.startsWith('https:') ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(url, { timeout: 2_000, rejectUnauthorized: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url}: timed out`)));
    req.on('error', reject);
    req.end();
  });
}

function memoize(fn: () => Promise<void>): () => Promise<void> {
  let once: Promise<void> | undefined;
  return () => (once ??= fn());
}

function ms(since: number): string {
  return `${Math.round(performance.now() - since)}ms`;
}
