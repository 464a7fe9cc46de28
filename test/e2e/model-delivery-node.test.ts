// Model files checked on each node (issue 16, ADR 0019), on the full control plane with two GPU
// nodes: a download with `cache: Node` is fetched once per node by the first pod's init container
// there, into that node's own directory; a pod that comes back to a node that has the files
// fetches nothing; a `hostPath` source is verified by each pod on its node, and a node whose copy
// differs keeps its pod from starting SGLang while the other node serves.
// Real parts: kube-apiserver, etcd, controller-manager, scheduler and KWOK; the sim-kubelet runs
// the pods' init containers for real (the operator image's fetcher, as a process), each fake node
// with its own hostPath tree; a fake hub over HTTP, and a real S3 server (versitygw) for an
// objectStore source.
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Condition, DeploymentStatus } from '#api';
import type { PodObject } from '../../operator/src/controllers/deployment/meta/pod-view.ts';
import { LABEL_DEPLOYMENT } from '../../operator/src/controllers/deployment/meta/labels.ts';
import { computeModelCacheKey } from '../../operator/src/controllers/deployment/model-cache/names.ts';
import { MARKER_FILE } from '../../fetcher/src/fetch-marker.ts';
import { manifestOfDirectory } from '../../fetcher/src/files.ts';
import { digestOfManifest, isTokenizerFile } from '../../fetcher/src/manifest.ts';
import { validateResource } from '#api';
import { buildDeploymentManifest } from '../support/builders.ts';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.ts';
import { startFakeHub, type FakeHub } from '../support/fake-hub.ts';
import { startObjectStore, type RunningObjectStore } from '../support/object-store.ts';
import { eventually } from '../support/kubectl.ts';

const NS = 'e2e-model-node';
const REPO = 'acme/tiny-llm';
const REVISION = 'fedcba9876543210fedcba9876543210fedcba98';
const WEIGHTS = 'model.safetensors';
const WEIGHTS_BYTES = 2 * 1024 * 1024;
const NODE_ROOT = '/var/lib/cacheroute/models';
// Under the node cache root: the operator's default --host-path-roots.
const STAGED = '/var/lib/cacheroute/models/staged/tiny';

interface Model {
  dir: string;
  digest: string;
  tokenizerDigest: string;
}

const root = mkdtempSync(join(tmpdir(), 'model-node-'));
let stack: E2eStack;
let hub: FakeHub;
let model: Model;
let storeModel: Model;
let store: RunningObjectStore;

async function generateModel(name = 'model'): Promise<Model> {
  const dir = join(root, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ hidden_size: 64 }));
  writeFileSync(join(dir, 'tokenizer.json'), '{"model":{"type":"BPE"}}');
  writeFileSync(join(dir, WEIGHTS), randomBytes(WEIGHTS_BYTES));
  return {
    dir,
    digest: digestOfManifest(await manifestOfDirectory(dir)),
    tokenizerDigest: digestOfManifest(await manifestOfDirectory(dir, { select: isTokenizerFile })),
  };
}

/** One replica per node: the scheduler spreads them (a hostname anti-affinity). */
function manifest(name: string, replicas: number, source: object, of: Model = model) {
  const m = buildDeploymentManifest({ name, replicas, gpus: 1 });
  m.spec['deploymentId'] = `${name}-r1`;
  Object.assign(m.spec['model'] as Record<string, unknown>, {
    path: REPO,
    servedName: name,
    // A hub commit for a hub download; an object store's files are pinned by the digests alone.
    revision: 'objectStore' in source ? undefined : REVISION,
    digest: of.digest,
    tokenizerDigest: of.tokenizerDigest,
    source,
  });
  m.spec['scheduling'] = {
    tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
    affinity: {
      podAntiAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          {
            labelSelector: { matchLabels: { [LABEL_DEPLOYMENT]: name } },
            topologyKey: 'kubernetes.io/hostname',
          },
        ],
      },
    },
  };
  return m;
}

const condition = (s: DeploymentStatus, type: string): Condition | undefined =>
  s.conditions?.find((c) => c.type === type);

async function podsOf(name: string): Promise<PodObject[]> {
  const out = await stack.k(['get', 'pods', '-l', `${LABEL_DEPLOYMENT}=${name}`, '-o', 'json']);
  return (JSON.parse(out) as { items: PodObject[] }).items;
}

