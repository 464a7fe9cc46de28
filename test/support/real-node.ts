// A real node for the test control plane, next to its KWOK nodes: a kubelet (built by
// `hack/build-controlplane.sh --node` from the control plane's own k8s.io/kubernetes
// module) with a private containerd as its CRI, pods networked by Debian's
// containernetworking-plugins (bridge, host-local, portmap; containerd adds loopback), and
// a pause image built here (hack/images/pause.sh). Optionally kube-proxy in iptables mode,
// CoreDNS as the pods' cluster DNS (node-dns.ts) and kube-router enforcing NetworkPolicies
// (node-netpol.ts).
//
// Everything runs inside hack/in-netns.sh's private network, PID and mount namespaces:
//   - the bridge, the pods' veths and network namespaces, kube-proxy's iptables rules all
//     live in the private network namespace and vanish with it;
//   - containerd keeps its root, state, sockets and the pods' netns mounts under one
//     directory (netns_mounts_under_state_dir); the kubelet's root dir and pod logs too,
//     and /var/log/containers (where the kubelet links container logs, a path it does not
//     let one change) is a bind mount of a directory under it, in the private mount
//     namespace only;
//   - the one thing no namespace hides is the cgroup file system (cgroup v1 here): the
//     kubelet's pods go under a cgroup root of their own, /cacheroute-<dir>, removed on stop.
//
// The pods' addresses: hack/in-netns.sh routes the KWOK pod CIDR (10.244.0.0/16) to lo, so
// that simulators can bind the KWOK pods' IPs; a bridge inside it would lose to that local
// route. The real node's pods take theirs from REAL_NODE_POD_CIDR, outside it, whatever
// podCIDR nodeipam gives the Node (the bridge's host-local IPAM does not read it).
//
// The kubelet's identity is system:node:<name> in system:nodes, a client certificate from
// the plane's client CA; the plane authorizes with RBAC only (no Node authorizer), so the
// ClusterRole system:node is bound to that user, as the Node authorizer's rules approximate.
// kube-proxy is system:kube-proxy, which the default binding system:node-proxier covers.
import { execFile, execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { stringify } from 'yaml';
import { findBinDir } from './binaries.ts';
import { parseImportOutput, parseTaskList, type ImportedImage } from './containerd.ts';
import type { BuiltImage, ImageName } from './images.ts';
import { REPO_ROOT } from './samples.ts';
import { SERVICE_CIDR, type ControlPlane } from './controlplane.ts';
import { apiRequest, writeKubeconfig, type Credentials } from './kube-api.ts';
import { issueClientCert, issueServingCert, pkiPaths } from './pki.ts';
import {
  readLogTail,
  registerCleanup,
  spawnManaged,
  stopManaged,
  waitUntilAnswering,
  type ManagedProcess,
} from './processes.ts';
import { CLUSTER_DOMAIN, startNodeDns } from './node-dns.ts';
import { startNetworkPolicyAgent } from './node-netpol.ts';
import { listensOn, withFreshPorts } from './fresh-ports.ts';

export const REAL_NODE_BINARIES = ['kubelet', 'kube-proxy'] as const;
/** The real node's pods' addresses: outside the KWOK pod CIDR hack/in-netns.sh routes to lo. */
export const REAL_NODE_POD_CIDR = '10.245.0.0/24';
/** The sandbox image's name; hack/images/pause.sh tags its image so. */
export const PAUSE_IMAGE = 'registry.k8s.io/pause:3.10.1';
/** The containerd namespace the CRI plugin keeps the node's images and containers in. */
export const CRI_NAMESPACE = 'k8s.io';
/** Debian's containernetworking-plugins. */
export const CNI_BIN_DIR = '/usr/lib/cni';
const BRIDGE = 'crn0';
// Where the kubelet links every container's log; not configurable.
const CONTAINER_LOGS_DIR = '/var/log/containers';
const CNI_PLUGINS = ['bridge', 'host-local', 'loopback', 'portmap'] as const;

/** containerd with its CRI plugin, every path under dir, the pods' netns mounts too. */
export function buildCriContainerdConfig(dir: string, opts: { sandboxImage: string }): string {
  const q = JSON.stringify;
  const cri = '[plugins."io.containerd.grpc.v1.cri"]';
  return [
    'version = 2',
    `root = ${q(join(dir, 'root'))}`,
    `state = ${q(join(dir, 'state'))}`,
    '[grpc]',
    `  address = ${q(join(dir, 'containerd.sock'))}`,
    '[ttrpc]',
    `  address = ${q(join(dir, 'containerd.ttrpc.sock'))}`,
    cri,
    `  sandbox_image = ${q(opts.sandboxImage)}`,
    '  netns_mounts_under_state_dir = true',
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    // The kernel here has no AppArmor; cgroup v1 has no hugetlb mounted.
    '  disable_apparmor = true',
    '  tolerate_missing_hugetlb_controller = true',
    // Root here lacks CAP_SYS_RESOURCE: runc cannot lower a container's oom_score_adj (the
    // kubelet asks -998 for a sandbox), and fails with "can't get final child's PID from
    // pipe". Restricted, containerd caps it at its own.
    '  restrict_oom_score_adj = true',
    `${cri.slice(0, -1)}.cni]`,
    `  bin_dir = ${q(CNI_BIN_DIR)}`,
    `  conf_dir = ${q(join(dir, 'cni'))}`,
    `${cri.slice(0, -1)}.containerd]`,
    '  snapshotter = "overlayfs"',
    '  default_runtime_name = "runc"',
    `${cri.slice(0, -1)}.containerd.runtimes.runc]`,
    '  runtime_type = "io.containerd.runc.v2"',
    `${cri.slice(0, -1)}.containerd.runtimes.runc.options]`,
    // The kubelet's cgroupDriver: cgroupfs (no systemd here).
    '  SystemdCgroup = false',
    '',
  ].join('\n');
}

/** The pods' network: one bridge, addresses from podCidr, the node's address as their gateway. */
export function buildCniConfig(dir: string, podCidr: string): object {
  return {
    cniVersion: '1.0.0',
    name: 'cacheroute-real-node',
    plugins: [
      {
        type: 'bridge',
        bridge: BRIDGE,
        isGateway: true,
        ipMasq: false,
        // A pod reaching a Service whose endpoint is itself comes back through the bridge.
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          ranges: [[{ subnet: podCidr }]],
          routes: [{ dst: '0.0.0.0/0' }],
          dataDir: join(dir, 'cni-ipam'),
        },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  };
}

export interface KubeletConfigInput {
  dir: string;
  containerdSocket: string;
  cgroupRoot: string;
  hostIP: string;
  port: number;
  healthzPort: number;
  clientCaFile: string;
  tlsCertFile: string;
  tlsKeyFile: string;
  /** The nameservers the kubelet gives pods (node-dns.ts); none: pods get the machine's resolv.conf. */
  clusterDNS?: readonly string[];
}

/** The KubeletConfiguration: cgroup v1 allowed, cgroupfs, everything it writes under dir. */
export function buildKubeletConfig(c: KubeletConfigInput): object {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // v1.35 refuses cgroup v1 unless told otherwise (v1beta1 defaults it to true), and this
    // machine has only cgroup v1.
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: c.cgroupRoot,
    containerRuntimeEndpoint: `unix://${c.containerdSocket}`,
    address: c.hostIP,
    port: c.port,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: c.healthzPort,
    tlsCertFile: c.tlsCertFile,
    tlsPrivateKeyFile: c.tlsKeyFile,
    rotateCertificates: false,
    serverTLSBootstrap: false,
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: c.clientCaFile },
    },
    authorization: { mode: 'Webhook' },
    podLogsDir: join(c.dir, 'pod-logs'),
    clusterDomain: CLUSTER_DOMAIN,
    ...(c.clusterDNS ? { clusterDNS: c.clusterDNS } : {}),
    // No swap accounting on a test machine that may have swap.
    failSwapOn: false,
    // The disk is shared with other work: evict only when it is really full.
    evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '2%', 'imagefs.available': '2%' },
    imageGCHighThresholdPercent: 99,
    imageGCLowThresholdPercent: 98,
    // Set by hand: no sysctl changes the kubelet would insist on.
    protectKernelDefaults: false,
    serializeImagePulls: false,
    // Pods reach Running sooner than with the 1-minute default.
    syncFrequency: '10s',
  };
}

