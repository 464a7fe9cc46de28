// Model delivery on the full control plane (issue 16, ADR 0016): a download source is fetched
// once into a shared cache by a Job the operator owns, verified against the pinned digests, and
// mounted read-only by every replica of every Deployment that pins those files; restarts and
// scale-ups fetch nothing; a tampered file stops the Deployment before SGLang starts.
// Real parts: the kube-apiserver, etcd, controller-manager (Job, garbage collector, the
// PersistentVolume binder and the claim protection), the scheduler and KWOK; the fetch Job's pod runs the operator's
// fetcher for real (fetch-runner.ts: its container command as a process, the cache volume
// mapped to the PersistentVolume's hostPath), against a fake hub over HTTP (fake-hub.ts) or a real
// S3 server (versitygw, object-store.ts) for an objectStore source. KWOK's
// pod-complete stage is kept off these pods (kwok-stages.ts): a Job completes only when its
// fetcher exits. There is no volume provisioner here: the test makes hostPath
// PersistentVolumes (ReadWriteMany, a no-provisioner class, Immediate binding) and the binder
// binds the operator's claim to one. Simulators start only on a model directory that holds
// the fetcher's marker (sim-kubelet canStart), as SGLang would fail on missing files.
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Condition, DeploymentStatus } from '#api';
import type { PodObject } from '../../operator/src/controllers/deployment/meta/pod-view.ts';
import { LABEL_DEPLOYMENT } from '../../operator/src/controllers/deployment/meta/labels.ts';
import { MARKER_FILE } from '../../fetcher/src/fetch-marker.ts';
import { manifestOfDirectory } from '../../fetcher/src/files.ts';
import { digestOfManifest, isTokenizerFile } from '../../fetcher/src/manifest.ts';
import { buildDeploymentManifest } from '../support/builders.ts';
import { DEFAULT_CONTROLLERS } from '../support/components.ts';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.ts';
import { startFakeHub, type FakeHub } from '../support/fake-hub.ts';
import { startFetchRunner, type FetchRunner } from '../support/fetch-runner.ts';
import { startObjectStore, type RunningObjectStore } from '../support/object-store.ts';
import { eventually, kubectl } from '../support/kubectl.ts';

const NS = 'e2e-model-delivery';
const REPO = 'acme/tiny-llm';
const REVISION = '0123456789abcdef0123456789abcdef01234567';
const TOKEN = 'hf_CANARY_model_delivery_e2e_7d2c';
const CLASS = 'cacheroute-models';
const WEIGHTS = 'model.safetensors';
// Large enough to stream in many chunks and to report progress on the way.
const WEIGHTS_BYTES = 6 * 1024 * 1024;

interface Model {
  dir: string;
  digest: string;
  tokenizerDigest: string;
  bytes: number;
}

const root = mkdtempSync(join(tmpdir(), 'model-delivery-'));
let stack: E2eStack;
let runner: FetchRunner;
let hubA: FakeHub;
let hubB: FakeHub;
let hubC: FakeHub;
let modelA: Model;
let modelB: Model;
let modelC: Model;
let modelD: Model;
let store: RunningObjectStore;
const operatorLog: string[] = [];

async function generateModel(name: string): Promise<Model> {
  const dir = join(root, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ hidden_size: 64, name }));
  writeFileSync(join(dir, 'tokenizer.json'), '{"model":{"type":"BPE"}}');
  writeFileSync(join(dir, 'tokenizer_config.json'), '{"model_max_length":4096}');
  writeFileSync(join(dir, WEIGHTS), randomBytes(WEIGHTS_BYTES));
  const manifest = await manifestOfDirectory(dir);
  return {
    dir,
    digest: digestOfManifest(manifest),
    tokenizerDigest: digestOfManifest(await manifestOfDirectory(dir, { select: isTokenizerFile })),
    bytes: manifest.files.reduce((n, f) => n + f.size, 0),
  };
}

const startHub = (model: Model): Promise<FakeHub> =>
  startFakeHub({
    modelDir: model.dir,
    repo: REPO,
    revision: REVISION,
    isLfs: (p) => p.endsWith('.safetensors'),
    token: TOKEN,
  });

const hostOf = (url: string): string => new URL(url).hostname;

