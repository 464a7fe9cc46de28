// The images themselves (`make images`, hack/images/build.sh): each runs under containerd
// and runc with the chart's securityContext as far as ctr expresses it (read-only root
// filesystem, a tmpfs /tmp like the chart's emptyDir, every capability dropped, no new
// privileges, the default seccomp profile) and as the user the chart's runAsUser names,
// which only the image's USER gives it. The simulator answers /server_info, the gateway
// routes a completion to it, and the operator, with a kubeconfig of the chart's own RBAC
// identity mounted read-only, reconciles a Deployment to Ready on the test control plane
// (SGLang simulators on the KWOK pods' IPs, as in operator.test.ts); then, as the chart
// runs it in a pod, from a ServiceAccount token and CA mounted where a pod has them, it
// takes the Lease over and scales that Deployment; and the gateway, in-cluster with the
// chart's gateway ServiceAccount, discovers that Deployment and serves a chat completion
// from its pods. Containers use the test's private network namespace (--net-host in
// hack/in-netns.sh).
//
// Ends with one line on stderr, `[images] {...}`: each image's digest, size (compressed,
// and unpacked as the container sees it) and start time (ctr run to the first answer).
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { DeploymentStatus } from '#api';
import { buildDeploymentManifest } from '../support/builders.ts';
import {
  SecurityContext,
  startContainerd,
  type Containerd,
  type ContainerSpec,
  type RunningContainer,
} from '../support/containerd.ts';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { createChartIdentity, helmTemplate, type RenderedObject } from '../support/helm.ts';
import { pkiPaths } from '../support/pki.ts';
import { httpStatus } from '../support/processes.ts';
import { buildImages, IMAGE_NAMES, type BuiltImage, type ImageName } from '../support/images.ts';
import { eventually, kubectlOk } from '../support/kubectl.ts';
import { gatewayNodeFlags } from '../../hack/images/gateway-node-flags.ts';
import { REPO_ROOT } from '../support/samples.ts';
import { startSimKubelet, type SimKubelet } from '../support/sim-kubelet.ts';

const RELEASE = 'cacheroute';
/** The operator's line once its probe and metrics server listens (manager.ts), with its port. */
const OPERATOR_LISTENING = 'serving probes and metrics';
const RELEASE_NS = 'cacheroute-system';
// The chart's <fullname>-gateway-keys: the release name already holds the chart's name.
const KEYS_SECRET = `${RELEASE}-gateway-keys`;
const NS = 'e2e-images';

let images: Map<ImageName, BuiltImage>;
let containerd: Containerd;
let mountDir: string;
const refs = new Map<ImageName, string>();
const report: Record<string, Record<string, unknown>> = {};

function image(name: ImageName): BuiltImage {
  const built = images.get(name);
  if (!built) throw new Error(`build.sh printed no ${name} image`);
  return built;
}

const ChartDeployment = z.object({
  spec: z.object({
    template: z.object({
      spec: z.object({
        securityContext: SecurityContext.default({}),
        containers: z.array(z.object({ securityContext: SecurityContext.default({}) })).min(1),
      }),
    }),
  }),
});

// The chart's pod and container securityContext of a component, merged (container wins).
async function chartSecurityContext(component: 'operator' | 'gateway'): Promise<SecurityContext> {
  const objects = await helmTemplate({ release: RELEASE, namespace: RELEASE_NS });
  const deployment = objects.find(
    (o: RenderedObject) =>
      o.kind === 'Deployment' && o.metadata.labels?.['app.kubernetes.io/component'] === component,
  );
  const pod = ChartDeployment.parse(deployment).spec.template.spec;
  return { ...pod.securityContext, ...pod.containers[0]?.securityContext };
}

/** A file the container's non-root user can read, mounted read-only. */
function mountable(name: string, content: string | Buffer): string {
  const path = join(mountDir, name);
  writeFileSync(path, content);
  chmodSync(path, 0o444);
  return path;
}

// The process's real, effective, saved and filesystem uids (/proc/PID/status).
function uidsOf(pid: number): number[] {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^Uid:\s+(.*)$/m)?.[1] ?? '';
  return line.trim().split(/\s+/).map(Number);
}

