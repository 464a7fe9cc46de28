// The operator's cache-health prober against real parts: SGLang simulators
// that count their prompt and cached tokens as SGLang does, and a real gateway
// listening on a port, whose cache report the prober reads over HTTP. No API
// server is needed here: the Deployment is handed to the prober as the
// informer would hold it (the status write is the e2e test's).
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { build } from '../../../gateway/src/app.ts';
import { StaticRoutingTable } from '../../../gateway/src/routing/table.ts';
import { buildTestEndpoint, buildTestRoute } from '../../support/gateway/routes.ts';
import { validateResource, type DeploymentResource, type Endpoint } from '#api';
import {
  CacheHealthReason,
  EVENTS_GRACE_MS,
} from '../../../operator/src/controllers/deployment/cache-health/assess.ts';
import { CacheHealthProber } from '../../../operator/src/controllers/deployment/cache-health/prober.ts';
import { createLogger } from '#kube/logger.ts';
import { postJson, startSim, type RunningSim } from '../../support/sim/testing.ts';
import { buildDeploymentManifest } from '../../support/builders.ts';

const NS = 'ns';
let sims: RunningSim[] = [];
let gateway: FastifyInstance | undefined;
const stop = new AbortController();

afterEach(async () => {
  await gateway?.close();
  gateway = undefined;
  await Promise.all(sims.map((s) => s.close()));
  sims = [];
});

interface Fleet {
  gatewayUrl: string;
  deployment: DeploymentResource;
}

/** Simulators, a gateway routing to them cache-aware, and the Deployment whose status lists them. */
async function startFleet(simArgs: string[], opts: { deadEvents?: string } = {}): Promise<Fleet> {
  sims = await Promise.all(
    [0, 1].map(() =>
      startSim(['--model-path', 'm', '--enable-cache-report', '--enable-metrics', ...simArgs]),
    ),
  );
  const route = buildTestRoute(
    sims.map((s, i) =>
      buildTestEndpoint(
        `${NS}/m-${i}`, // as discovery names endpoints: namespace/pod
        s.url,
        opts.deadEvents ? { events: { kv: [opts.deadEvents], topic: '', blockSize: 16 } } : {},
      ),
    ),
    { policy: 'cache-aware', reuse: false },
  );
  gateway = build({ table: new StaticRoutingTable([route]) });
  await gateway.listen({ port: 0, host: '127.0.0.1' });
  const parsed = validateResource({
    ...buildDeploymentManifest({ name: 'm' }),
    metadata: { name: 'm', namespace: NS },
  });
  if (!parsed.ok || parsed.value.kind !== 'Deployment') throw new Error('the sample does not parse');
  const endpoints = sims.map((s, i): Endpoint => {
    const url = new URL(s.url);
    return {
      pod: `m-${i}`,
      ip: url.hostname,
      port: Number(url.port),
      role: 'standalone',
      ready: true,
      verified: true,
    };
  });
  return {
    gatewayUrl: `http://127.0.0.1:${(gateway.server.address() as AddressInfo).port}`,
    deployment: { ...parsed.value, status: { endpoints } },
  };
}

function startProber(fleet: Fleet, clock: { now: number }, gatewayAdminUrl = fleet.gatewayUrl) {
  const changed: string[] = [];
  const prober = new CacheHealthProber({
    deployments: () => [fleet.deployment],
    isLeader: () => true,
    onChanged: (key) => changed.push(`${key.namespace}/${key.name}`),
    periodMs: 60_000,
    gatewayAdminUrl,
    logger: createLogger({ level: 'error' }),
    signal: stop.signal,
    now: () => clock.now,
  });
  return { prober, changed, assessment: () => prober.assessmentOf({ namespace: NS, name: 'm' }) };
}

const ids = (from: number, n: number): number[] =>
  Array.from({ length: n }, (_, i) => 300 + ((from + i) % 30000));

/** Turn `turn` of conversation `c`: every earlier turn's tokens, then 100 new ones. */
async function send(gatewayUrl: string, c: number, turn: number): Promise<void> {
  const input = Array.from({ length: turn + 1 }, (_, t) => ids(c * 1_000 + t * 100, 100)).flat();
  const r = await postJson(`${gatewayUrl}/generate`, {
    model: 'm',
    input_ids: input,
    sampling_params: { max_new_tokens: 1 },
  });
  expect(r.status).toBe(200);
}