const STAGED_CLAIM = 'staged-models';
const STAGED_SUBPATH = 'llm';

/** A Deployment whose files someone staged on a claim (a pvc source), pinned to `model`'s digests. */
function stagedManifest(name: string, replicas: number, model: Model) {
  const m = buildDeploymentManifest({ name, replicas, gpus: 1 });
  m.spec['deploymentId'] = `${name}-r1`;
  Object.assign(m.spec['model'] as Record<string, unknown>, {
    path: REPO,
    servedName: name,
    digest: model.digest,
    tokenizerDigest: model.tokenizerDigest,
    source: { pvc: { claimName: STAGED_CLAIM, subPath: STAGED_SUBPATH } },
  });
  m.spec['scheduling'] = {
    tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
  };
  return m;
}

function downloadManifest(name: string, replicas: number, model: Model, hub: FakeHub) {
  const m = buildDeploymentManifest({ name, replicas, gpus: 1 });
  m.spec['deploymentId'] = `${name}-r1`;
  const spec = m.spec['model'] as Record<string, unknown>;
  Object.assign(spec, {
    path: REPO,
    servedName: name,
    revision: REVISION,
    digest: model.digest,
    tokenizerDigest: model.tokenizerDigest,
    source: {
      download: { tokenSecretRef: { name: 'hf-token', key: 'token' }, endpoint: hub.url, sizeLimit: '1Gi' },
    },
  });
  // The fetch Job runs where the model's pods run, on the GPU nodes: it takes their tolerations.
  m.spec['scheduling'] = {
    tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
  };
  return m;
}

const getJson = async <T>(args: string[]): Promise<T> =>
  JSON.parse(await stack.k([...args, '-o', 'json'])) as T;
const condition = (s: DeploymentStatus, type: string): Condition | undefined =>
  s.conditions?.find((c) => c.type === type);

interface PvcView {
  metadata: {
    uid: string;
    ownerReferences?: { uid: string; controller?: boolean }[];
    annotations?: Record<string, string>;
  };
  spec: { volumeName?: string };
}

/** The local directory a pod's model volume holds: the bound PersistentVolume's hostPath and the mount's subPath. */
async function modelDirOf(pod: PodObject): Promise<string | undefined> {
  const claim = pod.spec?.volumes?.find((v) => v.name === 'model')?.persistentVolumeClaim?.claimName;
  if (!claim) return undefined;
  const pvc = await getJson<PvcView>(['get', 'pvc', claim]);
  if (!pvc.spec.volumeName) return undefined;
  const pv = await getJson<{ spec: { hostPath: { path: string } } }>(['get', 'pv', pvc.spec.volumeName]);
  const mount = pod.spec?.containers[0]?.volumeMounts?.find((m) => m.name === 'model');
  return join(pv.spec.hostPath.path, mount?.subPath ?? '');
}

/** A copy of a model's files where a claim's subPath finds them; the PersistentVolume's directory. */
function stageFiles(model: Model): string {
  const pvDir = join(root, 'pv-staged');
  cpSync(model.dir, join(pvDir, STAGED_SUBPATH), { recursive: true });
  return pvDir;
}

async function makeVolumes(): Promise<void> {
  const objects: object[] = [
    {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: CLASS },
      provisioner: 'kubernetes.io/no-provisioner',
      volumeBindingMode: 'Immediate',
    },
    ...[0, 1, 2, 3, 4].map((i) => {
      const path = join(root, `pv-${i}`);
      mkdirSync(path);
      return {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: `${NS}-pv-${i}` },
        spec: {
          capacity: { storage: '1Gi' },
          accessModes: ['ReadWriteMany'],
          storageClassName: CLASS,
          persistentVolumeReclaimPolicy: 'Retain',
          hostPath: { path, type: 'Directory' },
        },
      };
    }),
    // Model A's files staged by someone else, under a subPath of a claim of their own.
    {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: `${NS}-pv-staged` },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteMany'],
        storageClassName: CLASS,
        persistentVolumeReclaimPolicy: 'Retain',
        hostPath: { path: stageFiles(modelA), type: 'Directory' },
        claimRef: { namespace: NS, name: STAGED_CLAIM },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: STAGED_CLAIM },
      spec: {
        accessModes: ['ReadWriteMany'],
        storageClassName: CLASS,
        volumeName: `${NS}-pv-staged`,
        resources: { requests: { storage: '1Gi' } },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'hf-token' },
      type: 'Opaque',
      stringData: { token: TOKEN },
    },
  ];
  for (const o of objects) await stack.k(['apply', '-f', '-'], JSON.stringify(o));
}

