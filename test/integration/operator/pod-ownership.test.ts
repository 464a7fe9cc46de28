// A runtime is recognised by ownership, not by its labels (issue 30), against the real API
// server: the operator sends the runtime API key only to a pod whose controller chain leads, uid
// by uid, to its Deployment (pod -> ReplicaSet -> the apps/v1 Deployment it applied -> the
// cacheroute Deployment). An impostor pod that copies the labels (anyone who may create pods in
// the namespace) is listed in status as NotOwned, is never verified and never sees the key.
// There is no kube-controller-manager here: the ReplicaSet and the pods are made by hand, and
// each pod's "runtime" is a small HTTP server on its pod IP (hack/in-netns.sh routes the pod
// CIDR to this namespace's loopback) recording the Authorization header of every request.
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { SGLANG_PORT } from '../../../operator/src/controllers/deployment/args.ts';
import { startTestOperator } from '../../support/operator/start.ts';
import { buildDeploymentManifest } from '../../support/builders.ts';
import { createTestNamespace, eventually, kubectlOk, listEvents } from '../../support/kubectl.ts';
import { REPO_ROOT } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');
// Pod IPs of this file only, in the pod CIDR (the runtimes listen on SGLang's port there).
const OWNED_IP = '10.244.251.1';
const IMPOSTOR_IP = '10.244.251.2';
const FORGED_IP = '10.244.251.3';

beforeAll(async () => {
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], { kubeconfig });
});

/** A stand-in runtime on `ip`: records each request's path and Authorization, answers 503. */
async function startRecorder(ip: string): Promise<{ seen: { path: string; authorization: string }[] }> {
  const seen: { path: string; authorization: string }[] = [];
  const server: Server = createServer((req, res) => {
    seen.push({ path: req.url ?? '', authorization: req.headers.authorization ?? '' });
    res.writeHead(503).end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(SGLANG_PORT, ip, resolve);
  });
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { seen };
}

type Obj = { metadata: { uid: string; labels?: Record<string, string> }; spec: Record<string, unknown> };

async function getJson<T>(ns: string, args: string[]): Promise<T> {
  return JSON.parse(await kubectlOk(['get', ...args, '-n', ns, '-o', 'json'], { kubeconfig })) as T;
}

async function create(ns: string, manifest: object): Promise<Obj> {
  const out = await kubectlOk(['create', '-n', ns, '-o', 'json', '-f', '-'], {
    kubeconfig,
    input: JSON.stringify(manifest),
  });
  return JSON.parse(out) as Obj;
}

/** What a kubelet would report for a running, Ready pod on `ip`. */
async function markRunning(ns: string, name: string, ip: string): Promise<void> {
  const status = {
    phase: 'Running',
    podIP: ip,
    podIPs: [{ ip }],
    conditions: [{ type: 'Ready', status: 'True' }],
    containerStatuses: [
      { name: 'sglang', ready: true, restartCount: 0, image: 'sglang', imageID: '', state: { running: {} } },
    ],
  };
  await kubectlOk(
    [
      'patch',
      'pod',
      name,
      '-n',
      ns,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status }),
    ],
    { kubeconfig },
  );
}

interface EndpointView {
  pod: string;
  verified: boolean;
  reason?: string;
  message?: string;
}

