// What the real-sglang L3 suites share (test/e2e/real-sglang-l3*.test.ts, issue 33 item 2): a
// two-replica HiCache Deployment of the tiny model on the real SGLang, the prompt whose prefix
// one replica computes and another loads from L3, and each replica's own report of where its
// cached tokens came from (cached_tokens_details). Backends differ in what they provision.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { Endpoint } from '#api';
import { MODEL_DIR } from '../../operator/src/controllers/deployment/model-cache/names.ts';
import { buildDeploymentManifest } from './builders.ts';
import { DEFAULT_CONTROLLERS } from './components.ts';
import { startE2eStack, type E2eStack } from './e2e-stack.ts';
import { eventually } from './kubectl.ts';
import { removeKitModelLink } from './real-sglang.ts';
import { cacheable, L3_PAGE, L3_PROMPT } from './hicache-l3.ts';
import { realRuntimeAuth } from './sim-kubelet.ts';

// The prompt and its pages, as the conformance suites use them too.
export { cacheable, L3_PAGE, L3_PROMPT };

export interface L3MetaInfo {
  prompt_tokens: number;
  cached_tokens: number;
  cached_tokens_details: { device: number; host: number; storage?: number; storage_backend?: string } | null;
}

/** An e2e stack whose pods of Deployment `name` run the real SGLang; the kit's model link removed at stop. */
export async function startRealL3Stack(
  namespace: string,
  name: string,
  controllers: readonly string[] = [],
): Promise<E2eStack> {
  const linkedModelDir = !existsSync(MODEL_DIR);
  const stack = await startE2eStack(namespace, {
    controllers: [...DEFAULT_CONTROLLERS, ...controllers],
    kubelet: {
      realSglang: (pod) => (pod.metadata?.labels?.['cacheroute.dev/deployment'] === name ? [] : undefined),
    },
  });
  return {
    ...stack,
    async stop() {
      await stack.stop();
      if (linkedModelDir) removeKitModelLink(MODEL_DIR);
    },
  };
}

/** The two-replica HiCache Deployment of the L3 suites, with `storage` as its L3 tier. */
export function buildL3Deployment(name: string, storage: Record<string, unknown>) {
  const m = buildDeploymentManifest({
    name,
    replicas: 2,
    gpus: 1,
    spec: {
      deploymentId: `${name}-r1`,
      profile: 'hicache',
      hicache: {
        ratio: 2,
        writePolicy: 'write_through',
        // Wait for a prefetch to finish before scheduling: what a replica reports is then what L3 held.
        storage: { prefetchPolicy: 'wait_complete', ...storage },
      },
      serving: { pageSize: L3_PAGE, maxTotalTokens: 2048 },
      // As the samples do: what runs beside the replicas (a Mooncake store) may go on the GPU node.
      scheduling: { tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }] },
    },
  });
  (m.spec['model'] as Record<string, unknown>)['servedName'] = name;
  return m;
}

export async function verifiedEndpoints(stack: E2eStack, name: string, count: number): Promise<Endpoint[]> {
  return eventually(
    async () => {
      const s = await stack.status(name);
      const verified = (s.endpoints ?? []).filter((e) => e.verified);
      expect(verified).toHaveLength(count);
      return verified;
    },
    { timeoutMs: 400_000, intervalMs: 1_000 },
  );
}

/**
 * The header that opens a replica's runtime, once its server answers /health: a verified
 * endpoint may still be in SGLang's warm-up (sim-kubelet.ts realReady), so this waits for the
 * kubelet's own outcome of the start, not a fixed time.
 */
export async function runtimeAuthOf(stack: E2eStack, e: Endpoint): Promise<Record<string, string>> {
  return realRuntimeAuth(stack.kubelet, e.pod);
}

/** /generate of the L3 prompt on one replica, with its own API key, as the gateway would send it. */
export async function generateOn(stack: E2eStack, e: Endpoint, cacheSalt?: string): Promise<L3MetaInfo> {
  const r = await fetch(`http://${e.ip}:${e.port}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(await runtimeAuthOf(stack, e)) },
    body: JSON.stringify({
      text: L3_PROMPT,
      sampling_params: { max_new_tokens: 1, temperature: 0 },
      ...(cacheSalt === undefined ? {} : { cache_salt: cacheSalt }),
    }),
  });
  expect(r.status).toBe(200);
  return ((await r.json()) as { meta_info: L3MetaInfo }).meta_info;
}

/** Scale to one replica, then back to two: the new replica starts with empty device and host tiers. */
export async function replaceOneReplica(stack: E2eStack, name: string, before: readonly Endpoint[]) {
  await stack.k(['patch', 'sgd', name, '--type=merge', '-p', JSON.stringify({ spec: { replicas: 1 } })]);
  const [kept] = await verifiedEndpoints(stack, name, 1);
  await eventually(() => expect(stack.kubelet.reals.size).toBe(1), { timeoutMs: 60_000 });
  await stack.k(['patch', 'sgd', name, '--type=merge', '-p', JSON.stringify({ spec: { replicas: 2 } })]);
  const fresh = (await verifiedEndpoints(stack, name, 2)).find((e) => e.pod !== kept?.pod);
  if (!fresh) throw new Error('no new replica');
  expect(before.map((e) => e.pod)).not.toContain(fresh.pod);
  return fresh;
}

/**
 * What a replacement replica (empty device and host tiers) finds in L3: both tenants' prefixes
 * (tenant-b's salt and the unsalted one), each whole from storage; a third tenant, nothing.
 */
export async function expectBothTenantsFromStorage(stack: E2eStack, fresh: Endpoint): Promise<void> {
  for (const salt of ['tenant-b', undefined]) {
    const m = await generateOn(stack, fresh, salt);
    expect(m.cached_tokens_details, `salt ${salt ?? '(none)'}`).toMatchObject({
      device: 0,
      host: 0,
      storage: cacheable(m.prompt_tokens),
    });
  }
  expect((await generateOn(stack, fresh, 'tenant-c')).cached_tokens).toBe(0);
}

export interface SharedVolume {
  /** The local directory the PersistentVolume is (a hostPath here). */
  readonly dir: string;
  remove(): void;
}

/**
 * A StorageClass without a provisioner and one ReadWriteMany PersistentVolume of 1Gi on a fresh
 * local directory: what the file backend's operator-made claim binds to (the stack runs the
 * persistentvolume-binder).
 */
export async function provideSharedVolume(
  stack: E2eStack,
  volumeName: string,
  storageClass: string,
): Promise<SharedVolume> {
  const dir = mkdtempSync(join(tmpdir(), 'cacheroute-l3-pv-'));
  for (const o of [
    {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: storageClass },
      provisioner: 'kubernetes.io/no-provisioner',
      volumeBindingMode: 'Immediate',
    },
    {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: volumeName },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteMany'],
        storageClassName: storageClass,
        persistentVolumeReclaimPolicy: 'Retain',
        hostPath: { path: dir, type: 'Directory' },
      },
    },
  ])
    await stack.k(['apply', '-f', '-'], JSON.stringify(o));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
