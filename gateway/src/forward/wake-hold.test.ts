// Wake from zero at the gateway: a request to a sleeping Deployment is held,
// counted in the cache report (what the operator reads as demand), and served
// once the table shows an endpoint; or refused with GW_WAKING after its hold.
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GATEWAY_CACHE_REPORT_PATH, GatewayCacheReport } from '../../../operator/src/api/index.ts';
import { build } from '../app.ts';
import { ManualClock } from '../clock.ts';
import { StaticRoutingTable, type ModelRoute } from '../routing/table.ts';
import { eventually, startFakeUpstream, type FakeUpstream } from '../testing/fake-upstream.ts';
import { buildTestEndpoint, buildTestRoute } from '../testing/routes.ts';

describe('a Deployment waking from zero', () => {
  let up: FakeUpstream;
  let app: FastifyInstance;
  let clock: ManualClock;
  let table: StaticRoutingTable;
  const asleep = (): ModelRoute => ({ ...buildTestRoute([], { reuse: false }), wake: { holdMs: 30_000 } });
  const awake = (): ModelRoute => ({
    ...buildTestRoute([buildTestEndpoint('ns/m-0', up.url)], { reuse: false }),
    wake: { holdMs: 30_000 },
  });

  beforeEach(async () => {
    up = await startFakeUpstream();
    clock = new ManualClock();
    table = new StaticRoutingTable([asleep()]);
    app = build({ table, clock });
  });
  afterEach(async () => {
    await app.close();
    await up.close();
  });

  const send = () =>
    app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      payload: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
    });
  const waking = async () =>
    GatewayCacheReport.parse((await app.inject({ url: GATEWAY_CACHE_REPORT_PATH })).json()).deployments[0]
      ?.waking;

  it('holds the request, says so in the report, and serves it once an endpoint is there', async () => {
    const answer = send().then((r) => r);
    await eventually(() => app.gateway.wakeHolds.heldOf('ns/m') === 1);
    expect(await waking()).toBe(1);
    clock.advance(5_000);
    table.replace([awake()]);
    clock.advance(250);
    const r = await answer;
    expect(r.statusCode).toBe(200);
    expect(up.received).toHaveLength(1);
    expect(await waking()).toBe(0);
  });

  it('answers 503 GW_WAKING with Retry-After when no endpoint came within the hold', async () => {
    const answer = send().then((r) => r);
    await eventually(() => app.gateway.wakeHolds.heldOf('ns/m') === 1);
    clock.advance(30_250);
    const r = await answer;
    expect(r.statusCode).toBe(503);
    expect(r.headers['retry-after']).toBe('10');
    expect(r.json()).toMatchObject({ error: { code: 'GW_WAKING' } });
    expect(up.received).toHaveLength(0);
  });

  it('refuses at once a held request whose Deployment went away, and holds one even with no admission queue', async () => {
    table.replace([{ ...asleep(), admission: { ...asleep().admission, maxQueue: 0 } }]);
    const answer = send().then((r) => r);
    await eventually(() => app.gateway.wakeHolds.heldOf('ns/m') === 1);
    table.replace([]);
    clock.advance(250);
    expect((await answer).json()).toMatchObject({ error: { code: 'GW_MODEL_NOT_FOUND' } });
  });

  it('without wakeOnDemand, no endpoint is 503 GW_NO_ENDPOINT at once, as before', async () => {
    table.replace([buildTestRoute([], { reuse: false })]);
    const r = await send();
    expect(r.json()).toMatchObject({ error: { code: 'GW_NO_ENDPOINT' } });
  });
});