describe('runtime pods by ownership', () => {
  it('the key goes to a pod of its own ReplicaSet, never to an impostor with the labels', async () => {
    const ns = await createTestNamespace(kubeconfig, 'owner');
    await startTestOperator(kubeconfig, [ns]);
    const owned = await startRecorder(OWNED_IP);
    const impostor = await startRecorder(IMPOSTOR_IP);
    const forged = await startRecorder(FORGED_IP);
    await kubectlOk(['apply', '-n', ns, '-f', '-'], {
      kubeconfig,
      input: JSON.stringify(buildDeploymentManifest({ name: 'llama-8b', replicas: 1 })),
    });
    const workload = await eventually(() => getJson<Obj>(ns, ['deployment.apps', 'llama-8b-sglang']));
    const template = workload.spec['template'] as {
      metadata: { labels: Record<string, string> };
      spec: unknown;
    };
    const fingerprint = template.metadata.labels['cacheroute.dev/fingerprint'] ?? '';
    const key = await eventually(async () => {
      const s = await getJson<{ data?: Record<string, string> }>(ns, ['secret', 'llama-8b-runtime-api-key']);
      const k = s.data?.[fingerprint];
      expect(k).toBeDefined();
      return Buffer.from(k ?? '', 'base64').toString('utf8');
    });

    // What the ReplicaSet controller would make: a ReplicaSet of the workload, and its pod.
    const replicaSet = await create(ns, {
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      metadata: {
        name: 'llama-8b-sglang-5d8f',
        labels: template.metadata.labels,
        ownerReferences: [
          {
            apiVersion: 'apps/v1',
            kind: 'Deployment',
            name: 'llama-8b-sglang',
            uid: workload.metadata.uid,
            controller: true,
          },
        ],
      },
      spec: { replicas: 1, selector: workload.spec['selector'], template },
    });
    const pod = (name: string, ownerReferences: object[]) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, labels: template.metadata.labels, ownerReferences },
      spec: { containers: [{ name: 'sglang', image: 'sglang' }] },
    });
    await create(
      ns,
      pod('llama-8b-sglang-5d8f-a', [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: 'llama-8b-sglang-5d8f',
          uid: replicaSet.metadata.uid,
          controller: true,
        },
      ]),
    );
    // Impostors: the same labels and no owner; or one naming the ReplicaSet by name with a made-up uid.
    await create(ns, pod('llama-8b-sglang-impostor', []));
    await create(
      ns,
      pod('llama-8b-sglang-forged', [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: 'llama-8b-sglang-5d8f',
          uid: '00000000-0000-0000-0000-00000000f00d',
          controller: true,
        },
      ]),
    );
    await markRunning(ns, 'llama-8b-sglang-5d8f-a', OWNED_IP);
    await markRunning(ns, 'llama-8b-sglang-impostor', IMPOSTOR_IP);
    await markRunning(ns, 'llama-8b-sglang-forged', FORGED_IP);

    // The operator reads the owned pod's runtime with the key (it answers 503: not verified)...
    await eventually(() => expect(owned.seen.map((r) => r.authorization)).toContain(`Bearer ${key}`));
    // ...and lists the impostor as not its own, with the reason.
    const endpoints = await eventually(async () => {
      const d = await getJson<{ status?: { endpoints?: EndpointView[] } }>(ns, ['sgd', 'llama-8b']);
      const found = d.status?.endpoints ?? [];
      expect(found.map((e) => e.pod).sort()).toEqual([
        'llama-8b-sglang-5d8f-a',
        'llama-8b-sglang-forged',
        'llama-8b-sglang-impostor',
      ]);
      expect(found.find((e) => e.pod === 'llama-8b-sglang-impostor')?.reason).toBe('NotOwned');
      expect(found.find((e) => e.pod === 'llama-8b-sglang-forged')?.reason).toBe('NotOwned');
      return found;
    });
    const listed = endpoints.find((e) => e.pod === 'llama-8b-sglang-impostor');
    expect(listed).toMatchObject({ verified: false, reason: 'NotOwned' });
    expect(listed?.message).toContain('Pod llama-8b-sglang-impostor has no controller');
    expect(endpoints.find((e) => e.pod === 'llama-8b-sglang-forged')).toMatchObject({
      verified: false,
      message: expect.stringContaining('that ReplicaSet has another uid'),
    });
    expect(endpoints.find((e) => e.pod === 'llama-8b-sglang-5d8f-a')?.reason).toBe('VerificationFailed');
    // A Warning for each, naming the pod.
    await eventually(async () => {
      const notes = (await listEvents(kubeconfig, ns, 'llama-8b'))
        .filter((x) => x.reason === 'PodNotOwned')
        .map((x) => x.note ?? '');
      expect(notes.some((n) => n.startsWith('pod llama-8b-sglang-impostor:'))).toBe(true);
      expect(notes.some((n) => n.startsWith('pod llama-8b-sglang-forged:'))).toBe(true);
    });
    // Status was written after the impostor was seen, so its pass is done: it was never asked.
    expect(impostor.seen).toEqual([]);
    expect(forged.seen).toEqual([]);
  });
});
