// GET /cache-report.json through the app against a fake upstream (a cache-aware route predicts
// the repeated prefix it routed).

import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Admission, GATEWAY_CACHE_REPORT_PATH, GatewayCacheReport } from '#api';
import { build } from '../app.ts';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { StaticRoutingTable, type ModelRoute } from '../routing/table.ts';
import {
  eventually,
  Gate,
  startFakeUpstream,
  type FakeUpstream,
} from '../../../test/support/gateway/fake-upstream.ts';
import { buildTestEndpoint, buildTestRoute } from '../../../test/support/gateway/routes.ts';

describe('GET /cache-report.json', () => {
  let up: FakeUpstream;
  let app: FastifyInstance;
  const route = (): ModelRoute =>
    buildTestRoute(
      [
        buildTestEndpoint('ns/a', up.url),
        buildTestEndpoint('ns/b', up.url, {
          events: { kv: ['tcp://127.0.0.1:1'], topic: 'kv', blockSize: 16 },
        }),
      ],
      { policy: 'cache-aware', reuse: false },
    );

  beforeEach(async () => {
    up = await startFakeUpstream();
    app = build({ table: new StaticRoutingTable([route()]), clock: new ManualClock() });
  });
  afterEach(async () => {
    await app.close();
    await up.close();
  });

  const report = async () => {
    const r = await app.inject({ url: GATEWAY_CACHE_REPORT_PATH });
    expect(r.statusCode).toBe(200);
    return GatewayCacheReport.parse(r.json());
  };

  it('reports what routing predicted for the Deployment, and each endpoint’s event index', async () => {
    expect((await report()).deployments).toEqual([
      expect.objectContaining({ deployment: 'ns/m', decisions: 0, promptTokens: 0, predictedTokens: 0 }),
    ]);
    const content = 'the same long system prompt, repeated on every request of this conversation. '.repeat(8);
    for (let i = 0; i < 3; i++) {
      const r = await app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        payload: { model: 'm', messages: [{ role: 'user', content }] },
      });
      expect(r.statusCode).toBe(200);
    }
    const [d] = (await report()).deployments;
    expect(d?.decisions).toBe(3);
    expect(d?.promptTokens).toBeGreaterThan(0);
    // The first request found nothing; the next two went where the prefix had been routed.
    expect(d?.predictedTokens).toBeGreaterThan(0.5 * ((2 / 3) * (d?.promptTokens ?? 0)));
    expect(d?.predictedTokens).toBeLessThan(d?.promptTokens ?? 0);
    expect(d?.endpoints).toEqual([
      { pod: 'a', role: 'standalone', load: expect.objectContaining({ inFlight: 0 }) as unknown },
      {
        pod: 'b',
        role: 'standalone',
        events: expect.objectContaining({ usable: false }) as unknown,
        load: expect.objectContaining({ inFlight: 0 }) as unknown,
      },
    ]);
  });
});

describe('GET /cache-report.json: the load an autoscaler reads', () => {
  let up: FakeUpstream;
  let app: FastifyInstance;

  beforeEach(async () => {
    up = await startFakeUpstream();
    up.headGate = new Gate();
    // One request runs and one waits; a third is refused for load.
    const route = buildTestRoute(
      [buildTestEndpoint('ns/a', up.url)],
      {},
      { admission: Admission.parse({ adaptive: false, maxConcurrency: 1, maxQueue: 1 }) },
    );
    app = build({
      table: new StaticRoutingTable([route]),
      clock: new ManualClock(),
      runtimeLoad: (id) => (id === 'ns/a' ? { queued: 3, tokenUsage: 0.5 } : undefined),
    });
  });
  afterEach(async () => {
    up.headGate.open();
    await app.close();
    await up.close();
  });

  const send = () =>
    app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      payload: { model: 'm', messages: [{ role: 'user', content: 'a prompt of some length to prefill' }] },
    });
  const deployment = async () => {
    const r = await app.inject({ url: GATEWAY_CACHE_REPORT_PATH });
    return GatewayCacheReport.parse(r.json()).deployments[0];
  };

  it('counts what is queued, in flight and refused, and each endpoint’s own and runtime load', async () => {
    const running = send();
    await eventually(() => up.headGate.waiting === 1);
    const waiting = send();
    await eventually(() => app.gateway.admission.loadOf('ns/m').queued === 1);
    const refused = await send();
    expect(refused.statusCode).toBe(429);

    const d = await deployment();
    expect(d?.admission).toEqual({ queued: 1, inFlight: 1, admitted: 1, rejected: 1 });
    expect(d?.endpoints[0]?.load).toEqual({
      inFlight: 1,
      pendingPrefillTokens: expect.any(Number) as unknown,
      prefillTokensPerSecond: null,
      runtimeQueued: 3,
      tokenUsage: 0.5,
    });
    expect(d?.endpoints[0]?.load?.pendingPrefillTokens).toBeGreaterThan(0);

    up.headGate.open();
    expect((await running).statusCode).toBe(200);
    expect((await waiting).statusCode).toBe(200);
    const after = await deployment();
    expect(after?.admission).toEqual({ queued: 0, inFlight: 0, admitted: 2, rejected: 1 });
    expect(after?.endpoints[0]?.load?.inFlight).toBe(0);
  });
});