export function buildKubeletArgs(c: {
  dir: string;
  name: string;
  hostIP: string;
  kubeconfig: string;
  config: string;
}): string[] {
  return [
    `--config=${c.config}`,
    `--kubeconfig=${c.kubeconfig}`,
    `--root-dir=${join(c.dir, 'kubelet')}`,
    `--cert-dir=${join(c.dir, 'kubelet-pki')}`,
    `--hostname-override=${c.name}`,
    `--node-ip=${c.hostIP}`,
    `--node-labels=cacheroute.dev/real-node=true`,
    '--v=1',
  ];
}

/** KubeProxyConfiguration: iptables mode, leaves the machine's conntrack sysctls alone. */
export function buildKubeProxyConfig(c: {
  kubeconfig: string;
  name: string;
  hostIP: string;
  podCidr: string;
  healthzPort: number;
  metricsPort: number;
}): object {
  return {
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    mode: 'iptables',
    clientConnection: { kubeconfig: c.kubeconfig },
    hostnameOverride: c.name,
    bindAddress: c.hostIP,
    clusterCIDR: c.podCidr,
    detectLocalMode: 'ClusterCIDR',
    healthzBindAddress: `127.0.0.1:${c.healthzPort}`,
    metricsBindAddress: `127.0.0.1:${c.metricsPort}`,
    // 0: do not set nf_conntrack_max (a global the network namespace cannot change).
    conntrack: { maxPerCore: 0, min: 0 },
  };
}

