// The operator is no way around Pod Security (issue 30), against the real API server and its
// PodSecurity admission (on by default):
//   - every pod the operator would make for each example (the SGLang pods of its workloads and
//     LeaderWorkerSet groups, the fetch and verify Jobs' pods) is admitted in a namespace enforcing
//     `baseline`, except what the sample itself declares that baseline forbids: a hostPath source
//     (the files staged on the node) and IPC_LOCK for an RDMA transfer backend. Node caches
//     (download.cache Node) mount the operator's own node directory: forbidden by baseline too,
//     and nothing else is. Each pod is created with a server-side dry run, so admission runs and
//     nothing is stored.
//   - a hostPath source outside the operator's --host-path-roots gets no workload at all: the
//     Deployment says Progressing=False HostPathNotAllowed, naming the flag, with an event.
import type { V1Job, V1PodTemplateSpec } from '@kubernetes/client-node';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { join } from 'node:path';
import { validateResource, type DeploymentResource } from '#api';
import { buildDesired } from '../../../operator/src/controllers/deployment/desired.ts';
import {
  computeModelCacheKey,
  computeTokenizerSubpath,
  fetchedSourceOf,
} from '../../../operator/src/controllers/deployment/model-cache/names.ts';
import {
  buildFetchJob,
  buildVerifyJob,
  type ModelCacheConfig,
} from '../../../operator/src/controllers/deployment/model-cache/objects.ts';
import { startControlPlane } from '../../support/controlplane.ts';
import { startTestOperator } from '../../support/operator/start.ts';
import { buildDeploymentManifest } from '../../support/builders.ts';
import { createTestNamespace, eventually, kubectl, kubectlOk, listEvents } from '../../support/kubectl.ts';
import { loadSamples, REPO_ROOT, type Manifest } from '../../support/samples.ts';

const kubeconfig = inject('kubeconfig');
const CACHE: ModelCacheConfig = { fetchImage: 'cacheroute/operator:test', size: '1Gi' };
const UID = '00000000-0000-0000-0000-000000000001';

beforeAll(async () => {
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], { kubeconfig });
});

/** A namespace whose pods must pass Pod Security `baseline`. */
async function baselineNamespace(): Promise<string> {
  const ns = await createTestNamespace(kubeconfig, 'pss');
  await kubectlOk(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=baseline'], { kubeconfig });
  return ns;
}

interface PodToAdmit {
  what: string;
  template: V1PodTemplateSpec;
}

type Workload = { kind?: string; metadata?: { name?: string }; spec?: Record<string, unknown> };

/** Every pod template the operator would apply for one Deployment, with model caches on. */
function podsOf(root: DeploymentResource): PodToAdmit[] {
  const desired = buildDesired(root, { modelCache: CACHE });
  const pods: PodToAdmit[] = [];
  for (const w of desired.workloads as unknown as Workload[])
    pods.push({
      what: `Deployment ${w.metadata?.name}`,
      template: w.spec?.['template'] as V1PodTemplateSpec,
    });
  for (const g of desired.groupSets as unknown as Workload[]) {
    const t = g.spec?.['leaderWorkerTemplate'] as {
      leaderTemplate: V1PodTemplateSpec;
      workerTemplate: V1PodTemplateSpec;
    };
    pods.push({ what: `LeaderWorkerSet ${g.metadata?.name} leader`, template: t.leaderTemplate });
    pods.push({ what: `LeaderWorkerSet ${g.metadata?.name} worker`, template: t.workerTemplate });
  }
  const { spec } = root;
  const namespace = root.metadata.namespace ?? '';
  const t = computeTokenizerSubpath(spec);
  const tokenizerSubpath = t.ok ? t.subpath : undefined;
  const jobs: V1Job[] = [];
  if (fetchedSourceOf(spec)?.cache !== 'Node' && fetchedSourceOf(spec)) {
    const key = computeModelCacheKey(spec);
    jobs.push(
      buildFetchJob({
        namespace,
        key,
        spec,
        tokenizerSubpath,
        config: CACHE,
        cache: { name: `model-${key}`, uid: UID },
      }),
    );
  }
  if (spec.model.source.pvc)
    jobs.push(
      buildVerifyJob({
        namespace,
        key: 'k',
        name: 'model-verify',
        spec,
        tokenizerSubpath,
        config: CACHE,
        deployment: { name: root.metadata.name ?? '', uid: UID },
      }),
    );
  for (const j of jobs)
    pods.push({ what: `Job ${j.metadata?.name}`, template: j.spec?.template as V1PodTemplateSpec });
  return pods;
}

function podManifest(ns: string, pod: PodToAdmit): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'admission-check', namespace: ns, labels: pod.template.metadata?.labels ?? {} },
    spec: pod.template.spec,
  };
}

