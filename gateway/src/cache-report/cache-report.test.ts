// The cache report: the prediction window's arithmetic, and GET /cache-report.json through the
// app against a fake upstream (a cache-aware route predicts the repeated prefix it routed).

import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GATEWAY_CACHE_REPORT_PATH, GatewayCacheReport } from '../../../operator/src/api/index.ts';
import { build } from '../app.ts';
import { ManualClock } from '../clock.ts';
import { StaticRoutingTable, type ModelRoute } from '../routing/table.ts';
import { startFakeUpstream, type FakeUpstream } from '../testing/fake-upstream.ts';
import { buildTestEndpoint, buildTestRoute } from '../testing/routes.ts';
import { PredictionCounters } from './prediction-counters.ts';

describe('PredictionCounters', () => {
  it('adds up per Deployment, forgets the ones no longer routed, and names its start', () => {
    const c = new PredictionCounters();
    c.record('ns/a', 100, 60);
    c.record('ns/a', 100, 0);
    c.record('ns/b', 50, 50);
    expect(c.totalsOf('ns/a')).toEqual({ decisions: 2, promptTokens: 200, predictedTokens: 60 });
    c.retain(new Set(['ns/a']));
    expect(c.totalsOf('ns/b')).toEqual({ decisions: 0, promptTokens: 0, predictedTokens: 0 });
    expect(c.instance).not.toBe(new PredictionCounters().instance);
  });
});

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
      { pod: 'a' },
      { pod: 'b', events: expect.objectContaining({ usable: false }) as unknown },
    ]);
  });
});