beforeAll(async () => {
  modelA = await generateModel('model-a');
  modelB = await generateModel('model-b');
  modelC = await generateModel('model-c');
  modelD = await generateModel('model-d');
  store = await startObjectStore();
  await store.createBucket('models');
  await store.putDirectory('models', 'tiny-llm/', modelD.dir);
  hubA = await startHub(modelA);
  hubB = await startHub(modelB);
  hubC = await startHub(modelC);
  stack = await startE2eStack(NS, {
    controllers: [...DEFAULT_CONTROLLERS, 'persistentvolume-binder', 'pvc-protection'],
    kubelet: {
      canStart: async (pod) => {
        // A download's cache holds the fetcher's marker once fetched; a staged claim has no marker.
        const claim = pod.spec?.volumes?.find((v) => v.name === 'model')?.persistentVolumeClaim?.claimName;
        if (!claim?.startsWith('model-')) return true;
        const dir = await modelDirOf(pod);
        return dir !== undefined && existsSync(join(dir, MARKER_FILE));
      },
    },
    operator: {
      modelCache: {
        fetchImage: 'cacheroute/operator:e2e',
        storageClassName: CLASS,
        size: '1Gi',
        progressPeriodMs: 1_000,
        // The fake hubs and the store answer plain HTTP on this machine.
        insecureEndpointHosts: [...new Set([hubA.url, hubB.url, hubC.url, store.endpoint].map(hostOf))],
      },
      logWrite: (line) => void operatorLog.push(line),
    },
  });
  runner = await startFetchRunner({ kubeconfig: stack.cp.kubeconfig });
  await makeVolumes();
});

afterAll(async () => {
  await runner?.stop();
  await stack?.stop();
  await Promise.all([hubA?.close(), hubB?.close(), hubC?.close(), store?.stop()]);
  rmSync(root, { recursive: true, force: true });
});

const runsOf = (cache: string) =>
  runner.runs.filter((r) => r.pod.startsWith(`model-fetch-${cache.slice('model-'.length)}`));

