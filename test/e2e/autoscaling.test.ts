// Replicas that follow demand. The real HPA controller (kube-controller-manager)
// scales a cacheroute Deployment through its scale subresource on the operator's
// external metric cacheroute_in_flight_requests, read through the real
// aggregation layer from the gateway's load. Clients holding long generations
// drive it from 1 to 3 replicas; when they stop, it goes back to 1. The same
// for the prefill part of a disaggregated Deployment alone, through its
// DeploymentPart's scale subresource, while its decode part stays. And wake
// from zero: a Deployment at replicas 0 with wakeOnDemand serves its first
// request, held by the gateway while the operator starts it; a prefill/decode
// pair at 0 and 0 the same, both parts at once. Real control
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

/** A thousand tokens of decode: seconds in flight on the simulator's GPU-like timing. */
const longDecode = (n: number, i: number): object => ({
  model: 'llama-8b',
  max_tokens: 1000,
  messages: [{ role: 'user', content: `client ${n} turn ${i}` }],
});

/** `clients` clients, each sending one request after another until stopped. */
function holdLoad(
  clients: number,
  payload: (n: number, i: number) => object = longDecode,
): { stop: () => Promise<number[]> } {
  let running = true;
  const codes: number[] = [];
  const client = async (n: number): Promise<void> => {
    for (let i = 0; running; i++) {
      const r = await stack.gateways[0]?.app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        payload: payload(n, i),
      });
      codes.push(r?.statusCode ?? 0);
      // Said where it happens: the assertion after only counts them.
      if (r?.statusCode !== 200) process.stderr.write(`load: answered ${r?.statusCode} ${r?.body}\n`);
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

/** An External metric of the tier's, for one Deployment part. */
const externalMetric = (name: string, deployment: string, part: string, target: object): object => ({
  type: 'External',
  external: {
    metric: {
      name,
      selector: { matchLabels: { 'cacheroute.dev/deployment': deployment, 'cacheroute.dev/part': part } },
    },
    target,
  },
});

/** An HPA of 1..3 replicas that scales at once both ways (no stabilization), so a test is quick. */
const buildQuickHpa = (name: string, kind: string, metrics: readonly object[]): object => {
  const atOnce = { stabilizationWindowSeconds: 0, policies: [{ type: 'Pods', value: 3, periodSeconds: 1 }] };
  return {
    apiVersion: 'autoscaling/v2',
    kind: 'HorizontalPodAutoscaler',
    metadata: { name },
    spec: {
      scaleTargetRef: { apiVersion: 'cacheroute.dev/v1alpha1', kind, name },
      minReplicas: 1,
      maxReplicas: 3,
      metrics,
      behavior: { scaleUp: atOnce, scaleDown: atOnce },
    },
  };
};

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
      const hpa = buildQuickHpa('chat', 'Deployment', [
        // Two requests in flight per replica.
        externalMetric('cacheroute_in_flight_requests', 'chat', 'standalone', {
          type: 'AverageValue',
          averageValue: '2',
        }),
      ]);
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

// The two wake tests run at once: each spends most of its time waiting out idleSeconds (30 s, the
// shortest the API takes) and the pods' end, with nothing to do; apart, they waited in turn.
// Each has its own Deployment, served name and pods (label selectors), and the gateway serves both.
describe.concurrent('wake from zero', () => {
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
      // 200, not 503 GW_WAKING: the gateway held it until the Deployment was routable,
      // within holdSeconds. How long that took is a figure for the log, not a bound.
      expect(r?.statusCode).toBe(200);
      const wokeInMs = Date.now() - started;
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

  it(
    'a request to a pair at 0 and 0 is held, wakes both parts, and is served; idle, both sleep again',
    { timeout: 180_000 },
    async () => {
      const m = buildDeploymentManifest({ name: 'sleepy-pd', gpus: 1 });
      delete m.spec['replicas'];
      delete m.spec['profile'];
      m.spec['deploymentId'] = 'llama-3-1-8b-sleepy-pd-r1';
      m.spec['model'] = { ...(m.spec['model'] as object), servedName: 'sleepy-pd-8b' };
      m.spec['disaggregation'] = {
        transferBackend: 'mooncake_tcp',
        prefill: { replicas: 0 },
        decode: { replicas: 0 },
      };
      m.spec['wakeOnDemand'] = true;
      m.spec['wake'] = { replicas: 1, idleSeconds: 30, holdSeconds: 120 };
      await k(['apply', '-f', '-'], JSON.stringify(m));
      await eventually(async () => expect((await stack.status('sleepy-pd')).wake).toEqual({ awake: false }), {
        timeoutMs: 60_000,
      });
      const pods = () => k(['get', 'pods', '-l', 'cacheroute.dev/deployment=sleepy-pd', '-o', 'name']);
      expect(await pods()).toBe('');
      await eventually(
        () => expect(stack.gateways[0]?.watcher.table.lookup('sleepy-pd-8b')?.wake).toBeDefined(),
        { timeoutMs: 30_000 },
      );

      const started = Date.now();
      const r = await stack.gateways[0]?.app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        payload: {
          model: 'sleepy-pd-8b',
          max_tokens: 4,
          messages: [{ role: 'user', content: 'are you both awake?' }],
        },
      });
      // 200, not 503 GW_WAKING: held until both parts were routable, within holdSeconds.
      expect(r?.statusCode).toBe(200);
      const wokeInMs = Date.now() - started;
      process.stderr.write(`wake from zero (pair): first request answered after ${wokeInMs} ms\n`);
      const awake = await stack.status('sleepy-pd');
      expect(awake.wake?.awake).toBe(true);
      // Status shows what runs; the parts' and the Deployment's specs stay what was written.
      expect(awake.parts).toEqual([
        expect.objectContaining({ part: 'prefill', replicas: 1, verifiedReplicas: 1 }),
        expect.objectContaining({ part: 'decode', replicas: 1, verifiedReplicas: 1 }),
      ]);
      for (const part of ['prefill', 'decode'])
        expect(await k(['get', 'sgdpart', `sleepy-pd-${part}`, '-o', 'jsonpath={.spec.replicas}'])).toBe('0');
      expect(
        await k(['get', 'sgd', 'sleepy-pd', '-o', 'jsonpath={.spec.disaggregation.decode.replicas}']),
      ).toBe('0');

      // 30 s without a request: both parts back to zero.
      await eventually(async () => expect((await stack.status('sleepy-pd')).wake?.awake).toBe(false), {
        timeoutMs: 90_000,
        intervalMs: 1000,
      });
      await eventually(async () => expect(await pods()).toBe(''), { timeoutMs: 60_000, intervalMs: 1000 });
    },
  );
});

