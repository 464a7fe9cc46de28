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
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { E2eStack } from '../support/e2e-stack.ts';
import { eventually } from '../support/kubectl.ts';
import {
  buildL3Deployment,
  cacheable,
  expectBothTenantsFromStorage,
  generateOn,
  L3_PAGE,
  provideSharedVolume,
  replaceOneReplica,
  startRealL3Stack,
  verifiedEndpoints,
  type SharedVolume,
} from '../support/real-sglang-l3.ts';

const NS = 'e2e-real-sglang-l3';
const NAME = 'tiny-l3';
const CLASS = 'l3-shared';

let stack: E2eStack;
let volume: SharedVolume | undefined;

/** The pages in the Deployment's L3 directory (the PersistentVolume's, at the identity's subdirectory). */
function pagesInL3(directory: string): number {
  const dir = join(volume?.dir ?? '', directory);
  return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.bin')).length : 0;
}

beforeAll(async () => {
  stack = await startRealL3Stack(NS, NAME, ['persistentvolume-binder', 'pvc-protection']);
  volume = await provideSharedVolume(stack, `${NS}-l3`, CLASS);
});

afterAll(async () => {
  await stack?.stop();
  volume?.remove();
});

describe('real-sglang L3 (HiCache file backend on an operator-made claim)', () => {
  it('B loads from L3 what A computed; salts stay apart; a new replica finds both in L3', async () => {
    const m = buildL3Deployment(NAME, {
      backend: 'file',
      volume: { size: '1Gi', storageClassName: CLASS },
    });
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
    const [a, b] = await verifiedEndpoints(stack, NAME, 2);
    if (!a || !b) throw new Error('two replicas');
    expect(a.reported).toMatchObject({ hicache: true });

    // A computes the prefix and writes it through to L3.
    const before = pagesInL3(directory);
    const onA = await generateOn(stack, a);
    expect(onA.cached_tokens).toBe(0);
    const pages = cacheable(onA.prompt_tokens) / L3_PAGE;
    await eventually(() => expect(pagesInL3(directory) - before).toBeGreaterThanOrEqual(pages), {
      timeoutMs: 30_000,
    });

    // Another tenant's salt on B: nothing of A's prefix is theirs, in L3 either.
    const saltedOnB = await generateOn(stack, b, 'tenant-b');
    expect(saltedOnB.cached_tokens).toBe(0);

    // B never computed the unsalted prefix: it comes from L3, every cacheable page of it.
    const onB = await generateOn(stack, b);
    expect(onB.cached_tokens).toBe(cacheable(onB.prompt_tokens));
    expect(onB.cached_tokens_details).toMatchObject({ device: 0, host: 0, storage: onB.cached_tokens });
    await eventually(() => expect(pagesInL3(directory) - before).toBeGreaterThanOrEqual(2 * pages), {
      timeoutMs: 30_000,
    });

    // One replica goes, another comes: a fresh server, an empty device and host cache.
    const fresh = await replaceOneReplica(stack, NAME, [a, b]);

    // Both tenants' prefixes are in L3, each under its own salt; a third tenant has none.
    await expectBothTenantsFromStorage(stack, fresh);
    // Three real server starts (A, B, the replacement), one after the other: each has its own
    // bound (verifiedEndpoints, the kit's start), which the suite's 300 s default is not.
  }, 1_200_000);
});
