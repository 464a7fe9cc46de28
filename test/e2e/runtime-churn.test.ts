// Runtime churn under load loses nothing: four clients keep sending chat
// requests through the gateway while a Deployment scales 3 → 1 and then rolls
// to a new identity (deploymentId and image). A pod being removed leaves
// status at once and keeps serving through its preStop sleep, then drains on SIGTERM (the
// sim-kubelet terminates pods as a kubelet does, by default), so the gateway stops sending to it before it
// stops; a refused connection would still take it out of every pick and the
// retry go to a runtime still standing. Real control plane, KWOK GPU node,
// a simulator on every pod IP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildCachePolicyManifest, buildDeploymentManifest } from '../support/builders.ts';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.ts';
import { eventually } from '../support/kubectl.ts';

let stack: E2eStack;
const k = (args: string[], input?: string) => stack.k(args, input);
const status = (name: string) => stack.status(name);
const simsOf = (name: string): string[] =>
  [...stack.kubelet.sims.keys()].filter((p) => p.startsWith(`${name}-`));

beforeAll(async () => {
  // The kubelet's preStop and SIGTERM run as on a node: its default.
  stack = await startE2eStack('e2e-churn');
});

afterAll(async () => {
  await stack?.stop();
});

/** Four clients sending chats in a loop until stopped; every answer that is not a 200 is a loss. */
function startLoad(): { stop: () => Promise<{ sent: number; lost: string[] }> } {
  let running = true;
  let sent = 0;
  const lost: string[] = [];
  const client = async (n: number): Promise<void> => {
    for (let i = 0; running; i++) {
      const gateway = stack.gateways[0];
      if (!gateway) throw new Error('no gateway');
      const r = await gateway.app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        payload: {
          model: 'llama-8b',
          messages: [{ role: 'user', content: `client ${n} asks question ${i % 5}` }],
          max_tokens: 4,
        },
      });
      sent++;
      if (r.statusCode !== 200) lost.push(`${r.statusCode} ${r.body.slice(0, 160)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const clients = [0, 1, 2, 3].map(client);
  return {
    async stop() {
      running = false;
      await Promise.all(clients);
      return { sent, lost };
    },
  };
}

describe('runtime churn under load', () => {
  it('scaling 3 → 1 loses no request', { timeout: 180_000 }, async () => {
    await k(
      ['apply', '-f', '-'],
      JSON.stringify(buildDeploymentManifest({ name: 'llama', replicas: 3, gpus: 1 })),
    );
    await k(['apply', '-f', '-'], JSON.stringify(buildCachePolicyManifest('team-a', ['llama'])));
    await eventually(async () => expect((await status('llama')).verifiedReplicas).toBe(3), {
      timeoutMs: 90_000,
    });
    await eventually(
      () => expect(stack.gateways[0]?.watcher.table.lookup('llama-8b')?.endpoints).toHaveLength(3),
      {
        timeoutMs: 30_000,
      },
    );
    const load = startLoad();
    await new Promise((r) => setTimeout(r, 1000));
    await k(['scale', 'sgd/llama', '--replicas=1']);
    // Until the two removed runtimes have served out their preStop and stopped.
    await eventually(() => expect(simsOf('llama')).toHaveLength(1), { timeoutMs: 90_000, intervalMs: 500 });
    await new Promise((r) => setTimeout(r, 1000));
    const { sent, lost } = await load.stop();
    expect(lost).toEqual([]);
    expect(sent).toBeGreaterThan(100);
  });

  it('an identity rollout (new deploymentId and image) loses no request', { timeout: 180_000 }, async () => {
    const before = simsOf('llama');
    expect(before).toHaveLength(1);
    const load = startLoad();
    await new Promise((r) => setTimeout(r, 1000));
    const m = buildDeploymentManifest({ name: 'llama', replicas: 1, gpus: 1 });
    m.spec['deploymentId'] = `${String(m.spec['deploymentId'])}-r2`;
    const runtime = m.spec['runtime'] as { image: string };
    runtime.image = `${runtime.image.split('@')[0] ?? ''}@sha256:${'ab'.repeat(32)}`;
    await k(['apply', '-f', '-'], JSON.stringify(m));
    // Until the old runtime is gone and the new one serves.
    await eventually(
      () => {
        const now = simsOf('llama');
        expect(now).toHaveLength(1);
        expect(now[0]).not.toBe(before[0]);
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    await eventually(async () => expect((await status('llama')).verifiedReplicas).toBe(1), {
      timeoutMs: 60_000,
    });
    await new Promise((r) => setTimeout(r, 1000));
    const { sent, lost } = await load.stop();
    expect(lost).toEqual([]);
    expect(sent).toBeGreaterThan(100);
  });
});