export interface RealNode {
  readonly name: string;
  readonly dir: string;
  readonly podCidr: string;
  readonly kubelet: ManagedProcess;
  readonly kubeProxy: ManagedProcess | undefined;
  /** From start to the Node Ready, ms. */
  readonly readyMs: number;
  /** ctr against the node's containerd, in the CRI's namespace. */
  ctr(args: readonly string[], opts?: { timeoutMs?: number }): Promise<string>;
  /** Imports an OCI archive for the kubelet's pods (imagePullPolicy IfNotPresent or Never); refs as the CRI names them. */
  importArchive(path: string): Promise<ImportedImage[]>;
  logTails(): string;
  /** A container's log as the kubelet wrote it (kubectl logs is not served: the API server has no kubelet client certificate). */
  podLog(namespace: string, pod: string, container: string): string;
  /** Stops kube-proxy, the kubelet, every pod's containers and containerd; removes the cgroups and dir. Idempotent. */
  stop(): Promise<void>;
}

export interface RealNodeOptions {
  cp: ControlPlane;
  name?: string;
  /** The pause image's OCI archive (hack/images/pause.sh). */
  pauseArchive: string;
  kubeProxy?: boolean;
  /** CoreDNS on the node's address as the pods' cluster DNS (node-dns.ts). */
  dns?: boolean;
  /** NetworkPolicies enforced for the node's pods, by kube-router (node-netpol.ts). */
  networkPolicy?: boolean;
  log?: (msg: string) => void;
  readyTimeoutMs?: number;
}