/** What Pod Security says of one pod: undefined when admitted, else its list of violations. */
async function admit(ns: string, pod: PodToAdmit): Promise<string | undefined> {
  const r = await kubectl(['create', '--dry-run=server', '-n', ns, '-f', '-'], {
    kubeconfig,
    input: JSON.stringify(podManifest(ns, pod)),
  });
  if (r.code === 0) return undefined;
  const violation = /violates PodSecurity "baseline:latest": (.*)$/m.exec(r.stderr);
  if (!violation) throw new Error(`${pod.what}: refused for another reason than Pod Security: ${r.stderr}`);
  return violation[1];
}

function parseSample(doc: Manifest, ns: string): DeploymentResource {
  const parsed = validateResource({ ...doc, metadata: { ...doc.metadata, namespace: ns, uid: UID } });
  if (!parsed.ok || parsed.value.kind !== 'Deployment')
    throw new Error(`${doc.metadata.name}: not a valid Deployment`);
  return parsed.value;
}

describe('Pod Security baseline', () => {
  it('admits every pod of every example, but for what the sample itself declares', async () => {
    const ns = await baselineNamespace();
    const samples = loadSamples().filter((s) => s.doc.kind === 'Deployment');
    expect(samples.map((s) => s.file)).toContain('deployment-pd-hisparse.yaml');
    const verdicts: Record<string, string | undefined> = {};
    for (const { file, doc } of samples)
      for (const pod of podsOf(parseSample(doc, ns))) verdicts[`${file}: ${pod.what}`] = await admit(ns, pod);

    // The prefill/decode sample stages its files on the nodes (hostPath) and transfers the KV
    // cache over RDMA (mooncake: IPC_LOCK): both are in its spec, and the docs name the level.
    // Verified on each node (the operator has a fetch image): the node's record is a hostPath too.
    const declared =
      'non-default capabilities (container "sglang" must not include "IPC_LOCK" in securityContext.capabilities.add), hostPath volumes (volumes "model", "verify-state")';
    expect(verdicts).toEqual(
      Object.fromEntries(
        Object.keys(verdicts).map((k) => [
          k,
          k.startsWith('deployment-pd-hisparse.yaml') ? declared : undefined,
        ]),
      ),
    );
  });

  it('mounts no ServiceAccount token into any pod: SGLang and the fetcher never call the API', async () => {
    // The suite's plane runs without the ServiceAccount admission plugin (what adds the token
    // volume); one with it, for this test only. Nothing enforced: only what admission adds.
    const plane = await startControlPlane({ serviceAccountAdmission: true });
    try {
      const opts = { kubeconfig: plane.kubeconfig };
      const ns = 'sa-token';
      await kubectlOk(['create', 'namespace', ns], opts);
      await kubectlOk(['create', 'serviceaccount', 'default', '-n', ns], opts);
      const mounted: Record<string, string[]> = {};
      for (const { file, doc } of loadSamples().filter((s) => s.doc.kind === 'Deployment'))
        for (const pod of podsOf(parseSample(doc, ns))) {
          const r = await kubectlOk(['create', '--dry-run=server', '-o', 'json', '-n', ns, '-f', '-'], {
            ...opts,
            input: JSON.stringify(podManifest(ns, pod)),
          });
          const created = JSON.parse(r) as { spec?: { volumes?: { name: string }[] } };
          mounted[`${file}: ${pod.what}`] = (created.spec?.volumes ?? [])
            .map((v) => v.name)
            .filter((n) => n.startsWith('kube-api-access'));
        }
      expect(Object.keys(mounted).length).toBeGreaterThan(5);
      expect(mounted).toEqual(Object.fromEntries(Object.keys(mounted).map((k) => [k, []])));
    } finally {
      await plane.stop();
    }
  });

  it('a node cache mounts only the operator’s own node directory, which baseline forbids', async () => {
    const ns = await baselineNamespace();
    const doc = loadSamples().find((s) => s.file === 'deployment-hicache.yaml')?.doc;
    if (!doc) throw new Error('no deployment-hicache.yaml');
    const download = (doc.spec['model'] as { source: { download: Record<string, unknown> } }).source.download;
    download['cache'] = 'Node';
    delete download['sizeLimit'];
    const pods = podsOf(parseSample(doc, ns));
    expect(pods.map((p) => p.what)).toEqual(['Deployment qwen-32b-sglang']);
    const volumes = pods[0]?.template.spec?.volumes?.flatMap((v) => (v.hostPath ? [v.hostPath.path] : []));
    expect(volumes?.every((p) => p.startsWith('/var/lib/cacheroute/models/'))).toBe(true);
    expect(await admit(ns, pods[0] as PodToAdmit)).toBe('hostPath volumes (volume "model")');
  });
});