describe('cache health, measured from the runtimes and the gateway', () => {
  it('is healthy when the runtimes hit what routing predicted, and says so with both figures', async () => {
    const fleet = await startFleet([]);
    const clock = { now: 0 };
    const { prober, changed, assessment } = startProber(fleet, clock);
    await prober.pass();
    expect(assessment()?.condition.reason).toBe(CacheHealthReason.Measuring);
    for (let turn = 0; turn < 4; turn++) for (let c = 0; c < 4; c++) await send(fleet.gatewayUrl, c, turn);
    clock.now += 30_000;
    await prober.pass();
    const a = assessment();
    expect(a?.condition).toMatchObject({ status: 'True', reason: CacheHealthReason.Healthy });
    // 16 requests, 4 conversations of 100, 200, 300, 400 tokens: each turn finds the one before cached.
    expect(a?.cache?.promptTokens).toBe(4 * (100 + 200 + 300 + 400));
    expect(a?.cache?.hitRate).toBeGreaterThan(0.4);
    expect(Math.abs((a?.cache?.hitRate ?? 0) - (a?.cache?.predictedHitRate ?? -1))).toBeLessThan(0.1);
    expect(a?.cache?.windowSeconds).toBe(300);
    expect(changed).toEqual([`${NS}/m`, `${NS}/m`]);
    // Nothing new: the same assessment queues nothing.
    await prober.pass();
    expect(changed).toHaveLength(2);
  });

  it('reports PredictionGap when the runtimes lost what routing believes they hold', async () => {
    const fleet = await startFleet([]);
    const clock = { now: 0 };
    const { prober, assessment } = startProber(fleet, clock);
    await prober.pass();
    for (let c = 0; c < 6; c++) await send(fleet.gatewayUrl, c, 0);
    // The runtimes drop their caches behind the gateway's back (no KV events to tell it).
    for (const s of sims) expect((await fetch(`${s.url}/flush_cache`, { method: 'POST' })).status).toBe(200);
    for (let c = 0; c < 6; c++) await send(fleet.gatewayUrl, c, 1);
    clock.now += 30_000;
    await prober.pass();
    const a = assessment();
    expect(a?.condition).toMatchObject({ status: 'False', reason: CacheHealthReason.PredictionGap });
    expect(a?.cache?.hitRate).toBe(0);
    // The second turns' first halves: 600 of 1,800 prompt tokens.
    expect(a?.cache?.predictedHitRate).toBeCloseTo(0.33, 1);
  });

  it('reads the HiCache host tier of a runtime that has one', async () => {
    const fleet = await startFleet([
      '--enable-hierarchical-cache',
      '--hicache-ratio',
      '2',
      '--page-size',
      '16',
    ]);
    const clock = { now: 0 };
    const { prober, assessment } = startProber(fleet, clock);
    await prober.pass();
    for (let c = 0; c < 3; c++) await send(fleet.gatewayUrl, c, 0);
    clock.now += 30_000;
    await prober.pass();
    const usage = assessment()?.cache?.hostTierUsage;
    expect(usage).toBeGreaterThanOrEqual(0);
    expect(usage).toBeLessThanOrEqual(1);
  });

  it('reports EventsLagging when the gateway cannot use an endpoint’s KV events past the grace', async () => {
    // Port 1: below the ephemeral range, so no port-0 bind takes it; nothing listens there.
    const fleet = await startFleet([], { deadEvents: 'tcp://127.0.0.1:1' });
    const clock = { now: 0 };
    const { prober, assessment } = startProber(fleet, clock);
    await prober.pass();
    for (let turn = 0; turn < 3; turn++) for (let c = 0; c < 4; c++) await send(fleet.gatewayUrl, c, turn);
    clock.now += 30_000;
    await prober.pass();
    // Within the grace a new subscription may still be connecting: no verdict on events yet.
    expect(assessment()?.condition.reason).not.toBe(CacheHealthReason.EventsLagging);
    clock.now += EVENTS_GRACE_MS;
    await prober.pass();
    expect(assessment()?.condition).toMatchObject({
      status: 'False',
      reason: CacheHealthReason.EventsLagging,
    });
    expect(assessment()?.condition.message).toContain('m-0 (');
  });

  it("is Unknown when the gateway cannot be read, with the runtimes' figures and what to fix", async () => {
    const fleet = await startFleet([]);
    const clock = { now: 0 };
    const { prober, assessment } = startProber(fleet, clock, 'http://127.0.0.1:1'); // nothing listens
    await prober.pass();
    for (let turn = 0; turn < 4; turn++) for (let c = 0; c < 3; c++) await send(fleet.gatewayUrl, c, turn);
    clock.now += 30_000;
    await prober.pass();
    const a = assessment();
    expect(a?.condition).toMatchObject({ status: 'Unknown', reason: CacheHealthReason.GatewayUnreadable });
    expect(a?.condition.message).toMatch(
      /could be read \(GET http:\/\/127\.0\.0\.1:\d+\/cache-report\.json: /,
    );
    expect(a?.condition.message).toContain('networkPolicy.metricsFrom');
    expect(a?.cache?.hitRate).toBeGreaterThan(0.4);
  });

  it("windows the gateway's counters as the runtimes': traffic before the window leaves both sides", async () => {
    const fleet = await startFleet([]);
    const clock = { now: 0 };
    const { prober, assessment } = startProber(fleet, clock);
    await prober.pass();
    // Cached traffic, then a window later only new, uncached conversations.
    for (let turn = 0; turn < 4; turn++) for (let c = 0; c < 4; c++) await send(fleet.gatewayUrl, c, turn);
    clock.now += 30_000;
    await prober.pass();
    expect(assessment()?.cache?.predictedHitRate).toBeGreaterThan(0.4);
    clock.now += 300_000;
    await prober.pass();
    for (let c = 10; c < 16; c++) await send(fleet.gatewayUrl, c, 1);
    clock.now += 30_000;
    await prober.pass();
    const a = assessment();
    expect(a?.cache?.hitRate).toBe(0);
    expect(a?.cache?.predictedHitRate).toBe(0);
    expect(a?.condition.reason).toBe(CacheHealthReason.Healthy);
  });
});