export async function startRealNode(opts: RealNodeOptions): Promise<RealNode> {
  const started = performance.now();
  const log = opts.log ?? ((msg: string) => void process.stderr.write(`[real-node] ${msg}\n`));
  if (process.env['CACHEROUTE_NETNS'] !== '1') {
    throw new Error('a real node runs inside a private network namespace: bash hack/in-netns.sh <command>');
  }
  const binDir = findBinDir([
    ...REAL_NODE_BINARIES,
    ...(opts.dns ? ['coredns'] : []),
    ...(opts.networkPolicy ? ['kube-router'] : []),
  ]);
  for (const p of CNI_PLUGINS) {
    if (!existsSync(join(CNI_BIN_DIR, p)))
      throw new Error(`${CNI_BIN_DIR}/${p} is missing: apt-get install containernetworking-plugins`);
  }
  for (const c of [
    'containerd',
    'runc',
    'ctr',
    'iptables',
    'conntrack',
    ...(opts.networkPolicy ? ['ipset'] : []),
  ]) {
    if (!onPath(c)) throw new Error(`${c} is not on PATH: bash hack/install-test-deps.sh --real-node`);
  }
  const name = opts.name ?? 'real-node-0';
  const { cp } = opts;
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-node-'));
  const cgroupRoot = `/cacheroute-${basename(dir)}`;
  const processes: ManagedProcess[] = [];
  const logs = join(dir, 'logs');
  mkdirSync(logs);

  // Cleanup that must run even when the test process dies: unmount what containerd and
  // the kubelet mounted under dir (netns, volumes), remove the cgroups, then dir.
  let createdLogDir = false;
  const removeAll = (): void => {
    // On a signal the harness runs this at once, synchronously, with the pods' containers
    // still running (processes.ts): their shims and processes go first.
    killShims(dir);
    unmountUnder(dir);
    // Made on the machine's disk only so that there is something to mount over.
    if (createdLogDir) rmSync(CONTAINER_LOGS_DIR, { recursive: true, force: true });
    removeCgroupTree(cgroupRoot);
    if (process.env['CACHEROUTE_KEEP_CONTROLPLANE_DIR'] === '1') log(`kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  };
  const unregister = registerCleanup(removeAll);
  const sock = join(dir, 'containerd.sock');
  const ctr = (args: readonly string[], o: { timeoutMs?: number } = {}): Promise<string> =>
    new Promise((resolve, reject) => {
      execFile(
        'ctr',
        ['--address', sock, '--namespace', CRI_NAMESPACE, ...args],
        { timeout: o.timeoutMs ?? 60_000, maxBuffer: 16 * 1024 * 1024 },
        (err, stdout, stderr) => {
          if (err)
            reject(new Error(`ctr ${args.join(' ')}: ${stderr.trim() || err.message}`, { cause: err }));
          else resolve(stdout);
        },
      );
    });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      const [containerd, ...rest] = processes;
      for (const p of rest.reverse()) await stopManaged(p);
      if (containerd?.isRunning()) await killAllTasks(ctr);
      if (containerd) await stopManaged(containerd);
      killShims(dir);
      unregister();
      removeAll();
    })());

  const tails = (): string =>
    processes.map((p) => `--- ${p.name} (${p.logPath}) ---\n${readLogTail(p.logPath)}`).join('\n');

  try {
    // /var/log/containers: a directory of ours, in this mount namespace only.
    mkdirSync(join(dir, 'container-logs'));
    if (!existsSync(CONTAINER_LOGS_DIR)) {
      mkdirSync(CONTAINER_LOGS_DIR, { recursive: true });
      createdLogDir = true;
    }
    execFileSync('mount', ['--bind', join(dir, 'container-logs'), CONTAINER_LOGS_DIR]);
    // In this network namespace only: bridged pod traffic goes through iptables (kube-proxy's
    // Services), and the node forwards between the bridge and lo.
    writeFileSync('/proc/sys/net/bridge/bridge-nf-call-iptables', '1');
    writeFileSync('/proc/sys/net/ipv4/ip_forward', '1');
    // A route to the Service CIDR, as a node's default route gives it, so that the node's own
    // connections to a ClusterIP get as far as kube-proxy's DNAT (the namespace has no
    // default route, and no dummy interfaces in this kernel); from the node's address.
    execFileSync('ip', ['route', 'replace', SERVICE_CIDR, 'dev', 'lo', 'src', cp.hostIP]);
    createCgroupRoot(cgroupRoot);

    mkdirSync(join(dir, 'cni'));
    writeFileSync(
      join(dir, 'cni', '10-cacheroute.conflist'),
      JSON.stringify(buildCniConfig(dir, REAL_NODE_POD_CIDR), null, 2),
    );
    writeFileSync(join(dir, 'containerd.toml'), buildCriContainerdConfig(dir, { sandboxImage: PAUSE_IMAGE }));
    const containerd = spawnManaged('containerd', 'containerd', ['--config', join(dir, 'containerd.toml')], {
      logPath: join(logs, 'containerd.log'),
    });
    processes.push(containerd);
    await waitUntilAnswering(
      containerd,
      () =>
        ctr(['version'], { timeoutMs: 5_000 }).then(
          () => true,
          () => false,
        ),
      { what: 'ctr version', timeoutMs: 30_000, intervalMs: 100 },
    );
    const pause = parseImportOutput(
      await ctr(['images', 'import', opts.pauseArchive], { timeoutMs: 120_000 }),
    );
    if (!pause.some((i) => i.ref === PAUSE_IMAGE))
      throw new Error(`${opts.pauseArchive}: imported ${JSON.stringify(pause)}, not ${PAUSE_IMAGE}`);
    log(`containerd with CRI ready, pause image imported (${dir})`);

    // Identities: the kubelet's client and serving certificates, kube-proxy's client.
    const pkiDir = join(cp.dir, 'pki');
    const ca = pkiPaths(pkiDir);
    const admin: Credentials = {
      server: cp.server,
      caFile: ca.servingCa.cert,
      certFile: ca.admin.cert,
      keyFile: ca.admin.key,
    };
    const nodeUser = `system:node:${name}`;
    const client = await issueClientCert(pkiDir, `kubelet-${name}`, nodeUser, ['system:nodes']);
    const serving = await issueServingCert(pkiDir, `kubelet-serving-${name}`, {
      ips: [cp.hostIP],
      dnsNames: [name],
    });
    const kubeletKubeconfig = join(dir, 'kubelet.kubeconfig');
    writeKubeconfig(
      kubeletKubeconfig,
      { server: cp.server, caFile: ca.servingCa.cert, certFile: client.cert, keyFile: client.key },
      nodeUser,
    );
    await ensureObject(admin, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: `cacheroute-real-node:${name}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:node' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: nodeUser }],
    });

    if (opts.dns) {
      processes.push(
        await startNodeDns({ binDir, dir, logs, pkiDir, server: cp.server, address: cp.hostIP, admin }),
      );
      log(`CoreDNS serving ${CLUSTER_DOMAIN} on ${cp.hostIP}:53`);
    }

    const kubeletConfig = join(dir, 'kubelet-config.yaml');
    // The kubelet's ports are in its config file: ports free now, again if one was lost (fresh-ports.ts).
    const kubelet = await withFreshPorts(
      2,
      async ([port = 0, healthzPort = 0]) => {
        writeFileSync(
          kubeletConfig,
          stringify(
            buildKubeletConfig({
              dir,
              containerdSocket: sock,
              cgroupRoot,
              hostIP: cp.hostIP,
              port,
              healthzPort,
              clientCaFile: ca.clientCa.cert,
              tlsCertFile: serving.cert,
              tlsKeyFile: serving.key,
              ...(opts.dns ? { clusterDNS: [cp.hostIP] } : {}),
            }),
          ),
        );
        const kubelet = spawnManaged(
          'kubelet',
          join(binDir, 'kubelet'),
          buildKubeletArgs({
            dir,
            name,
            hostIP: cp.hostIP,
            kubeconfig: kubeletKubeconfig,
            config: kubeletConfig,
          }),
          { logPath: join(logs, 'kubelet.log') },
        );
        try {
          await waitUntilAnswering(
            kubelet,
            async () =>
              (await isNodeReady(admin, name)) &&
              listensOn(kubelet.pid, port) &&
              listensOn(kubelet.pid, healthzPort),
            { what: `Node ${name} Ready`, timeoutMs: opts.readyTimeoutMs ?? 120_000, intervalMs: 250 },
          );
        } catch (err) {
          await stopManaged(kubelet);
          throw err;
        }
        return kubelet;
      },
      { what: 'kubelet' },
    );
    processes.push(kubelet);
    const readyMs = Math.round(performance.now() - started);
    log(`Node ${name} Ready in ${readyMs} ms`);

    let kubeProxy: ManagedProcess | undefined;
    if (opts.kubeProxy) {
      const proxyPair = await issueClientCert(pkiDir, `kube-proxy-${name}`, 'system:kube-proxy', []);
      const proxyKubeconfig = join(dir, 'kube-proxy.kubeconfig');
      writeKubeconfig(
        proxyKubeconfig,
        { server: cp.server, caFile: ca.servingCa.cert, certFile: proxyPair.cert, keyFile: proxyPair.key },
        'system:kube-proxy',
      );
      const proxyConfig = join(dir, 'kube-proxy-config.yaml');
      // Its ports are in its config file: ports free now, again if one was lost (fresh-ports.ts).
      kubeProxy = await withFreshPorts(
        2,
        async ([proxyHealthz = 0, proxyMetrics = 0]) => {
          writeFileSync(
            proxyConfig,
            stringify(
              buildKubeProxyConfig({
                kubeconfig: proxyKubeconfig,
                name,
                hostIP: cp.hostIP,
                podCidr: REAL_NODE_POD_CIDR,
                healthzPort: proxyHealthz,
                metricsPort: proxyMetrics,
              }),
            ),
          );
          const proc = spawnManaged(
            'kube-proxy',
            join(binDir, 'kube-proxy'),
            [`--config=${proxyConfig}`, '--v=1'],
            {
              logPath: join(logs, 'kube-proxy.log'),
            },
          );
          try {
            await waitUntilAnswering(
              proc,
              async () =>
                (await fetch(`http://127.0.0.1:${proxyHealthz}/healthz`).then(
                  (r) => r.status,
                  () => 0,
                )) === 200 && listensOn(proc.pid, proxyHealthz),
              { what: '/healthz', timeoutMs: 60_000, intervalMs: 250 },
            );
          } catch (err) {
            await stopManaged(proc);
            throw err;
          }
          return proc;
        },
        { what: 'kube-proxy' },
      );
      processes.push(kubeProxy);
      log(`kube-proxy (iptables) healthy`);
    }
    if (opts.networkPolicy) {
      // After the Node exists: kube-router reads its address from it.
      processes.push(
        await startNetworkPolicyAgent({
          binDir,
          dir,
          logs,
          pkiDir,
          server: cp.server,
          name,
          serviceCidr: SERVICE_CIDR,
          admin,
        }),
      );
      log('kube-router enforcing NetworkPolicies');
    }

    return {
      name,
      dir,
      podCidr: REAL_NODE_POD_CIDR,
      kubelet,
      kubeProxy,
      readyMs,
      ctr,
      importArchive: async (path) => {
        const imported = parseImportOutput(await ctr(['images', 'import', path], { timeoutMs: 300_000 }));
        const named: ImportedImage[] = [];
        for (const i of imported) {
          const ref = normalizeImageRef(i.ref);
          if (ref !== i.ref) await ctr(['images', 'tag', '--force', i.ref, ref]);
          named.push({ ref, digest: i.digest });
        }
        return named;
      },
      logTails: tails,
      podLog: (namespace, pod, container) => readPodLog(join(dir, 'pod-logs'), namespace, pod, container),
      stop,
    };
  } catch (err) {
    log(`real node failed to start: ${String(err)}\n${tails()}`);
    await stop();
    throw err;
  }
}

