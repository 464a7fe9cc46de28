// The gateway as an endpoint picker behind a real Envoy (1.40) on the full control
// plane: the operator verifies the runtimes (simulators on every pod IP, KV events on)
// and keeps the Deployment's InferencePool, the gateway discovers them, and Envoy,
// rendered from that pool as a GIE gateway routing to it would be (hack/envoy/pool-route.ts:
// the pool's failureMode chooses the bootstrap), asks the picker for every request.
// Requests reach only verified pods, a conversation stays on its pod, a runtime scaled away
// leaves the pick; a picker outage is Envoy's 500 under FailClose and goes to the pool's pods
// under FailOpen, with each pod's runtime key set by Envoy, and a pod scaled in later joins that
// fallback without Envoy restarted (hack/envoy/follow-pool.ts, as make run PICKER=1 follows).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PickerServer } from '../../gateway/src/epp/server.ts';
import { startEndpointPicker } from '../../gateway/src/server.ts';
import { OPEN_DIRECTORY } from '../../gateway/src/tenancy/tenant.ts';
import { followInferencePool, type FollowOutcome, type PoolFollower } from '../../hack/envoy/follow-pool.ts';
import { buildPickerRouteForPool, readInferencePool } from '../../hack/envoy/pool-route.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../support/builders.ts';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.ts';
import { startEnvoy, untilPickerMarkedDown, type RunningEnvoy } from '../support/envoy.ts';
import { eventually } from '../support/kubectl.ts';

const NS = 'e2e-picker';
let stack: E2eStack;
let epp: PickerServer | undefined;
let envoy: RunningEnvoy | undefined;
let follower: PoolFollower | undefined;

beforeAll(async () => {
  // The operator keeps InferencePools (GIE's CRDs installed) naming the chart's picker Service.
  stack = await startE2eStack(NS, {
    inferencePool: true,
    operator: { picker: { namespace: NS, name: 'cacheroute-picker', port: 9002 } },
  });
});

afterAll(async () => {
  await follower?.stop();
  await envoy?.close();
  await epp?.close();
  await stack?.stop();
});

interface Answer {
  readonly status: number;
  /** The picker's pick (it adds the header to the response). */
  readonly endpoint: string | null;
  /** The pod that answered (the simulator's own header). */
  readonly worker: string | null;
  readonly body: string;
}