describe('model-delivery', () => {
  let cacheA = '';

  it('fetches once into a shared cache, verified, before any replica starts; two replicas mount it read-only', async () => {
    await stack.k(['apply', '-f', '-'], JSON.stringify(downloadManifest('alpha', 2, modelA, hubA)));
    const s = await eventually(
      async () => {
        const s = await stack.status('alpha');
        expect(s.verifiedReplicas).toBe(2);
        expect(condition(s, 'Ready')?.status).toBe('True');
        return s;
      },
      { timeoutMs: 120_000 },
    );
    expect(condition(s, 'ModelReady')).toMatchObject({ status: 'True', reason: 'Verified' });
    expect(s.model).toMatchObject({
      phase: 'Verified',
      files: 3 + 1,
      bytesTotal: modelA.bytes,
      bytesDone: modelA.bytes,
      progress: 1,
      digest: modelA.digest,
      tokenizerDigest: modelA.tokenizerDigest,
    });
    cacheA = s.model?.cache ?? '';
    // One fetch, for real: the process ran, exited 0, and the CDN served the weights once.
    expect(runsOf(cacheA).map((r) => r.exitCode)).toEqual([0]);
    expect(hubA.bytesOf(WEIGHTS)).toBe(WEIGHTS_BYTES);
    // The cache carries the verdict and every user as an owner, none the controller.
    const pvc = await getJson<PvcView>(['get', 'pvc', cacheA]);
    const alpha = await getJson<{ metadata: { uid: string } }>(['get', 'sgd', 'alpha']);
    expect(pvc.metadata.ownerReferences).toEqual([expect.objectContaining({ uid: alpha.metadata.uid })]);
    expect(pvc.metadata.ownerReferences?.[0]?.controller).toBeUndefined();
    expect(JSON.parse(pvc.metadata.annotations?.['cacheroute.dev/model-verified'] ?? '{}')).toMatchObject({
      digest: modelA.digest,
      bytes: modelA.bytes,
    });
    // The workload came after the fetcher ended (timestamps have whole seconds), and mounts the
    // cache read-only.
    const workload = await getJson<{
      metadata: { creationTimestamp: string };
      spec: { template: { spec: { volumes: { name: string; persistentVolumeClaim?: object }[] } } };
    }>(['get', 'deploy', 'alpha-sglang']);
    const ended = runsOf(cacheA)[0]?.endedAt ?? Infinity;
    expect(Date.parse(workload.metadata.creationTimestamp)).toBeGreaterThanOrEqual(
      Math.floor(ended / 1000) * 1000,
    );
    // The Job completed because its fetcher did, never before: no FetchFailed on the way (a Job
    // completed by the fake node without a result would have said so).
    const events = await getJson<{ items: { reason: string; regarding?: { name: string } }[] }>([
      'get',
      'events.events.k8s.io',
    ]);
    expect(events.items.filter((e) => e.regarding?.name === 'alpha').map((e) => e.reason)).not.toContain(
      'FetchFailed',
    );
    expect(events.items.some((e) => e.regarding?.name === 'alpha' && e.reason === 'ModelVerified')).toBe(
      true,
    );
    expect(
      workload.spec.template.spec.volumes.find((v) => v.name === 'model')?.persistentVolumeClaim,
    ).toEqual({
      claimName: cacheA,
      readOnly: true,
    });
    // Both simulators run on the fetched files.
    expect(s.endpoints?.map((e) => stack.kubelet.sims.has(e.pod))).toEqual([true, true]);
  });

  it('shares the cache with a second Deployment of the same digests; a restart and a scale-up fetch nothing', async () => {
    const requests = hubA.requests.length;
    await stack.k(['apply', '-f', '-'], JSON.stringify(downloadManifest('beta', 1, modelA, hubA)));
    const beta = await eventually(
      async () => {
        const s = await stack.status('beta');
        expect(s.verifiedReplicas).toBe(1);
        return s;
      },
      { timeoutMs: 90_000 },
    );
    expect(beta.model?.cache).toBe(cacheA);
    await eventually(async () => {
      const pvc = await getJson<PvcView>(['get', 'pvc', cacheA]);
      expect(pvc.metadata.ownerReferences).toHaveLength(2);
    });

    // A pod restart: the replacement mounts the cache as it is.
    const before = (await stack.status('alpha')).endpoints?.map((e) => e.pod) ?? [];
    await stack.k(['delete', 'pod', before[0] ?? '', '--wait=false']);
    await eventually(
      async () => {
        const s = await stack.status('alpha');
        expect(s.verifiedReplicas).toBe(2);
        expect(s.endpoints?.map((e) => e.pod)).not.toContain(before[0]);
      },
      { timeoutMs: 90_000 },
    );
    // A scale-up.
    await stack.k(['patch', 'sgd', 'alpha', '--type=merge', '-p', '{"spec":{"replicas":3}}']);
    await eventually(async () => expect((await stack.status('alpha')).verifiedReplicas).toBe(3), {
      timeoutMs: 90_000,
    });

    expect(runsOf(cacheA)).toHaveLength(1);
    expect(hubA.requests.length).toBe(requests);
  });

  it('stops on a tampered file: ModelReady=False ModelDigestMismatch, an Event naming it, no SGLang pod', async () => {
    hubB.tamper(WEIGHTS);
    await stack.k(['apply', '-f', '-'], JSON.stringify(downloadManifest('gamma', 2, modelB, hubB)));
    const s = await eventually(
      async () => {
        const s = await stack.status('gamma');
        expect(condition(s, 'ModelReady')).toMatchObject({ status: 'False', reason: 'ModelDigestMismatch' });
        return s;
      },
      { timeoutMs: 90_000 },
    );
    expect(condition(s, 'ModelReady')?.message).toContain(`file ${WEIGHTS}`);
    expect(condition(s, 'Ready')).toMatchObject({ status: 'False', reason: 'ModelNotReady' });
    expect(s.model).toMatchObject({ phase: 'Failed', reason: 'ModelDigestMismatch', path: WEIGHTS });
    await eventually(async () => {
      const events = await getJson<{
        items: { reason: string; note?: string; regarding?: { name: string } }[];
      }>(['get', 'events.events.k8s.io']);
      const e = events.items.find((i) => i.regarding?.name === 'gamma' && i.reason === 'ModelDigestMismatch');
      expect(e?.note).toContain(WEIGHTS);
    });
    // The fetcher ran once and said why (exit 3: a retry would fetch the same; the Job's
    // podFailurePolicy ends it), and nothing of SGLang exists for this Deployment.
    const runs = runsOf(s.model?.cache ?? '');
    expect(runs.map((r) => r.exitCode)).toEqual([3]);
    const workload = await kubectl(['-n', NS, 'get', 'deploy', 'gamma-sglang'], {
      kubeconfig: stack.cp.kubeconfig,
    });
    expect(workload.stderr).toContain('NotFound');
    const pods = await getJson<{ items: unknown[] }>(['get', 'pods', '-l', `${LABEL_DEPLOYMENT}=gamma`]);
    expect(pods.items).toEqual([]);
    expect(s.model?.cache).not.toBe(cacheA);
  });

  it("shows the fetch's progress in status while its Job runs: bytes, a fraction, words", async () => {
    // The CDN holds the weights after half of them until released: a fetch caught mid-way.
    hubC.inject({ server: 'cdn', stallAfter: WEIGHTS_BYTES / 2 });
    await stack.k(['apply', '-f', '-'], JSON.stringify(downloadManifest('epsilon', 1, modelC, hubC)));
    const s = await eventually(
      async () => {
        const s = await stack.status('epsilon');
        expect(s.model).toMatchObject({ phase: 'Fetching', bytesTotal: modelC.bytes });
        expect(s.model?.progress).toBeGreaterThan(0.3);
        return s;
      },
      // Within the fetcher's 60 s body timeout, which would cut the held download.
      { timeoutMs: 45_000 },
    );
    expect(s.model?.progress).toBeLessThan(1);
    expect(s.model?.bytesDone).toBeLessThan(modelC.bytes);
    expect(s.model?.files).toBe(4);
    expect(condition(s, 'ModelReady')).toMatchObject({ status: 'False', reason: 'Fetching' });
    expect(condition(s, 'ModelReady')?.message).toMatch(
      /: weights, \d+% \([\d.]+ MiB of [\d.]+ MiB\), \d of 4 files$/,
    );
    hubC.release();
    const done = await eventually(
      async () => {
        const s = await stack.status('epsilon');
        expect(s.verifiedReplicas).toBe(1);
        return s;
      },
      { timeoutMs: 90_000 },
    );
    expect(done.model).toMatchObject({ phase: 'Verified', progress: 1, bytesDone: modelC.bytes });
    expect(runsOf(done.model?.cache ?? '').map((r) => r.exitCode)).toEqual([0]);
  });

  it('verifies a pvc source by a Job of its own before SGLang starts, once; other digests on it stop', async () => {
    await stack.k(['apply', '-f', '-'], JSON.stringify(stagedManifest('zeta', 1, modelA)));
    const s = await eventually(
      async () => {
        const s = await stack.status('zeta');
        expect(s.verifiedReplicas).toBe(1);
        return s;
      },
      { timeoutMs: 90_000 },
    );
    expect(condition(s, 'ModelReady')).toMatchObject({ status: 'True', reason: 'Verified' });
    expect(condition(s, 'ModelReady')?.message).toContain(
      `in PersistentVolumeClaim ${STAGED_CLAIM} (subPath ${STAGED_SUBPATH}) match ${modelA.digest}`,
    );
    expect(s.model).toMatchObject({
      phase: 'Verified',
      digest: modelA.digest,
      files: 4,
      bytesDone: modelA.bytes,
    });
    const verifyJob = s.model?.job ?? '';
    const runsOfJob = (job: string) => runner.runs.filter((r) => r.pod.startsWith(`${job}-`));
    // The fetcher ran once, fetching nothing: it read the claim's files where the pods read them.
    expect(runsOfJob(verifyJob).map((r) => r.exitCode)).toEqual([0]);
    expect(runsOfJob(verifyJob)[0]?.argv).toContain('--verify-only');
    const job = await getJson<{
      metadata: {
        annotations?: Record<string, string>;
        ownerReferences?: { name: string; controller?: boolean }[];
      };
    }>(['get', 'job', verifyJob]);
    expect(JSON.parse(job.metadata.annotations?.['cacheroute.dev/model-verified'] ?? '{}')).toMatchObject({
      digest: modelA.digest,
    });
    expect(job.metadata.ownerReferences).toEqual([
      expect.objectContaining({ name: 'zeta', controller: true }),
    ]);
    // A scale-up reads the record: no second verification.
    await stack.k(['patch', 'sgd', 'zeta', '--type', 'merge', '-p', '{"spec":{"replicas":2}}']);
    await eventually(async () => expect((await stack.status('zeta')).verifiedReplicas).toBe(2), {
      timeoutMs: 60_000,
    });
    expect(runsOfJob(verifyJob)).toHaveLength(1);

    // The same claim pinned to model B's digests: not what is on it.
    await stack.k(['apply', '-f', '-'], JSON.stringify(stagedManifest('theta', 1, modelB)));
    const bad = await eventually(
      async () => {
        const s = await stack.status('theta');
        expect(condition(s, 'ModelReady')).toMatchObject({ status: 'False', reason: 'ModelDigestMismatch' });
        return s;
      },
      { timeoutMs: 90_000 },
    );
    expect(condition(bad, 'ModelReady')?.message).toContain(`the spec pins ${modelB.digest}`);
    expect(condition(bad, 'ModelReady')?.message).toContain(
      `delete Job ${bad.model?.job ?? ''} to verify again`,
    );
    expect(runsOfJob(bad.model?.job ?? '').map((r) => r.exitCode)).toEqual([3]);
    const pods = await getJson<{ items: unknown[] }>(['get', 'pods', '-l', `${LABEL_DEPLOYMENT}=theta`]);
    expect(pods.items).toEqual([]);
  });

  it('keeps a cache while a Deployment uses it, and deletes it, and its Job, with the last one (or when it moves to a node cache)', async () => {
    const gamma = (await stack.status('gamma')).model?.cache ?? '';
    await stack.k(['delete', 'sgd', 'gamma']);
    await eventually(
      async () => {
        const left = await getJson<{ items: { metadata: { name: string } }[] }>(['get', 'pvc,jobs']);
        expect(left.items.map((o) => o.metadata.name)).not.toContain(gamma);
        expect(left.items.map((o) => o.metadata.name)).not.toContain(
          gamma.replace(/^model-/, 'model-fetch-'),
        );
      },
      { timeoutMs: 60_000 },
    );
    // alpha goes; beta still uses cache A: it stays, owned by beta alone.
    const beta = await getJson<{ metadata: { uid: string } }>(['get', 'sgd', 'beta']);
    await stack.k(['delete', 'sgd', 'alpha']);
    await eventually(
      async () => {
        const pvc = await getJson<PvcView>(['get', 'pvc', cacheA]);
        expect(pvc.metadata.ownerReferences?.map((r) => r.uid)).toEqual([beta.metadata.uid]);
      },
      { timeoutMs: 60_000 },
    );
    // beta moves to a node cache (its pods fetch onto their node): the shared claim has no user left.
    await stack.k([
      'patch',
      'sgd',
      'beta',
      '--type',
      'merge',
      '-p',
      JSON.stringify({ spec: { model: { source: { download: { cache: 'Node', sizeLimit: null } } } } }),
    ]);
    await eventually(
      async () => {
        const left = await getJson<{ items: { metadata: { name: string } }[] }>(['get', 'pvc']);
        expect(left.items.map((o) => o.metadata.name)).not.toContain(cacheA);
      },
      { timeoutMs: 60_000 },
    );
  });

  it.each([
    ['without a revision', undefined, 'model.source.download needs model.revision'],
    ['of a branch', 'main', 'model.revision must be a 40-character commit id'],
  ])('refuses a download %s at apply', async (_what, revision, message) => {
    const m = downloadManifest('delta', 1, modelA, hubA);
    const spec = m.spec['model'] as Record<string, unknown>;
    if (revision === undefined) delete spec['revision'];
    else spec['revision'] = revision;
    const r = await kubectl(['-n', NS, 'apply', '-f', '-'], {
      kubeconfig: stack.cp.kubeconfig,
      input: JSON.stringify(m),
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(message);
  });

  it('fetches an object store prefix with the keys of a Secret: a refused key says so and the next attempt, with the Secret fixed, fetches', async () => {
    const wrong = 'wrong-secret-CANARY-e2e-9b4f';
    const secret = (key: string) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 's3-reader' },
      type: 'Opaque',
      stringData: { AWS_ACCESS_KEY_ID: store.accessKeyId, AWS_SECRET_ACCESS_KEY: key },
    });
    await stack.k(['apply', '-f', '-'], JSON.stringify(secret(wrong)));
    const m = buildDeploymentManifest({ name: 'store', replicas: 1, gpus: 1 });
    m.spec['deploymentId'] = 'store-r1';
    const model = m.spec['model'] as Record<string, unknown>;
    // No hub commit: the digests are the pin.
    delete model['revision'];
    Object.assign(model, {
      path: 'tiny-llm',
      servedName: 'store',
      digest: modelD.digest,
      tokenizerDigest: modelD.tokenizerDigest,
      source: {
        objectStore: {
          url: 's3://models/tiny-llm',
          endpoint: store.endpoint,
          forcePathStyle: true,
          credentialsSecretRef: { name: 's3-reader' },
          sizeLimit: '1Gi',
        },
      },
    });
    m.spec['scheduling'] = {
      tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
    };
    await stack.k(['apply', '-f', '-'], JSON.stringify(m));
    const refused = await eventually(
      async () => {
        const c = condition(await stack.status('store'), 'ModelReady');
        expect(c?.message).toContain('StoreUnauthorized');
        return c;
      },
      { timeoutMs: 60_000 },
    );
    expect(refused).toMatchObject({ status: 'False' });
    expect(refused?.message).toContain('check the credentials');
    // The next attempt (the Job's next pod) reads the Secret again.
    await stack.k(['apply', '-f', '-'], JSON.stringify(secret(store.secretAccessKey)));
    const s = await eventually(
      async () => {
        const s = await stack.status('store');
        expect(s.verifiedReplicas).toBe(1);
        expect(condition(s, 'ModelReady')).toMatchObject({ status: 'True', reason: 'Verified' });
        return s;
      },
      { timeoutMs: 150_000 },
    );
    expect(s.model).toMatchObject({ phase: 'Verified', digest: modelD.digest, bytesTotal: modelD.bytes });
    const runs = runsOf(s.model?.cache ?? '');
    expect(runs.map((r) => r.exitCode)).toEqual([1, 0]);
    const pvc = await getJson<PvcView>(['get', 'pvc', s.model?.cache ?? '']);
    expect(pvc.metadata.annotations?.['cacheroute.dev/model-source']).toBe('s3://models/tiny-llm');
    // Neither key is anywhere the operator or the fetcher writes.
    const texts = [
      await stack.k(['get', 'sgd', '-o', 'json']),
      await stack.k(['get', 'events.events.k8s.io', '-o', 'json']),
      await stack.k(['get', 'jobs,pods,pvc', '-o', 'json']),
      ...operatorLog,
      ...runs.flatMap((r) => [r.output, r.message, r.argv.join(' ')]),
    ];
    for (const t of texts) {
      expect(t).not.toContain(wrong);
      expect(t).not.toContain(store.secretAccessKey);
    }
  });

  it('never shows the hub token in status, events, the Job, its pods or any log', async () => {
    // It was used: the hub got it as a bearer.
    expect(hubA.requests.some((q) => q.authorization === `Bearer ${TOKEN}`)).toBe(true);
    const texts = [
      await stack.k(['get', 'sgd', '-o', 'json']),
      await stack.k(['get', 'events.events.k8s.io', '-o', 'json']),
      await stack.k(['get', 'jobs,pods,pvc', '-o', 'json']),
      ...operatorLog,
      ...runner.runs.flatMap((r) => [r.output, r.message, r.argv.join(' ')]),
    ];
    expect(operatorLog.length).toBeGreaterThan(0);
    expect(runner.runs.length).toBeGreaterThanOrEqual(2);
    for (const t of texts) expect(t).not.toContain(TOKEN);
  });
});