/** hack/images/pause.sh's archive, cached only: inside the namespace nothing can be fetched. */
export function findPauseArchive(): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'bash',
      [join(REPO_ROOT, 'hack', 'images', 'pause.sh')],
      { env: { ...process.env, IMAGES_CACHED_ONLY: '1' } },
      (err, stdout, stderr) => {
        const archive = stdout.trim().split(/\s+/)[1];
        if (err || archive === undefined)
          reject(
            new Error(`hack/images/pause.sh: ${stderr.trim() || (err?.message ?? 'no archive printed')}`, {
              cause: err,
            }),
          );
        else resolve(archive);
      },
    );
  });
}

/** Imports the images `make images` built into the node; each by the name its CRI knows it by. */
export async function importBuiltImages(
  node: Pick<RealNode, 'importArchive'>,
  images: ReadonlyMap<ImageName, BuiltImage>,
): Promise<Map<ImageName, string>> {
  const refs = new Map<ImageName, string>();
  for (const [name, built] of images) {
    const imported = await node.importArchive(built.archive);
    const got = imported.map((i) => i.digest).join(', ');
    if (got !== built.digest) throw new Error(`${built.archive}: imported ${got}, built ${built.digest}`);
    refs.set(name, imported[0]?.ref ?? '');
  }
  return refs;
}

