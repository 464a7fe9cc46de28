import { describe, expect, it } from 'vitest';
import {
  buildCniConfig,
  buildCriContainerdConfig,
  buildKubeletConfig,
  normalizeImageRef,
  PAUSE_IMAGE,
} from './real-node.ts';
import { buildCorefile } from './node-dns.ts';
import { buildKubeRouterArgs } from './node-netpol.ts';

describe('normalizeImageRef', () => {
  it('names an image without a registry as the CRI looks it up: Docker Hub, library/ for one path element', () => {
    expect(normalizeImageRef('cacheroute/simulator:dev')).toBe('docker.io/cacheroute/simulator:dev');
    expect(normalizeImageRef('busybox:1')).toBe('docker.io/library/busybox:1');
  });

  it('leaves a reference with a registry as it is', () => {
    expect(normalizeImageRef(PAUSE_IMAGE)).toBe(PAUSE_IMAGE);
    expect(normalizeImageRef('localhost/cacheroute/node-base:24')).toBe('localhost/cacheroute/node-base:24');
    expect(normalizeImageRef('registry:5000/a/b:c')).toBe('registry:5000/a/b:c');
  });
});

describe('buildKubeletConfig', () => {
  const input = {
    dir: '/d',
    containerdSocket: '/d/containerd.sock',
    cgroupRoot: '/cacheroute-x',
    hostIP: '10.200.0.1',
    port: 1,
    healthzPort: 2,
    clientCaFile: '/ca',
    tlsCertFile: '/c',
    tlsKeyFile: '/k',
  };
  const config = buildKubeletConfig(input) as Record<string, unknown>;

  it('lets the kubelet start on cgroup v1 (v1beta1 defaults failCgroupV1 to true) with the cgroupfs driver', () => {
    expect(config).toMatchObject({
      failCgroupV1: false,
      cgroupDriver: 'cgroupfs',
      cgroupRoot: '/cacheroute-x',
    });
  });

  it('gives pods the node DNS only when there is one', () => {
    expect(config).not.toHaveProperty('clusterDNS');
    const withDns = buildKubeletConfig({ ...input, clusterDNS: ['10.200.0.1'] }) as Record<string, unknown>;
    expect(withDns).toMatchObject({ clusterDNS: ['10.200.0.1'], clusterDomain: 'cluster.local' });
  });

  it('serves only authenticated, authorized requests, and writes pod logs under its dir', () => {
    expect(config).toMatchObject({
      readOnlyPort: 0,
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: true },
        x509: { clientCAFile: '/ca' },
      },
      authorization: { mode: 'Webhook' },
      podLogsDir: '/d/pod-logs',
      containerRuntimeEndpoint: 'unix:///d/containerd.sock',
    });
  });
});

describe('buildCriContainerdConfig', () => {
  it('keeps every path under its dir, the pause image built here, and caps oom_score_adj (no CAP_SYS_RESOURCE)', () => {
    const lines = buildCriContainerdConfig('/d', { sandboxImage: PAUSE_IMAGE })
      .split('\n')
      .map((l) => l.trim());
    expect(lines).toEqual(
      expect.arrayContaining([
        'root = "/d/root"',
        'state = "/d/state"',
        'address = "/d/containerd.sock"',
        `sandbox_image = "${PAUSE_IMAGE}"`,
        'netns_mounts_under_state_dir = true',
        'restrict_oom_score_adj = true',
        'bin_dir = "/usr/lib/cni"',
        'conf_dir = "/d/cni"',
        'SystemdCgroup = false',
      ]),
    );
  });
});

describe('buildCniConfig', () => {
  it('bridges the pods with host-local addresses from the CIDR given, IPAM state under its dir, and port maps', () => {
    const conf = buildCniConfig('/d', '10.245.0.0/24') as { plugins: Record<string, unknown>[] };
    expect(conf.plugins.map((p) => p['type'])).toEqual(['bridge', 'portmap']);
    expect(conf.plugins[0]).toMatchObject({
      isGateway: true,
      hairpinMode: true,
      ipam: { type: 'host-local', ranges: [[{ subnet: '10.245.0.0/24' }]], dataDir: '/d/cni-ipam' },
    });
  });
});

describe('buildCorefile', () => {
  it('serves cluster.local from the API server on the node address only, and says when it has synced', () => {
    const corefile = buildCorefile({
      address: '10.200.0.1',
      kubeconfig: '/d/coredns.kubeconfig',
      readyPort: 7,
    });
    const lines = corefile.split('\n').map((l) => l.trim());
    expect(lines).toEqual(
      expect.arrayContaining([
        'bind 10.200.0.1',
        'ready 127.0.0.1:7',
        'kubernetes cluster.local in-addr.arpa ip6.arpa {',
        'kubeconfig /d/coredns.kubeconfig',
      ]),
    );
    // No upstream: nothing outside the namespace would answer.
    expect(corefile).not.toContain('forward');
  });
});

describe('buildKubeRouterArgs', () => {
  it('runs only the network-policy controller: kube-proxy, the bridge and the routes are others', () => {
    const args = buildKubeRouterArgs({
      kubeconfig: '/k',
      name: 'n',
      serviceCidr: '10.0.0.0/24',
      healthPort: 9,
    });
    expect(args).toEqual(
      expect.arrayContaining([
        '--run-firewall=true',
        '--run-router=false',
        '--run-service-proxy=false',
        '--enable-cni=false',
        '--hostname-override=n',
        '--service-cluster-ip-range=10.0.0.0/24',
      ]),
    );
  });
});