describe('hostPath sources and --host-path-roots', () => {
  it('a hostPath outside the roots gets no workload, and the Deployment says which flag', async () => {
    const ns = await createTestNamespace(kubeconfig, 'hproot');
    await startTestOperator(kubeconfig, [ns]);
    const apply = (name: string, path: string) => {
      const m = buildDeploymentManifest({ name, replicas: 1 });
      (m.spec['model'] as { source: unknown }).source = { hostPath: { path, verify: false } };
      return kubectlOk(['apply', '-n', ns, '-f', '-'], { kubeconfig, input: JSON.stringify(m) });
    };
    await apply('node-root', '/');
    await apply('staged', '/var/lib/cacheroute/models/staged/llama');

    // Under the default root (the node cache root): its workload is made.
    await eventually(() => kubectlOk(['get', 'deployment.apps', 'staged-sglang', '-n', ns], { kubeconfig }));
    const progressing = await eventually(async () => {
      const d = JSON.parse(
        await kubectlOk(['get', 'sgd', 'node-root', '-n', ns, '-o', 'json'], { kubeconfig }),
      ) as { status?: { conditions?: { type: string; status: string; reason: string; message: string }[] } };
      const c = d.status?.conditions?.find((x) => x.type === 'Progressing');
      expect(c?.reason).toBe('HostPathNotAllowed');
      return c;
    });
    expect(progressing?.status).toBe('False');
    expect(progressing?.message).toContain('--host-path-roots: /var/lib/cacheroute/models');
    const events = await eventually(async () => {
      const e = await listEvents(kubeconfig, ns, 'node-root');
      expect(e.map((x) => x.reason)).toContain('HostPathNotAllowed');
      return e;
    });
    expect(events.find((x) => x.reason === 'HostPathNotAllowed')?.note).toContain('--host-path-roots');
    // Nothing that could run a pod: no workload, no key Secret, no Job.
    for (const kind of ['deployment.apps', 'jobs'])
      expect(await kubectlOk(['get', kind, '-n', ns, '-o', 'name'], { kubeconfig })).not.toContain(
        'node-root',
      );
  });
});