/** The chart's image values for images the node has (repository, tag), never pulled. */
export function buildChartImageValues(refs: ReadonlyMap<ImageName, string>): {
  operator: { image: Record<string, string> };
  gateway: { image: Record<string, string> };
} {
  const image = (name: ImageName): Record<string, string> => {
    const ref = refs.get(name);
    if (ref === undefined) throw new Error(`no ${name} image on the node`);
    const colon = ref.lastIndexOf(':');
    if (colon <= ref.lastIndexOf('/')) throw new Error(`${ref}: no tag`);
    return { repository: ref.slice(0, colon), tag: ref.slice(colon + 1), pullPolicy: 'Never' };
  };
  return { operator: { image: image('operator') }, gateway: { image: image('gateway') } };
}

/**
 * The name the CRI (and so a pod's image field) knows an image by: a reference without a
 * registry is Docker Hub's, one without a path under it is in library/ (as containerd's
 * reference.ParseNormalizedNamed has it). `ctr images import` keeps the archive's name as it is.
 */
export function normalizeImageRef(ref: string): string {
  const slash = ref.indexOf('/');
  const first = slash < 0 ? '' : ref.slice(0, slash);
  const hasDomain = first.includes('.') || first.includes(':') || first === 'localhost';
  if (hasDomain) return ref;
  return slash < 0 ? `docker.io/library/${ref}` : `docker.io/${ref}`;
}

