// real-sglang L3: HiCache's shared storage tier (issue 33 item 2, ADR 0029) on the REAL SGLang
// 0.5.23, provisioned by the operator. A two-replica HiCache Deployment with the file backend:
// the operator claims a ReadWriteMany volume, the PersistentVolume binder binds it to a
// hostPath PersistentVolume (a directory here), and the sim-kubelet starts `kit serve` for each
// pod with the claim's directory as SGLang's file backend directory (the pod's env, its mount
// mapped). Then, from what each real server reports of its own cache:
// - a prefix replica A computed and wrote through is loaded from L3 by replica B, which never
//   computed it (cached_tokens_details.storage);
// - a cache_salt keeps tenants apart in L3 too (SGLang seeds the storage hash chain with it:
//   mem_cache/utils.py storage_namespace_seed);
// - a replica that replaces another (scale down, then up) finds both tenants' prefixes in L3.
// At most two real servers at once.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Endpoint } from '#api';
import { MODEL_DIR } from '../../operator/src/controllers/deployment/model-cache/names.ts';
import { buildDeploymentManifest } from '../support/builders.ts';
import { DEFAULT_CONTROLLERS } from '../support/components.ts';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.ts';
import { eventually } from '../support/kubectl.ts';
import { removeKitModelLink } from '../support/real-sglang.ts';
import { buildRuntimeAuthHeader } from '../support/sim-kubelet.ts';

const NS = 'e2e-real-sglang-l3';
const NAME = 'tiny-l3';
const CLASS = 'l3-shared';
const PAGE = 16;
// The tiny model's tokenizer was trained on this sentence: about ten tokens a copy.
const SENTENCE = 'the quick brown fox jumps over the lazy dog ';
const PROMPT = `A handbook chapter. ${SENTENCE.repeat(36)}`;

let stack: E2eStack;
let pvDir = '';
let linkedModelDir = false;

interface MetaInfo {
  prompt_tokens: number;
  cached_tokens: number;
  cached_tokens_details: { device: number; host: number; storage?: number } | null;
}

/** The prompt's cacheable pages: SGLang always computes the last token. */
const cacheable = (promptTokens: number): number => Math.floor((promptTokens - 1) / PAGE) * PAGE;

async function verifiedEndpoints(count: number): Promise<Endpoint[]> {
  return eventually(
    async () => {
      const s = await stack.status(NAME);
      const verified = (s.endpoints ?? []).filter((e) => e.verified);
      expect(verified).toHaveLength(count);
      return verified;
    },
    { timeoutMs: 400_000, intervalMs: 1_000 },
  );
}

