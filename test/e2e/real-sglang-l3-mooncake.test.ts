// real-sglang L3, backend mooncake (issue 33 item 2, ADR 0041): HiCache's shared storage tier on
// the REAL SGLang 0.5.23, on a Mooncake store the operator runs. A two-replica HiCache Deployment
// with storage.backend mooncake: the operator keeps a Deployment and Service of the store
// (mooncake_master and a store node), the sim-kubelet runs that pod as the kit's real Mooncake
// processes on its pod IP (mooncake-pod.ts) and each replica as `kit serve` with the pod's env
// (MOONCAKE_MASTER, the Service's name resolved to the store pod as cluster DNS would). Then,
// from what each real server reports of its own cache and what the master counts:
// - a prefix replica A computed and wrote through is loaded from the store by replica B, which
//   never computed it (cached_tokens_details.storage);
// - a cache_salt keeps tenants apart in the store too;
// - a replica that replaces another finds both tenants' prefixes there;
// - status.l3 shows the tier: reachable, the declared capacity, the master's usage.
// At most two real servers at once (the store's processes are not SGLang servers).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { E2eStack } from '../support/e2e-stack.ts';
import { eventually } from '../support/kubectl.ts';
import {
  buildL3Deployment,
  cacheable,
  expectBothTenantsFromStorage,
  generateOn,
  L3_PAGE,
  replaceOneReplica,
  startRealL3Stack,
  verifiedEndpoints,
} from '../support/real-sglang-l3.ts';

const NS = 'e2e-real-sglang-l3-mooncake';
const NAME = 'tiny-l3-mc';
const CAPACITY_BYTES = 512 * 2 ** 20;

let stack: E2eStack;

beforeAll(async () => {
  stack = await startRealL3Stack(NS, NAME);
});

afterAll(async () => {
  await stack?.stop();
});

/** The store's tier in status, once the master counts `objects` keys at least. */
async function tierWith(objects: number) {
  return eventually(
    async () => {
      const tier = (await stack.status(NAME)).l3?.[0];
      expect(tier).toMatchObject({ backend: 'mooncake', reachable: true, capacityBytes: CAPACITY_BYTES });
      expect(tier?.objects ?? 0).toBeGreaterThanOrEqual(objects);
      return tier;
    },
    // status reads the master on each pass (every 30 s without an event).
    { timeoutMs: 90_000, intervalMs: 1_000 },
  );
}

describe('real-sglang L3 (HiCache mooncake backend on an operator-run store)', () => {
  it('B loads from the store what A computed; salts stay apart; a new replica finds both', async () => {
    await stack.k(
      ['apply', '-f', '-'],
      JSON.stringify(buildL3Deployment(NAME, { backend: 'mooncake', mooncake: { capacity: '512Mi' } })),
    );
    const empty = await tierWith(0);
    expect(empty).toMatchObject({ capacity: '512Mi', managed: true });
    expect(empty?.master).toMatch(new RegExp(`^${empty?.store ?? '-'}\\.${NS}\\.svc:50051$`));
    expect(stack.kubelet.stores.size).toBe(1);

    const [a, b] = await verifiedEndpoints(stack, NAME, 2);
    if (!a || !b) throw new Error('two replicas');
    expect(a.reported).toMatchObject({ hicache: true });

    // A computes the prefix and writes it through to the store: a K and a V object a page.
    const onA = await generateOn(stack, a);
    expect(onA.cached_tokens).toBe(0);
    const pages = cacheable(onA.prompt_tokens) / L3_PAGE;
    const written = await tierWith((empty?.objects ?? 0) + 2 * pages);
    expect(written?.usedBytes).toBeGreaterThan(0);

    // Another tenant's salt on B: nothing of A's prefix is theirs, in the store either.
    expect((await generateOn(stack, b, 'tenant-b')).cached_tokens).toBe(0);

    // B never computed the unsalted prefix: it comes from the store, every cacheable page of it.
    const onB = await generateOn(stack, b);
    expect(onB.cached_tokens_details).toMatchObject({
      device: 0,
      host: 0,
      storage: cacheable(onB.prompt_tokens),
      storage_backend: 'MooncakeStore',
    });

    // One replica goes, another comes: a fresh server, an empty device and host cache; the store stays.
    const fresh = await replaceOneReplica(stack, NAME, [a, b]);
    await expectBothTenantsFromStorage(stack, fresh);
    // Three real server starts (A, B, the replacement), one after the other on this machine.
  }, 1_200_000);
});
