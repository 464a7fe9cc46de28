// Wake from zero at the gateway: a request to a sleeping Deployment is held,
// counted in the cache report (what the operator reads as demand), and served
// once the table shows an endpoint; or refused with GW_WAKING after its hold.
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GATEWAY_CACHE_REPORT_PATH, GatewayCacheReport } from '#api';
import { build } from '../app.ts';
import { ManualClock } from '../../../test/support/manual-clock.ts';
import { StaticRoutingTable, type ModelRoute } from '../routing/table.ts';
import {
  eventually,
  startFakeUpstream,
  type FakeUpstream,
} from '../../../test/support/gateway/fake-upstream.ts';
import { buildTestEndpoint, buildTestRoute } from '../../../test/support/gateway/routes.ts';

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

describe('a prefill/decode pair waking from zero', () => {
  let prefill: FakeUpstream;
  let decode: FakeUpstream;
  let app: FastifyInstance;
  let clock: ManualClock;
  let table: StaticRoutingTable;
  const wake = { holdMs: 30_000 };
  const prefillUp = (): ModelRoute['endpoints'][number] =>
    buildTestEndpoint('ns/m-prefill-0', prefill.url, { role: 'prefill', bootstrapPort: 8998 });
  const decodeUp = (): ModelRoute['endpoints'][number] =>
    buildTestEndpoint('ns/m-decode-0', decode.url, { role: 'decode' });
  const pair = (endpoints: ModelRoute['endpoints']): ModelRoute => ({
    ...buildTestRoute(endpoints, { reuse: false }),
    wake,
  });

  beforeEach(async () => {
    prefill = await startFakeUpstream();
    decode = await startFakeUpstream();
    clock = new ManualClock();
    table = new StaticRoutingTable([pair([])]);
    app = build({ table, clock });
  });
  afterEach(async () => {
    await app.close();
    await prefill.close();
    await decode.close();
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

  it('holds the request while only one part is up, and serves it once both parts have routable endpoints', async () => {
    const answer = send().then((r) => r);
    await eventually(() => app.gateway.wakeHolds.heldOf('ns/m') === 1);
    expect(await waking()).toBe(1);
    // The prefill part came up first: not yet a pair.
    table.replace([pair([prefillUp()])]);
    clock.advance(250);
    expect(app.gateway.wakeHolds.heldOf('ns/m')).toBe(1);
    table.replace([pair([prefillUp(), decodeUp()])]);
    clock.advance(250);
    const r = await answer;
    expect(r.statusCode).toBe(200);
    expect(prefill.received).toHaveLength(1);
    expect(decode.received).toHaveLength(1);
    expect(decode.received[0]?.body).toMatchObject({ bootstrap_port: 8998 });
    expect(await waking()).toBe(0);
  });

  it('answers 503 GW_WAKING after the hold when only one part came up', async () => {
    const answer = send().then((r) => r);
    await eventually(() => app.gateway.wakeHolds.heldOf('ns/m') === 1);
    table.replace([pair([decodeUp()])]);
    clock.advance(30_250);
    const r = await answer;
    expect(r.statusCode).toBe(503);
    expect(r.headers['retry-after']).toBe('10');
    expect(r.json()).toMatchObject({ error: { code: 'GW_WAKING' } });
    expect(prefill.received).toHaveLength(0);
    expect(decode.received).toHaveLength(0);
  });
});