// <podLogsDir>/<namespace>_<pod>_<uid>/<container>/<restart>.log, the CRI's format:
// `<time> <stream> <tag> <text>` per line; the text is returned.
function readPodLog(root: string, namespace: string, pod: string, container: string): string {
  const prefix = `${namespace}_${pod}_`;
  const lines: string[] = [];
  for (const d of readdirSync(root).filter((e) => e.startsWith(prefix))) {
    const cdir = join(root, d, container);
    if (!existsSync(cdir)) continue;
    for (const f of readdirSync(cdir).sort()) {
      for (const line of readFileSync(join(cdir, f), 'utf8').split('\n').filter(Boolean))
        lines.push(line.split(' ').slice(3).join(' '));
    }
  }
  return lines.join('\n');
}

async function isNodeReady(admin: Credentials, name: string): Promise<boolean> {
  const res = await apiRequest(admin, 'GET', `/api/v1/nodes/${name}`);
  if (res.status !== 200) return false;
  const node = JSON.parse(res.body) as { status?: { conditions?: { type: string; status: string }[] } };
  return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

async function ensureObject(admin: Credentials, collection: string, obj: object): Promise<void> {
  const res = await apiRequest(admin, 'POST', collection, obj);
  if (res.status !== 201 && res.status !== 409)
    throw new Error(`POST ${collection}: ${res.status} ${res.body}`);
}

// Every task the CRI left (the pods' containers and sandboxes): SIGKILL and delete, so the
// shims exit and the cgroups empty.
async function killAllTasks(ctr: (args: readonly string[]) => Promise<string>): Promise<void> {
  const tasks = parseTaskList(await ctr(['task', 'ls']).catch(() => ''));
  for (const t of tasks) await ctr(['task', 'kill', '--signal', 'SIGKILL', t.name]).catch(() => undefined);
  for (const t of tasks) await ctr(['task', 'delete', '--force', t.name]).catch(() => undefined);
}

// The runc shims outlive containerd by design; those of this node's containerd (named by
// its socket on their command line) go with it.
function killShims(dir: string): void {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmdline.startsWith('/usr/bin/containerd-shim') && cmdline.includes(dir))
        process.kill(Number(pid), 'SIGKILL');
    } catch {
      // gone
    }
  }
}