async function generate(ids: number[], headers: Record<string, string> = {}): Promise<Answer> {
  const r = await fetch(`${envoy?.url ?? ''}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'llama-8b', input_ids: ids, sampling_params: { max_new_tokens: 1 } }),
  });
  return {
    status: r.status,
    endpoint: r.headers.get('x-cacheroute-endpoint'),
    worker: r.headers.get('x-sim-worker'),
    body: await r.text(),
  };
}

/** Requests Envoy sent to each host of its destination cluster (the pool's, under FailOpen). */
async function poolHostRequests(e: RunningEnvoy): Promise<Map<string, number>> {
  const text = await (await fetch(`${e.adminUrl}/clusters`)).text();
  const counts = new Map<string, number>();
  for (const m of text.matchAll(/^original_destination_cluster::([\d.]+:\d+)::rq_total::(\d+)$/gm))
    counts.set(m[1] ?? '', Number(m[2]));
  return counts;
}

function startPicker(): Promise<PickerServer> {
  const gateway = stack.gateways[0];
  if (!gateway) throw new Error('no gateway');
  return startEndpointPicker(
    gateway.app,
    { mode: 'both', port: 0, healthPort: 0 },
    '127.0.0.1',
    OPEN_DIRECTORY,
    () => gateway.watcher.table.ready,
  );
}

describe('the endpoint picker behind Envoy on the control plane', () => {
  it('routes only to verified pods, keeps conversations home, drops a pod scaled away, fails closed', async () => {
    const { k, status, gateways } = stack;
    const gateway = gateways[0];
    if (!gateway) throw new Error('no gateway');
    const m = buildDeploymentManifest({ name: 'llama', replicas: 3, gpus: 1 });
    m.spec['events'] = { kvCache: true };
    await k(['apply', '-f', '-'], JSON.stringify(m));
    await k(
      ['apply', '-f', '-'],
      JSON.stringify(buildCachePolicyManifest('team-a', ['llama'], { resultReuse: { enabled: false } })),
    );
    await eventually(async () => expect((await status('llama')).verifiedReplicas).toBe(3), {
      timeoutMs: 90_000,
    });
    await eventually(() => expect(gateway.watcher.table.lookup('llama-8b')?.endpoints).toHaveLength(3), {
      timeoutMs: 30_000,
    });
    epp = await startPicker();
    // Envoy as a gateway routing to the operator's pool: FailClose (the CachePolicy's default).
    const pool = await eventually(() => readInferencePool(stack.cp.kubeconfig, NS, 'llama'));
    expect(pool.failureMode).toBe('FailClose');
    const route = buildPickerRouteForPool(pool, { port: epp.port, healthPort: epp.healthPort });
    expect(route.failOpen).toBeUndefined();
    envoy = await startEnvoy(route);
    const verified = new Set(((await status('llama')).endpoints ?? []).map((e) => `${NS}/${e.pod}`));

    // Four conversations of three turns: each turn extends its conversation's history.
    const homes = new Map<number, Set<string | null>>();
    const history = Array.from({ length: 4 }, () => [] as number[]);
    for (let turn = 0; turn < 3; turn++)
      for (const [c, h] of history.entries()) {
        for (let i = 0; i < 128; i++) h.push(300 + ((c * 7919 + turn * 131 + i * 17) % 30000));
        const r = await generate(h);
        expect(r.status).toBe(200);
        expect(verified.has(r.endpoint ?? '')).toBe(true);
        homes.set(c, (homes.get(c) ?? new Set()).add(r.endpoint));
        // The runtime's KV events reach the gateway's index before the next turn.
        await new Promise((r) => setTimeout(r, 200));
      }
    for (const [c, set] of homes) expect(set.size, `conversation ${c}`).toBe(1);

    // Scaled to two: the pod scaled away leaves the table, and no pick names it again.
    await k(['scale', 'sgd/llama', '--replicas=2']);
    await eventually(() => expect(gateway.watcher.table.lookup('llama-8b')?.endpoints).toHaveLength(2), {
      timeoutMs: 60_000,
    });
    const left = new Set(gateway.watcher.table.lookup('llama-8b')?.endpoints.map((e) => e.id));
    for (let i = 0; i < 8; i++) {
      const r = await generate([900 + i, 901, 902, 903]);
      expect(r.status).toBe(200);
      expect(left.has(r.endpoint ?? '')).toBe(true);
    }

    // The picker gone (failureMode FailClose): Envoy answers 500 itself.
    await epp.close();
    epp = undefined;
    expect((await generate([1, 2, 3])).status).toBe(500);
    await envoy.close();
    envoy = undefined;
  });

  it('FailOpen from the CachePolicy: the pool re-rendered, a picker outage sent to the pool, followed', async () => {
    // FailOpen lets requests past the picker without a tenant's salt: the API wants sharePrefixes.
    await stack.k(
      ['apply', '-f', '-'],
      JSON.stringify(
        buildCachePolicyManifest('team-a', ['llama'], {
          resultReuse: { enabled: false },
          inferencePool: { failureMode: 'FailOpen' },
          tenancy: { sharePrefixes: true },
        }),
      ),
    );
    const pool = await eventually(
      async () => {
        const p = await readInferencePool(stack.cp.kubeconfig, NS, 'llama');
        expect(p.failureMode).toBe('FailOpen');
        expect(p.endpoints).toHaveLength(2);
        return p;
      },
      { timeoutMs: 30_000 },
    );
    epp = await startPicker();
    const route = buildPickerRouteForPool(pool, { port: epp.port, healthPort: epp.healthPort });
    expect(route.failOpen?.pool).toEqual(pool.endpoints);
    // Envoy carries each pod's runtime key (its Deployment's Secret) for the picker's outages.
    expect(Object.keys(route.failOpen?.runtimeKeys ?? {}).sort()).toEqual([...pool.endpoints].sort());
    envoy = await startEnvoy(route);
    const outcomes: FollowOutcome[] = [];
    follower = await followInferencePool({
      kubeconfig: stack.cp.kubeconfig,
      namespace: NS,
      name: 'llama',
      failureMode: 'FailOpen',
      file: envoy.poolEndpointsFile,
      onOutcome: (o) => outcomes.push(o),
    });

    // Picker up: it picks, and the pod it named answers (with the runtime key the picker adds).
    const picked = await generate([7, 8, 9, 10]);
    expect(picked.status).toBe(200);
    expect(picked.endpoint).toBe(`${NS}/${picked.worker ?? ''}`);

    // Picker gone, and seen down by Envoy's health check: Envoy fails open, round robin over the
    // pool's pods (its per-host request counts), no pick made. The operator starts each runtime
    // with --api-key; Envoy sets the pod's key on the way out (hack/envoy/bootstrap.ts, FailOpen
    // part 4), over the client's own Authorization: the runtimes answer (without it, their 401).
    await epp.close();
    epp = undefined;
    await untilPickerMarkedDown(envoy);
    const before = await poolHostRequests(envoy);
    for (let i = 0; i < 6; i++) {
      const r = await generate([20 + i, 21, 22, 23], { authorization: 'Bearer wrong' });
      expect(r.status, r.body).toBe(200);
      expect(r.endpoint).toBeNull();
      // A runtime's answer (the simulator names its pod), not Envoy's own.
      expect(r.worker).not.toBeNull();
    }
    const after = await poolHostRequests(envoy);
    expect(pool.endpoints.map((e) => (after.get(e) ?? 0) - (before.get(e) ?? 0))).toEqual([3, 3]);

    // Scaled to three with the picker still down: the follower renames the pool's new endpoints
    // file over Envoy's, and the same Envoy sends to all three pods, each with its key.
    await stack.k(['scale', 'sgd/llama', '--replicas=3']);
    const three = await eventually(
      () => {
        const last = outcomes.at(-1);
        expect(last?.kind === 'written' ? last.view.endpoints : []).toHaveLength(3);
        return last?.kind === 'written' ? last.view.endpoints : [];
      },
      { timeoutMs: 90_000 },
    );
    await eventually(async () => expect((await poolHostRequests(envoy as RunningEnvoy)).size).toBe(3));
    const beforeThree = await poolHostRequests(envoy);
    for (let i = 0; i < 6; i++) {
      const r = await generate([40 + i, 41, 42, 43], { authorization: 'Bearer wrong' });
      expect(r.status, r.body).toBe(200);
      expect(r.endpoint).toBeNull();
    }
    const afterThree = await poolHostRequests(envoy);
    expect(three.map((e) => (afterThree.get(e) ?? 0) - (beforeThree.get(e) ?? 0))).toEqual([2, 2, 2]);
  });
});