// The root filesystem as the container sees it (the overlay; /tmp, /proc and mounts are other file systems).
function unpackedBytes(pid: number): number {
  return Number(execFileSync('du', ['-sxb', `/proc/${pid}/root/`], { encoding: 'utf8' }).split('\t')[0]);
}

/**
 * The ports a container's program said it bound (listening on port 0), from the JSON line of
 * its log whose msg is `msg`; undefined until it said so.
 */
function boundPorts(container: RunningContainer, msg: string): Record<string, number> | undefined {
  let text: string;
  try {
    text = readFileSync(container.logPath, 'utf8');
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    if (!line.includes(msg)) continue;
    try {
      const parsed = JSON.parse(line) as Record<string, unknown>;
      if (parsed['msg'] !== msg) continue;
      return Object.fromEntries(
        Object.entries(parsed).filter((e): e is [string, number] => typeof e[1] === 'number'),
      );
    } catch {
      // not a log record
    }
  }
  return undefined;
}

/** The program in `container` listens on port 0: its ports once it says them (a `msg` line), read back. */
function portsSaidIn(msg: string): (container: RunningContainer) => Record<string, number> | undefined {
  return (container) => boundPorts(container, msg);
}

async function runUntilAnswering(
  name: ImageName,
  spec: Omit<ContainerSpec, 'image'>,
  /** The URL to ask, from the ports the program said it bound; undefined until it said them. */
  urlOf: (ports: Record<string, number>) => string,
  portsOf: (container: RunningContainer) => Record<string, number> | undefined,
  label: string = name,
): Promise<{ container: RunningContainer; ports: Record<string, number> }> {
  const started = performance.now();
  const container = await containerd.run({ ...spec, image: refs.get(name) ?? '' });
  const deadline = Date.now() + 60_000;
  let ports: Record<string, number> | undefined;
  for (;;) {
    const status = await container.status();
    ports ??= portsOf(container);
    const url = ports === undefined ? 'its start-up line' : urlOf(ports);
    if (status !== 'RUNNING')
      throw new Error(`${name} is ${status} before it answered ${url}:\n${container.logTail()}`);
    if (ports !== undefined && (await httpStatus(url)) === 200) break;
    if (Date.now() > deadline)
      throw new Error(`${name} did not answer ${url} in 60 s:\n${container.logTail()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  report[label] = {
    ...report[label],
    startMs: Math.round(performance.now() - started),
    unpackedBytes: unpackedBytes(container.pid),
  };
  return { container, ports: ports ?? {} };
}

beforeAll(async () => {
  images = await buildImages();
  containerd = await startContainerd();
  mountDir = mkdtempSync(join(tmpdir(), 'cacheroute-images-mounts-'));
  chmodSync(mountDir, 0o755);
  for (const name of IMAGE_NAMES) {
    const built = image(name);
    const imported = await containerd.importArchive(built.archive);
    expect(imported.map((i) => i.digest)).toEqual([built.digest]);
    refs.set(name, imported[0]?.ref ?? '');
    report[name] = { digest: built.digest, compressedBytes: statSync(built.archive).size };
  }
});

afterAll(async () => {
  await containerd?.stop();
  if (mountDir) rmSync(mountDir, { recursive: true, force: true });
  process.stderr.write(`[images] ${JSON.stringify(report)}\n`);
});

describe('images', () => {
  // The simulator is no part of the chart; it gets the gateway's (restricted) context.
  let simUrl: string;
  let sim: RunningContainer;

  it('the simulator image answers /server_info as uid 1000 on a read-only root filesystem', async () => {
    const securityContext = await chartSecurityContext('gateway');
    const started = await runUntilAnswering(
      'simulator',
      {
        name: 'simulator',
        command: [
          '/usr/local/bin/node',
          'test/sim/main.ts',
          '--model-path',
          'm',
          '--enable-metrics',
          '--host',
          '127.0.0.1',
          '--port',
          '0',
        ],
        securityContext,
      },
      (p) => `http://127.0.0.1:${p['port']}/server_info`,
      portsSaidIn('The server is fired up and ready to roll!'),
    );
    sim = started.container;
    const port = started.ports['port'];
    simUrl = `http://127.0.0.1:${port}`;
    const info = (await (await fetch(`${simUrl}/server_info`)).json()) as Record<string, unknown>;
    // /server_info reports the launch arguments, as SGLang's server_args do: the port asked for.
    expect(info).toMatchObject({ model_path: 'm', port: 0 });
    expect(uidsOf(sim.pid)).toEqual(Array(4).fill(securityContext.runAsUser));
    // Only /tmp is writable.
    const write = async (path: string): Promise<string> => {
      const script = `try { require('fs').writeFileSync(${JSON.stringify(path)}, 'x'); console.log('written') } catch (e) { console.log(e.code) }`;
      const exec = ['task', 'exec', '--exec-id', `write-${Date.now()}`, 'simulator'];
      return (await containerd.ctr([...exec, '/usr/local/bin/node', '-e', script])).trim();
    };
    expect(await write('/app/test/sim/main.ts')).toBe('EROFS');
    expect(await write('/tmp/scratch')).toBe('written');
  });

  it('the gateway image serves /healthz and routes a completion to the simulator image', async () => {
    const routes = [
      {
        model: 'm',
        deployment: `${NS}/m`,
        fingerprint: 'fp',
        salt: 's',
        endpoints: [{ id: 'sim', url: simUrl, fingerprint: 'fp', verified: true, ready: true }],
      },
    ];
    const securityContext = await chartSecurityContext('gateway');
    const started = await runUntilAnswering(
      'gateway',
      {
        name: 'gateway',
        command: [
          '/usr/local/bin/node',
          ...gatewayNodeFlags(),
          'gateway/src/server.ts',
          '--routes',
          '/etc/cacheroute/routes.json',
          '--auth',
          'open',
          '--host',
          '127.0.0.1',
          '--port',
          '0',
        ],
        securityContext,
        mounts: [
          {
            source: mountable('routes.json', JSON.stringify(routes)),
            destination: '/etc/cacheroute/routes.json',
          },
        ],
      },
      (p) => `http://127.0.0.1:${p['port']}/healthz`,
      portsSaidIn('listening'),
    );
    const gateway = started.container;
    const url = `http://127.0.0.1:${started.ports['port']}`;
    expect(uidsOf(gateway.pid)).toEqual(Array(4).fill(securityContext.runAsUser));
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', prompt: 'The capital of France is', max_tokens: 5 }),
    });
    const body = (await res.json()) as {
      choices?: { text: string }[];
      usage?: { completion_tokens: number };
    };
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.usage?.completion_tokens).toBe(5);
    expect(body.choices?.[0]?.text).toEqual(expect.any(String));
    // The completion came from the simulator container: it counts the request.
    const metrics = await (await fetch(`${simUrl}/metrics`)).text();
    expect(metrics).toMatch(/^sglang:generation_tokens_total\{[^}]*\} [1-9]/m);
  });

  describe('the operator image', () => {
    let cp: ControlPlane;
    let kubelet: SimKubelet;

    beforeAll(async () => {
      cp = await startControlPlane({ full: true, gpuNodes: 1 });
      const k = (args: string[]) => kubectlOk(args, { kubeconfig: cp.kubeconfig });
      await k(['apply', '--server-side', '-f', join(REPO_ROOT, 'crds')]);
      await k(['wait', '--for=condition=Established', '--timeout=60s', '-f', join(REPO_ROOT, 'crds')]);
      await k(['create', 'namespace', RELEASE_NS]);
      // The one Secret the operator keeps for the gateway (ADR 0027), made empty as the chart makes
      // it (templates/gateway-keys-secret.yaml): the operator's grant there is patch, not create.
      await k(['-n', RELEASE_NS, 'create', 'secret', 'generic', KEYS_SECRET]);
      await k(['create', 'namespace', NS]);
      kubelet = await startSimKubelet({ kubeconfig: cp.kubeconfig });
    });

    afterAll(async () => {
      await kubelet?.stop();
      await cp?.stop();
    });

    const deploymentStatus = async (name: string): Promise<DeploymentStatus> => {
      const out = await kubectlOk(['-n', NS, 'get', 'sgd', name, '-o', 'json'], {
        kubeconfig: cp.kubeconfig,
      });
      return (JSON.parse(out) as { status?: DeploymentStatus }).status ?? {};
    };
    const leaseHolder = async (): Promise<string | undefined> => {
      const out = await kubectlOk(['-n', RELEASE_NS, 'get', 'lease', 'cacheroute-operator', '-o', 'json'], {
        kubeconfig: cp.kubeconfig,
      });
      return (JSON.parse(out) as { spec?: { holderIdentity?: string } }).spec?.holderIdentity;
    };
    // The chart's arguments for the metrics listener and the Lease (templates/operator-deployment.yaml).
    // Port 0: the operator says the port it bound on its 'serving probes and metrics' line.
    const operatorCommand = (extra: readonly string[] = []): string[] => [
      '/usr/local/bin/node',
      'operator/src/main.ts',
      ...extra,
      '--metrics-host=127.0.0.1',
      '--metrics-port=0',
      '--leader-elect=true',
      `--lease-namespace=${RELEASE_NS}`,
      '--lease-name=cacheroute-operator',
      `--gateway-keys-secret=${RELEASE_NS}/${KEYS_SECRET}`,
    ];
    // What the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount: a token, the CA, the namespace.
    const serviceAccountDir = (component: string, token: string): string => {
      const dir = join(mountDir, `${component}-serviceaccount`);
      mkdirSync(dir, { mode: 0o755 });
      writeFileSync(join(dir, 'token'), token.trim(), { mode: 0o444 });
      copyFileSync(pkiPaths(join(cp.dir, 'pki')).servingCa.cert, join(dir, 'ca.crt'));
      chmodSync(join(dir, 'ca.crt'), 0o444);
      writeFileSync(join(dir, 'namespace'), RELEASE_NS, { mode: 0o444 });
      return dir;
    };
    // A token from the TokenRequest API for the chart's ServiceAccount of a component, as the kubelet projects one.
    const chartToken = async (component: 'operator' | 'gateway'): Promise<string> => {
      const sa = (
        await kubectlOk(
          ['-n', RELEASE_NS, 'get', 'sa', '-l', `app.kubernetes.io/component=${component}`, '-o', 'name'],
          { kubeconfig: cp.kubeconfig },
        )
      )
        .trim()
        .replace(/^serviceaccount\//, '');
      return kubectlOk(['-n', RELEASE_NS, 'create', 'token', sa, '--duration=1h'], {
        kubeconfig: cp.kubeconfig,
      });
    };
    const inClusterEnv = (): Record<string, string> => ({
      KUBERNETES_SERVICE_HOST: '127.0.0.1',
      KUBERNETES_SERVICE_PORT: new URL(cp.server).port,
    });
    let first: RunningContainer | undefined;
    let firstHolder: string | undefined;

    it('reaches the control plane with the chart RBAC identity in a mounted kubeconfig and reconciles a Deployment to Ready', async () => {
      const identity = await createChartIdentity(cp, {
        release: RELEASE,
        namespace: RELEASE_NS,
        component: 'operator',
      });
      const kubeconfig = join(mountDir, 'operator.kubeconfig');
      copyFileSync(identity, kubeconfig);
      chmodSync(kubeconfig, 0o444);
      const securityContext = await chartSecurityContext('operator');
      const started = await runUntilAnswering(
        'operator',
        {
          name: 'operator',
          command: operatorCommand(['--kubeconfig=/etc/cacheroute/kubeconfig']),
          securityContext,
          mounts: [{ source: kubeconfig, destination: '/etc/cacheroute/kubeconfig' }],
        },
        (p) => `http://127.0.0.1:${p['port']}/readyz`,
        portsSaidIn(OPERATOR_LISTENING),
      );
      const operator = started.container;
      const port = started.ports['port'];
      first = operator;
      expect(uidsOf(operator.pid)).toEqual(Array(4).fill(securityContext.runAsUser));
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);

      await kubectlOk(['-n', NS, 'apply', '-f', '-'], {
        kubeconfig: cp.kubeconfig,
        input: JSON.stringify(buildDeploymentManifest({ name: 'dense', replicas: 1 })),
      });
      const status = await eventually(
        async () => {
          const s = await deploymentStatus('dense');
          expect(s.conditions?.find((c) => c.type === 'Ready')?.status, operator.logTail()).toBe('True');
          return s;
        },
        { timeoutMs: 90_000 },
      );
      expect(status.conditions?.find((c) => c.type === 'IdentityVerified')).toMatchObject({
        status: 'True',
        reason: 'Verified',
      });
      expect(status.routable).toMatchObject({ value: true });
      expect(status.endpoints).toHaveLength(1);
      // The leader's Lease, written through the chart's Role in the release namespace.
      firstHolder = await leaseHolder();
      expect(firstHolder).toEqual(expect.any(String));
    });

    it('runs as the chart runs it, in-cluster: a ServiceAccount token and CA mounted where a pod has them, no kubeconfig', async () => {
      // The chart's operator ServiceAccount, applied with its RBAC by the test above.
      const token = await chartToken('operator');
      const saDir = serviceAccountDir('operator', token);

      // The kubeconfig operator goes; this one takes over its Lease and its work.
      await first?.stop();
      const { container: operator } = await runUntilAnswering(
        'operator',
        {
          name: 'operator-in-cluster',
          command: operatorCommand(),
          securityContext: await chartSecurityContext('operator'),
          env: inClusterEnv(),
          mounts: [{ source: saDir, destination: '/var/run/secrets/kubernetes.io/serviceaccount' }],
        },
        (p) => `http://127.0.0.1:${p['port']}/readyz`,
        portsSaidIn(OPERATOR_LISTENING),
        'operator (in-cluster)',
      );
      await kubectlOk(['-n', NS, 'patch', 'sgd', 'dense', '--type=merge', '-p', '{"spec":{"replicas":2}}'], {
        kubeconfig: cp.kubeconfig,
      });
      await eventually(
        async () => {
          expect(await leaseHolder()).not.toBe(firstHolder);
          const s = await deploymentStatus('dense');
          expect(
            s.endpoints?.filter((e) => e.verified),
            operator.logTail(),
          ).toHaveLength(2);
          expect(s.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
        },
        { timeoutMs: 120_000 },
      );
    });

    it('with the gateway image, in-cluster as the chart runs it, serves a chat completion from the Deployment the operator image verified', async () => {
      // The chart's gateway RBAC and ServiceAccount.
      await createChartIdentity(cp, { release: RELEASE, namespace: RELEASE_NS, component: 'gateway' });
      const saDir = serviceAccountDir('gateway', await chartToken('gateway'));
      const securityContext = await chartSecurityContext('gateway');
      const started = await runUntilAnswering(
        'gateway',
        {
          name: 'gateway-in-cluster',
          // The chart's arguments (templates/gateway-deployment.yaml) but --peers-service,
          // which needs the chart's Service and its EndpointSlices.
          command: [
            '/usr/local/bin/node',
            ...gatewayNodeFlags(),
            'gateway/src/server.ts',
            '--host=127.0.0.1',
            '--port=0',
            '--admin-port=0',
            '--auth=open',
            `--keys-secret=${RELEASE_NS}/${KEYS_SECRET}`,
          ],
          securityContext,
          env: { ...inClusterEnv(), POD_NAME: 'gateway-in-cluster', POD_NAMESPACE: RELEASE_NS },
          mounts: [{ source: saDir, destination: '/var/run/secrets/kubernetes.io/serviceaccount' }],
        },
        (p) => `http://127.0.0.1:${p['adminPort']}/readyz`,
        portsSaidIn('listening'),
        'gateway (in-cluster)',
      );
      const gateway = started.container;
      const port = started.ports['port'];
      const res = await eventually(
        async () => {
          const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              model: 'llama-8b',
              messages: [{ role: 'user', content: 'Hello from the images' }],
              max_tokens: 4,
            }),
          });
          const body = await r.text();
          expect(r.status, `${body}\n${gateway.logTail()}`).toBe(200);
          return { headers: r.headers, body: JSON.parse(body) as { usage?: { completion_tokens: number } } };
        },
        { timeoutMs: 60_000 },
      );
      expect(res.body.usage?.completion_tokens).toBe(4);
      // Routed by discovery to one of the Deployment's pods, the simulators on their IPs.
      expect(res.headers.get('x-cacheroute-endpoint')).toMatch(new RegExp(`^${NS}/dense-sglang-`));
    });
  });
});
