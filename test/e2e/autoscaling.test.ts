// Replicas that follow demand. The real HPA controller (kube-controller-manager)
// scales a cacheroute Deployment through its scale subresource on the operator's
// external metric cacheroute_in_flight_requests, read through the real
// aggregation layer from the gateway's load. Clients holding long generations
// drive it from 1 to 3 replicas; when they stop, it goes back to 1. And wake
// from zero: a Deployment at replicas 0 with wakeOnDemand serves its first
// request, held by the gateway while the operator starts it. Real control
// plane, KWOK GPU nodes, a simulator on every pod IP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDeploymentManifest } from '../support/builders.ts';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.ts';
import { eventually } from '../support/kubectl.ts';

let stack: E2eStack;
const k = (args: string[], input?: string) => stack.k(args, input);
const NS = 'e2e-autoscale';

beforeAll(async () => {
  stack = await startE2eStack(NS, { metricsApi: true });
}, 240_000);

afterAll(async () => {
  await stack?.stop();
});

/** `clients` clients, each sending one long generation after another until stopped. */
function holdLoad(clients: number): { stop: () => Promise<number[]> } {
  let running = true;
  const codes: number[] = [];
  const client = async (n: number): Promise<void> => {
    for (let i = 0; running; i++) {
      const r = await stack.gateways[0]?.app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        // A thousand tokens of decode: seconds in flight on the simulator's GPU-like timing.
        payload: {
          model: 'llama-8b',
          max_tokens: 1000,
          messages: [{ role: 'user', content: `client ${n} turn ${i}` }],
        },
      });
      codes.push(r?.statusCode ?? 0);
    }
  };
  const all = Array.from({ length: clients }, (_, n) => client(n));
  return {
    async stop() {
      running = false;
      await Promise.all(all);
      return codes;
    },
  };
}

const replicas = async (): Promise<number> =>
  Number(await k(['get', 'sgd', 'chat', '-o', 'jsonpath={.spec.replicas}']));

describe('autoscaling on the gateway tier’s load', () => {
  it(
    'an HPA on cacheroute_in_flight_requests scales 1 → 3 under load and back to 1 after',
    { timeout: 300_000 },
    async () => {
      await k(
        ['apply', '-f', '-'],
        JSON.stringify(buildDeploymentManifest({ name: 'chat', replicas: 1, gpus: 1 })),
      );
      await eventually(async () => expect((await stack.status('chat')).verifiedReplicas).toBe(1), {
        timeoutMs: 90_000,
      });
      const hpa = {
        apiVersion: 'autoscaling/v2',
        kind: 'HorizontalPodAutoscaler',
        metadata: { name: 'chat' },
        spec: {
          scaleTargetRef: { apiVersion: 'cacheroute.dev/v1alpha1', kind: 'Deployment', name: 'chat' },
          minReplicas: 1,
          maxReplicas: 3,
          metrics: [
            {
              type: 'External',
              external: {
                metric: {
                  name: 'cacheroute_in_flight_requests',
                  selector: {
                    matchLabels: { 'cacheroute.dev/deployment': 'chat', 'cacheroute.dev/part': 'standalone' },
                  },
                },
                // Two requests in flight per replica.
                target: { type: 'AverageValue', averageValue: '2' },
              },
            },
          ],
          behavior: {
            scaleUp: {
              stabilizationWindowSeconds: 0,
              policies: [{ type: 'Pods', value: 3, periodSeconds: 1 }],
            },
            scaleDown: {
              stabilizationWindowSeconds: 0,
              policies: [{ type: 'Pods', value: 3, periodSeconds: 1 }],
            },
          },
        },
      };
      await k(['apply', '-f', '-'], JSON.stringify(hpa));
      // Idle: the HPA reads the metric (0) and keeps the minimum.
      await eventually(
        async () =>
          expect(
            await k([
              'get',
              'hpa',
              'chat',
              '-o',
              'jsonpath={.status.currentMetrics[0].external.current.averageValue}',
            ]),
          ).toBe('0'),
        { timeoutMs: 60_000, intervalMs: 1000 },
      );
      expect(await replicas()).toBe(1);

      const load = holdLoad(6);
      await eventually(async () => expect(await replicas()).toBe(3), { timeoutMs: 90_000, intervalMs: 1000 });
      await eventually(async () => expect((await stack.status('chat')).verifiedReplicas).toBe(3), {
        timeoutMs: 90_000,
      });
      const codes = await load.stop();
      expect(codes.filter((c) => c !== 200)).toEqual([]);

      await eventually(async () => expect(await replicas()).toBe(1), { timeoutMs: 90_000, intervalMs: 1000 });
    },
  );
});

describe('wake from zero', () => {
  it(
    'a request to a sleeping Deployment is held, wakes it, and is served; idle, it sleeps again',
    { timeout: 240_000 },
    async () => {
      const m = buildDeploymentManifest({ name: 'sleepy', replicas: 0, gpus: 1 });
      m.spec['wakeOnDemand'] = true;
      // The shortest idle time the API takes: the test watches it fall asleep again.
      m.spec['wake'] = { replicas: 1, idleSeconds: 30, holdSeconds: 120 };
      m.spec['model'] = { ...(m.spec['model'] as object), servedName: 'sleepy-8b' };
      await k(['apply', '-f', '-'], JSON.stringify(m));
      await eventually(async () => expect((await stack.status('sleepy')).wake).toEqual({ awake: false }), {
        timeoutMs: 60_000,
      });
      expect(await k(['get', 'pods', '-l', 'cacheroute.dev/deployment=sleepy', '-o', 'name'])).toBe('');
      await eventually(
        () => expect(stack.gateways[0]?.watcher.table.lookup('sleepy-8b')?.wake).toBeDefined(),
        {
          timeoutMs: 30_000,
        },
      );

      const started = Date.now();
      const r = await stack.gateways[0]?.app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        payload: {
          model: 'sleepy-8b',
          max_tokens: 4,
          messages: [{ role: 'user', content: 'are you awake?' }],
        },
      });
      expect(r?.statusCode).toBe(200);
      const wokeInMs = Date.now() - started;
      expect(wokeInMs).toBeLessThan(120_000);
      process.stderr.write(`wake from zero: first request answered after ${wokeInMs} ms\n`);
      const awake = await stack.status('sleepy');
      expect(awake.wake?.awake).toBe(true);
      expect(awake.verifiedReplicas).toBe(1);
      // spec.replicas stays what the user (or GitOps) wrote.
      expect(await k(['get', 'sgd', 'sleepy', '-o', 'jsonpath={.spec.replicas}'])).toBe('0');

      // 30 s without a request: back to zero.
      await eventually(async () => expect((await stack.status('sleepy')).wake?.awake).toBe(false), {
        timeoutMs: 90_000,
        intervalMs: 1000,
      });
      await eventually(
        async () =>
          expect(await k(['get', 'pods', '-l', 'cacheroute.dev/deployment=sleepy', '-o', 'name'])).toBe(''),
        { timeoutMs: 60_000, intervalMs: 1000 },
      );
    },
  );
});