/** /generate on one replica, with its own API key, as the gateway would send it. */
async function generate(e: Endpoint, cacheSalt?: string): Promise<MetaInfo> {
  const auth = await eventually(
    () => {
      const real = stack.kubelet.reals.get(e.pod);
      expect(real).toBeDefined();
      return buildRuntimeAuthHeader(real?.argv ?? []);
    },
    { timeoutMs: 60_000 },
  );
  const r = await fetch(`http://${e.ip}:${e.port}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth },
    body: JSON.stringify({
      text: PROMPT,
      sampling_params: { max_new_tokens: 1, temperature: 0 },
      ...(cacheSalt === undefined ? {} : { cache_salt: cacheSalt }),
    }),
  });
  expect(r.status).toBe(200);
  return ((await r.json()) as { meta_info: MetaInfo }).meta_info;
}

/** The pages in the Deployment's L3 directory (the PersistentVolume's, at the identity's subdirectory). */
function pagesInL3(directory: string): number {
  const dir = join(pvDir, directory);
  return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.bin')).length : 0;
}

beforeAll(async () => {
  linkedModelDir = !existsSync(MODEL_DIR);
  pvDir = mkdtempSync(join(tmpdir(), 'cacheroute-l3-pv-'));
  stack = await startE2eStack(NS, {
    controllers: [...DEFAULT_CONTROLLERS, 'persistentvolume-binder', 'pvc-protection'],
    kubelet: {
      realSglang: (pod) => (pod.metadata?.labels?.['cacheroute.dev/deployment'] === NAME ? [] : undefined),
    },
  });
  // A storage class without a provisioner and one ReadWriteMany volume on a local directory.
  for (const o of [
    {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: CLASS },
      provisioner: 'kubernetes.io/no-provisioner',
      volumeBindingMode: 'Immediate',
    },
    {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: `${NS}-l3` },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteMany'],
        storageClassName: CLASS,
        persistentVolumeReclaimPolicy: 'Retain',
        hostPath: { path: pvDir, type: 'Directory' },
      },
    },
  ])
    await stack.k(['apply', '-f', '-'], JSON.stringify(o));
});

afterAll(async () => {
  await stack?.stop();
  if (linkedModelDir) removeKitModelLink(MODEL_DIR);
  if (pvDir) rmSync(pvDir, { recursive: true, force: true });
});

describe('real-sglang L3 (HiCache file backend on an operator-made claim)', () => {
  it('B loads from L3 what A computed; salts stay apart; a new replica finds both in L3', async () => {
    const m = buildDeploymentManifest({
      name: NAME,
      replicas: 2,
      gpus: 1,
      spec: {
        deploymentId: `${NAME}-r1`,
        profile: 'hicache',
        hicache: {
          ratio: 2,
          writePolicy: 'write_through',
          storage: {
            backend: 'file',
            // Wait for a prefetch to finish before scheduling: what B reports is then what L3 held.
            prefetchPolicy: 'wait_complete',
            volume: { size: '1Gi', storageClassName: CLASS },
          },
        },
        serving: { pageSize: PAGE, maxTotalTokens: 2048 },
      },
    });
    (m.spec['model'] as Record<string, unknown>)['servedName'] = NAME;
    await stack.k(['apply', '-f', '-'], JSON.stringify(m));

    const tier = await eventually(
      async () => {
        const l3 = (await stack.status(NAME)).l3?.[0];
        expect(l3).toMatchObject({ backend: 'file', reachable: true, capacity: '1Gi' });
        return l3;
      },
      { timeoutMs: 60_000 },
    );
    const directory = tier?.directory ?? '';
    const [a, b] = await verifiedEndpoints(2);
    if (!a || !b) throw new Error('two replicas');
    expect(a.reported).toMatchObject({ hicache: true });

    // A computes the prefix and writes it through to L3.
    const before = pagesInL3(directory);
    const onA = await generate(a);
    expect(onA.cached_tokens).toBe(0);
    const pages = cacheable(onA.prompt_tokens) / PAGE;
    await eventually(() => expect(pagesInL3(directory) - before).toBeGreaterThanOrEqual(pages), {
      timeoutMs: 30_000,
    });

    // Another tenant's salt on B: nothing of A's prefix is theirs, in L3 either.
    const saltedOnB = await generate(b, 'tenant-b');
    expect(saltedOnB.cached_tokens).toBe(0);

    // B never computed the unsalted prefix: it comes from L3, every cacheable page of it.
    const onB = await generate(b);
    expect(onB.cached_tokens).toBe(cacheable(onB.prompt_tokens));
    expect(onB.cached_tokens_details).toMatchObject({ device: 0, host: 0, storage: onB.cached_tokens });
    await eventually(() => expect(pagesInL3(directory) - before).toBeGreaterThanOrEqual(2 * pages), {
      timeoutMs: 30_000,
    });

    // One replica goes, another comes: a fresh server, an empty device and host cache.
    await stack.k(['patch', 'sgd', NAME, '--type=merge', '-p', JSON.stringify({ spec: { replicas: 1 } })]);
    const [kept] = await verifiedEndpoints(1);
    await eventually(() => expect(stack.kubelet.reals.size).toBe(1), { timeoutMs: 60_000 });
    await stack.k(['patch', 'sgd', NAME, '--type=merge', '-p', JSON.stringify({ spec: { replicas: 2 } })]);
    const fresh = (await verifiedEndpoints(2)).find((e) => e.pod !== kept?.pod);
    if (!fresh) throw new Error('no new replica');
    expect([a.pod, b.pod]).not.toContain(fresh.pod);

    // Both tenants' prefixes are in L3, each under its own salt; a third tenant has none.
    const tenantB = await generate(fresh, 'tenant-b');
    expect(tenantB.cached_tokens_details).toMatchObject({
      device: 0,
      host: 0,
      storage: cacheable(tenantB.prompt_tokens),
    });
    const unsalted = await generate(fresh);
    expect(unsalted.cached_tokens_details).toMatchObject({
      device: 0,
      host: 0,
      storage: cacheable(unsalted.prompt_tokens),
    });
    const tenantC = await generate(fresh, 'tenant-c');
    expect(tenantC.cached_tokens).toBe(0);
  });
});