beforeAll(async () => {
  model = await generateModel();
  storeModel = await generateModel('store-model');
  store = await startObjectStore();
  await store.createBucket('models');
  await store.putDirectory('models', 'tiny/', storeModel.dir);
  hub = await startFakeHub({
    modelDir: model.dir,
    repo: REPO,
    revision: REVISION,
    isLfs: (p) => p.endsWith('.safetensors'),
  });
  stack = await startE2eStack(NS, {
    gpuNodes: 2,
    kubelet: { initBackoff: { initialMs: 1_000, maxMs: 2_000 } },
    operator: {
      modelCache: {
        fetchImage: 'cacheroute/operator:e2e',
        size: '1Gi',
        nodeRoot: NODE_ROOT,
        progressPeriodMs: 1_000,
        // The fake hub and the store answer plain HTTP on this machine.
        insecureEndpointHosts: [...new Set([hub.url, store.endpoint].map((u) => new URL(u).hostname))],
      },
    },
  });
});

afterAll(async () => {
  await stack?.stop();
  await hub?.close();
  await store?.stop();
  rmSync(root, { recursive: true, force: true });
});

describe('model-delivery on nodes', () => {
  it('fetches a node cache once per node, by the first pod there; a pod back on a node fetches nothing', async () => {
    // Both nodes' downloads are held after half the weights: the status shows how far they got.
    hub.inject({ server: 'cdn', stallAfter: WEIGHTS_BYTES / 2, times: 2 });
    const m = manifest('node-cache', 2, { download: { endpoint: hub.url, cache: 'Node' } });
    await stack.k(['apply', '-f', '-'], JSON.stringify(m));
    const fetching = await eventually(
      async () => {
        const s = await stack.status('node-cache');
        expect(s.model?.phase).toBe('Fetching');
        expect(s.model?.progress).toBeGreaterThan(0.3);
        return s;
      },
      { timeoutMs: 45_000 },
    );
    expect(condition(fetching, 'ModelReady')?.message).toMatch(
      /0 of 2 pods verified yet; pod node-cache-sglang-\S+ on node gpu-node-\d: weights, \d+%/,
    );
    hub.release();
    const s = await eventually(
      async () => {
        const s = await stack.status('node-cache');
        expect(s.verifiedReplicas).toBe(2);
        return s;
      },
      { timeoutMs: 120_000 },
    );
    expect(condition(s, 'ModelReady')).toMatchObject({ status: 'True', reason: 'Verified' });
    expect(condition(s, 'ModelReady')?.message).toContain('2 of 2 pods verified');
    // Once per node: the CDN served the weights twice in all, each node holds its own copy.
    expect(hub.bytesOf(WEIGHTS)).toBe(2 * WEIGHTS_BYTES);
    const parsed = validateResource(m);
    if (!parsed.ok || parsed.value.kind !== 'Deployment') throw new Error('bad manifest');
    const key = computeModelCacheKey(parsed.value.spec);
    for (const node of ['gpu-node-0', 'gpu-node-1']) {
      const dir = stack.kubelet.hostPathOn(node, `${NODE_ROOT}/${key}`);
      expect(existsSync(join(dir, 'model', MARKER_FILE))).toBe(true);
      expect(readFileSync(join(dir, 'model', WEIGHTS)).equals(readFileSync(join(model.dir, WEIGHTS)))).toBe(
        true,
      );
    }
    // No PersistentVolumeClaim and no Job: the pods did it.
    expect(
      (JSON.parse(await stack.k(['get', 'pvc,jobs', '-o', 'json'])) as { items: unknown[] }).items,
    ).toEqual([]);

    // A pod deleted comes back on the node it left (the other node has its sibling): its init
    // container finds the node's files and fetches nothing.
    const [first] = await podsOf('node-cache');
    await stack.k(['delete', 'pod', first?.metadata?.name ?? '', '--wait=false']);
    await eventually(
      async () => {
        const pods = await podsOf('node-cache');
        expect(pods.map((p) => p.metadata?.name)).not.toContain(first?.metadata?.name);
        expect((await stack.status('node-cache')).verifiedReplicas).toBe(2);
      },
      { timeoutMs: 90_000 },
    );
    expect(hub.bytesOf(WEIGHTS)).toBe(2 * WEIGHTS_BYTES);
  });

  it("fetches an object store prefix onto the node by the pod's init container, with the Secret's keys as its env", async () => {
    await stack.k(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 's3-reader' },
        type: 'Opaque',
        stringData: { AWS_ACCESS_KEY_ID: store.accessKeyId, AWS_SECRET_ACCESS_KEY: store.secretAccessKey },
      }),
    );
    const source = {
      objectStore: {
        url: 's3://models/tiny',
        endpoint: store.endpoint,
        forcePathStyle: true,
        cache: 'Node',
        credentialsSecretRef: { name: 's3-reader' },
      },
    };
    const m = manifest('store-node', 1, source, storeModel);
    await stack.k(['apply', '-f', '-'], JSON.stringify(m));
    await eventually(
      async () => {
        const s = await stack.status('store-node');
        expect(s.verifiedReplicas).toBe(1);
        expect(condition(s, 'ModelReady')).toMatchObject({ status: 'True', reason: 'Verified' });
      },
      { timeoutMs: 90_000 },
    );
    const [pod] = await podsOf('store-node');
    const message = pod?.status?.initContainerStatuses?.find((c) => c.name === 'fetch')?.state?.terminated
      ?.message;
    expect(JSON.parse(message ?? '{}')).toMatchObject({ phase: 'done', ok: true, fromMarker: false });
    const parsed = validateResource(m);
    if (!parsed.ok || parsed.value.kind !== 'Deployment') throw new Error('bad manifest');
    const dir = stack.kubelet.hostPathOn(
      pod?.spec?.nodeName ?? '',
      `${NODE_ROOT}/${computeModelCacheKey(parsed.value.spec)}`,
    );
    expect(JSON.parse(readFileSync(join(dir, 'model', MARKER_FILE), 'utf8'))).toMatchObject({
      url: 's3://models/tiny',
      digest: storeModel.digest,
    });
    expect(
      readFileSync(join(dir, 'model', WEIGHTS)).equals(readFileSync(join(storeModel.dir, WEIGHTS))),
    ).toBe(true);
    await stack.k(['delete', 'sgd', 'store-node']);
  });

  it('verifies a hostPath source in each pod on its node: a node whose copy differs serves nothing, the other serves', async () => {
    const good = stack.kubelet.hostPathOn('gpu-node-0', STAGED);
    const bad = stack.kubelet.hostPathOn('gpu-node-1', STAGED);
    for (const dir of [good, bad]) cpSync(model.dir, dir, { recursive: true });
    const weights = readFileSync(join(bad, WEIGHTS));
    weights[1234] = (weights[1234] ?? 0) ^ 0xff;
    writeFileSync(join(bad, WEIGHTS), weights);

    await stack.k(
      ['apply', '-f', '-'],
      JSON.stringify(manifest('staged', 2, { hostPath: { path: STAGED } })),
    );
    const s = await eventually(
      async () => {
        const s = await stack.status('staged');
        expect(condition(s, 'ModelReady')).toMatchObject({ status: 'False', reason: 'ModelDigestMismatch' });
        expect(s.verifiedReplicas).toBe(1);
        return s;
      },
      { timeoutMs: 120_000 },
    );
    expect(condition(s, 'ModelReady')?.message).toMatch(/^pod staged-sglang-\S+ on node gpu-node-1: /);
    expect(condition(s, 'ModelReady')?.message).toContain(`the spec pins ${model.digest}`);
    // SGLang runs only on the node whose files passed.
    const pods = await podsOf('staged');
    const running = pods.filter((p) => stack.kubelet.sims.has(p.metadata?.name ?? ''));
    expect(running.map((p) => p.spec?.nodeName)).toEqual(['gpu-node-0']);

    // The node's copy fixed: its pod's next init run passes (the kubelet's retry), and both serve.
    cpSync(join(model.dir, WEIGHTS), join(bad, WEIGHTS));
    // Serving and the condition come from two informers (the workload's pods, the model cache's
    // pods): for a moment the status may hold the one and not yet the other.
    await eventually(
      async () => {
        const s = await stack.status('staged');
        expect(s.verifiedReplicas).toBe(2);
        expect(condition(s, 'ModelReady')).toMatchObject({ status: 'True', reason: 'Verified' });
      },
      { timeoutMs: 60_000 },
    );

    // A pod back on node 0 trusts the node's record of the unchanged files: no second full read.
    const onGood = (await podsOf('staged')).find((p) => p.spec?.nodeName === 'gpu-node-0');
    await stack.k(['delete', 'pod', onGood?.metadata?.name ?? '', '--wait=false']);
    const back = await eventually(
      async () => {
        const pod = (await podsOf('staged')).find(
          (p) => p.spec?.nodeName === 'gpu-node-0' && p.metadata?.name !== onGood?.metadata?.name,
        );
        const message = pod?.status?.initContainerStatuses?.find((c) => c.name === 'fetch')?.state?.terminated
          ?.message;
        expect(message).toBeDefined();
        return JSON.parse(message ?? '{}') as Record<string, unknown>;
      },
      { timeoutMs: 60_000 },
    );
    expect(back).toMatchObject({ phase: 'done', ok: true, fromMarker: true });
  });
});
