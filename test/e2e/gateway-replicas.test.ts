// Two gateway replicas on the full control plane route as one: a Deployment
// whose runtimes publish KV events (spec.events.kvCache), the operator
// publishes each verified runtime's publishers in status, both replicas
// subscribe to every runtime, and the turns of each conversation alternate
// between the replicas: every follow-up turn reaches the runtime that holds
// its conversation, and the runtime reports the hit. Real control plane, KWOK
// GPU node, a simulator on every pod IP (its event sockets on that IP).
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeploymentStatus } from '../../operator/src/api/index.ts';
import { startOperator, type Operator } from '../../operator/src/operator.ts';
import { createLogger } from '../../operator/src/runtime/logger.ts';
import { createRng, pickInt } from '../../gateway/src/testing/rng.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../support/builders.ts';
import { startControlPlane, type ControlPlane } from '../support/controlplane.ts';
import { startInProcessGateway, type InProcessGateway } from '../support/gateway.ts';
import { eventually, kubectlOk } from '../support/kubectl.ts';
import { REPO_ROOT } from '../support/samples.ts';
import { startSimKubelet, type SimKubelet } from '../support/sim-kubelet.ts';

const NS = 'e2e-gateway-replicas';
let cp: ControlPlane;
let kubelet: SimKubelet;
let operator: Operator;
let gateways: InProcessGateway[] = [];

const k = (args: string[], input?: string) =>
  kubectlOk(['-n', NS, ...args], { kubeconfig: cp.kubeconfig, ...(input ? { input } : {}) });
const status = async (name: string): Promise<DeploymentStatus> =>
  (JSON.parse(await k(['get', 'sgd', name, '-o', 'json'])) as { status?: DeploymentStatus }).status ?? {};

beforeAll(async () => {
  cp = await startControlPlane({ full: true, gpuNodes: 1 });
  const crds = join(REPO_ROOT, 'crds');
  await kubectlOk(['apply', '--server-side', '-f', crds], { kubeconfig: cp.kubeconfig });
  await kubectlOk(['wait', '--for=condition=Established', '--timeout=60s', '-f', crds], {
    kubeconfig: cp.kubeconfig,
  });
  await kubectlOk(['create', 'namespace', NS], { kubeconfig: cp.kubeconfig });
  kubelet = await startSimKubelet({ kubeconfig: cp.kubeconfig });
  operator = await startOperator({
    kubeconfig: cp.kubeconfig,
    logger: createLogger({ level: 'warn' }),
    leaderElection: false,
    http: false,
  });
  gateways = [
    await startInProcessGateway(cp.kubeconfig, [NS]),
    await startInProcessGateway(cp.kubeconfig, [NS]),
  ];
});

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  await operator?.stop();
  await kubelet?.stop();
  await cp?.stop();
});

describe('two gateway replicas', () => {
  it("route every conversation's turns to the runtime that holds it, from the runtimes' KV events", async () => {
    const m = buildDeploymentManifest({ name: 'llama', replicas: 3, gpus: 1 });
    m.spec['events'] = { kvCache: true };
    await k(['apply', '-f', '-'], JSON.stringify(m));
    await k(
      ['apply', '-f', '-'],
      JSON.stringify(buildCachePolicyManifest('team-a', ['llama'], { resultReuse: { enabled: false } })),
    );
    const endpoints = await eventually(
      async () => {
        const s = await status('llama');
        expect(s.verifiedReplicas).toBe(3);
        expect(s.endpoints?.every((e) => e.events?.port === 5557)).toBe(true);
        return s.endpoints ?? [];
      },
      { timeoutMs: 90_000 },
    );
    const ids = endpoints.map((e) => `${NS}/${e.pod}`);
    for (const g of gateways)
      await eventually(
        () => {
          expect(g.watcher.table.lookup('llama-8b')?.endpoints).toHaveLength(3);
          for (const id of ids) expect(g.app.gateway.kvIndex.usability(id)).toEqual({ usable: true });
        },
        { timeoutMs: 30_000 },
      );

    // Six conversations of four turns over /generate with token ids; turn t of conversation c
    // reaches replica (c + t) % 2, so no two consecutive turns go through the same replica.
    const history = Array.from({ length: 6 }, () => [] as number[]);
    let prompt = 0;
    let cached = 0;
    const homes = new Map<number, Set<string>>();
    const rng = createRng(11);
    for (let turn = 0; turn < 4; turn++) {
      // Conversations arrive in a different order each turn (no accidental pattern in the picks).
      const order = [...history.keys()];
      for (let i = order.length - 1; i > 0; i--) {
        const j = pickInt(rng, 0, i);
        [order[i], order[j]] = [order[j] as number, order[i] as number];
      }
      await Promise.all(
        order.map(async (c) => {
          const h = history[c] as number[];
          for (let i = 0; i < 128; i++) h.push(300 + ((c * 7919 + turn * 131 + i * 17) % 30000));
          const g = gateways[(c + turn) % 2];
          const r = await g?.app.inject({
            method: 'POST',
            url: '/generate',
            payload: { model: 'llama-8b', input_ids: h, sampling_params: { max_new_tokens: 1 } },
          });
          expect(r?.statusCode, r?.body).toBe(200);
          const meta = r?.json<{ meta_info: { prompt_tokens: number; cached_tokens: number } }>().meta_info;
          const set = homes.get(c) ?? new Set<string>();
          set.add(String(r?.headers['x-cacheroute-endpoint']));
          homes.set(c, set);
          if (turn > 0) {
            prompt += meta?.prompt_tokens ?? 0;
            cached += meta?.cached_tokens ?? 0;
          }
        }),
      );
      // Between turns the runtimes' events reach both replicas.
      await new Promise((r) => setTimeout(r, 300));
    }
    // Each conversation stayed on one runtime, whichever replica routed each turn.
    for (const [c, set] of homes) expect(set.size, `conversation ${c}`).toBe(1);
    // Follow-up prompts are 1/2 to 3/4 history: the ideal hit rate is about 0.65.
    expect(cached / prompt).toBeGreaterThan(0.6);
  });
});
