// Two gateway replicas on the full control plane route as one: a Deployment
// whose runtimes publish KV events (spec.events.kvCache), the operator
// publishes each verified runtime's publishers in status, both replicas
// subscribe to every runtime, and the turns of each conversation alternate
// between the replicas: every follow-up turn reaches the runtime that holds
// its conversation, and the runtime reports the hit. Real control plane, KWOK
// GPU node, a simulator on every pod IP (its event sockets on that IP).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRng, shuffle } from '../support/gateway/rng.ts';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../support/builders.ts';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.ts';
import { eventually } from '../support/kubectl.ts';

let stack: E2eStack;

beforeAll(async () => {
  stack = await startE2eStack('e2e-gateway-replicas', { gateways: 2 });
});

afterAll(async () => {
  await stack?.stop();
});

describe('two gateway replicas', () => {
  it("route every conversation's turns to the runtime that holds it, from the runtimes' KV events", async () => {
    const m = buildDeploymentManifest({ name: 'llama', replicas: 3, gpus: 1 });
    m.spec['events'] = { kvCache: true };
    const { k, status, gateways } = stack;
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
    const ids = endpoints.map((e) => `e2e-gateway-replicas/${e.pod}`);
    for (const g of gateways)
      await eventually(
        () => {
          expect(g.watcher.table.lookup('llama-8b')?.endpoints).toHaveLength(3);
          for (const id of ids)
            expect(g.app.gateway.kvIndex.usability(id)).toEqual({ usable: true, partial: false });
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
      const order = shuffle(rng, [...history.keys()]);
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