/**
 * Four thousand prompt tokens (a simulator word each) after a prefix of its own, and a short
 * answer: a prefill step of half a second per request at the simulator's 8,000 tokens/s, so the
 * requests wait at the prefill part and hardly at the decode part.
 */
const FILLER = ' ba'.repeat(4000);
const longPrefill = (n: number, i: number): object => ({
  model: 'pd-8b',
  max_tokens: 4,
  messages: [{ role: 'user', content: `client ${n} turn ${i}${FILLER}` }],
});

describe('the prefill part scales apart', () => {
  it(
    'an HPA on the prefill DeploymentPart scales it 1 → 3 under prefill load and back to 1; decode stays at 1',
    { timeout: 240_000 },
    async () => {
      const m = buildDeploymentManifest({ name: 'pd', gpus: 1 });
      delete m.spec['replicas'];
      delete m.spec['profile'];
      m.spec['deploymentId'] = 'llama-3-1-8b-pd-r1';
      m.spec['model'] = { ...(m.spec['model'] as object), servedName: 'pd-8b' };
      m.spec['disaggregation'] = {
        transferBackend: 'mooncake_tcp',
        prefill: { replicas: 1 },
        decode: { replicas: 1 },
      };
      const started = Date.now();
      await k(['apply', '-f', '-'], JSON.stringify(m));
      await eventually(async () => expect((await stack.status('pd')).routable?.value).toBe(true), {
        timeoutMs: 90_000,
      });
      const partReplicas = async (part: string): Promise<number> =>
        Number(await k(['get', 'sgdpart', `pd-${part}`, '-o', 'jsonpath={.spec.replicas}']));
      const hpa = buildQuickHpa('pd-prefill', 'DeploymentPart', [
        // One request at the prefill part per prefill replica: six clients hold 3 replicas
        // with room to spare (a scale-down under load would cut requests short here, where
        // a deleted pod's simulator stops at once).
        externalMetric('cacheroute_in_flight_requests', 'pd', 'prefill', {
          type: 'AverageValue',
          averageValue: '1',
        }),
        // The prefill part's own signal (docs/operations.md#prefill-and-decode-scale-apart).
        externalMetric('cacheroute_prefill_backlog_seconds', 'pd', 'prefill', { type: 'Value', value: '1' }),
      ]);
      await k(['apply', '-f', '-'], JSON.stringify(hpa));
      // Idle: the HPA reads the prefill part's metrics (0 in flight, 0 s of backlog) through the
      // aggregator, scales the part through its /scale, and keeps 1.
      await eventually(
        async () =>
          expect(
            await k([
              'get',
              'hpa',
              'pd-prefill',
              '-o',
              'jsonpath={.status.currentMetrics[0].external.current.averageValue} {.status.currentMetrics[1].external.current.value}',
            ]),
          ).toBe('0 0'),
        { timeoutMs: 60_000, intervalMs: 1000 },
      );
      expect(await partReplicas('prefill')).toBe(1);

      const load = holdLoad(6, longPrefill);
      await eventually(async () => expect(await partReplicas('prefill')).toBe(3), {
        timeoutMs: 90_000,
        intervalMs: 1000,
      });
      await eventually(
        async () =>
          expect((await stack.status('pd')).parts).toEqual([
            expect.objectContaining({ part: 'prefill', replicas: 3, verifiedReplicas: 3 }),
            expect.objectContaining({ part: 'decode', replicas: 1, verifiedReplicas: 1 }),
          ]),
        { timeoutMs: 90_000 },
      );
      // Under load the predicted backlog is known too (each prefill endpoint learned its rate).
      await eventually(
        async () =>
          expect(
            await k([
              'get',
              'hpa',
              'pd-prefill',
              '-o',
              'jsonpath={.status.currentMetrics[1].external.current.value}',
            ]),
          ).not.toMatch(/^0?$/),
        { timeoutMs: 30_000, intervalMs: 1000 },
      );
      // The decode part was not scaled: its declared value stands, and so does the parent's spec.
      expect(await partReplicas('decode')).toBe(1);
      expect(await k(['get', 'sgd', 'pd', '-o', 'jsonpath={.spec.disaggregation.prefill.replicas}'])).toBe(
        '1',
      );
      const codes = await load.stop();
      expect(codes.length).toBeGreaterThan(0);
      expect(codes.filter((c) => c !== 200)).toEqual([]);

      await eventually(async () => expect(await partReplicas('prefill')).toBe(1), {
        timeoutMs: 90_000,
        intervalMs: 1000,
      });
      expect(await partReplicas('decode')).toBe(1);
      process.stderr.write(
        `prefill part 1 → 3 → 1 in ${Date.now() - started} ms (${codes.length} requests, all 200)\n`,
      );
    },
  );
});