// Lazily unmounts every mount at or below dir, deepest first (containerd's netns and
// overlay mounts, the kubelet's volume tmpfs, the /var/log/containers bind source).
function unmountUnder(dir: string): void {
  let mounts: string[];
  try {
    mounts = readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .map((line) => line.split(' ')[4] ?? '')
      .map((p) => p.replace(/\\040/g, ' '));
  } catch {
    return;
  }
  const targets = [CONTAINER_LOGS_DIR, ...mounts.filter((m) => m === dir || m.startsWith(`${dir}/`))];
  for (const m of targets.sort((a, b) => b.length - a.length)) {
    try {
      execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    } catch {
      // not mounted
    }
  }
}

const CGROUP_FS = '/sys/fs/cgroup';

function cgroupHierarchies(): string[] {
  try {
    return readdirSync(CGROUP_FS).filter((h) => statSync(join(CGROUP_FS, h)).isDirectory());
  } catch {
    return [];
  }
}

// The kubelet wants its cgroup root to exist in every hierarchy; cpuset's needs its CPUs
// and memory nodes set before a task can join (cgroup v1 does not inherit them).
function createCgroupRoot(root: string): void {
  for (const h of cgroupHierarchies()) {
    const path = join(CGROUP_FS, h, root);
    mkdirSync(path, { recursive: true });
    if (h === 'cpuset') {
      for (const f of ['cpuset.cpus', 'cpuset.mems'])
        writeFileSync(join(path, f), readFileSync(join(CGROUP_FS, h, f)));
    }
  }
}

// rmdir depth-first: a cgroup directory goes only once its children and tasks are gone, so
// any process still in one (a container whose shim is gone) is killed first; synchronous, for
// the harness's exit hook.
function removeCgroupTree(root: string): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const procsIn = (path: string): number[] => {
    try {
      return readFileSync(join(path, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  };
  const remove = (path: string): void => {
    let entries: string[];
    try {
      entries = readdirSync(path).filter((e) => statSync(join(path, e)).isDirectory());
    } catch {
      return;
    }
    for (const e of entries) remove(join(path, e));
    for (const pid of procsIn(path)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    const deadline = Date.now() + 2_000;
    while (procsIn(path).length > 0 && Date.now() < deadline) Atomics.wait(pause, 0, 0, 10);
    try {
      rmdirSync(path);
    } catch {
      // still busy after 2 s: left behind, named in the machine's cgroup tree by this node's dir
    }
  };
  for (const h of cgroupHierarchies()) remove(join(CGROUP_FS, h, root));
}

function onPath(cmd: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
