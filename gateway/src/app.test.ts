import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { build } from './app.ts';
import { ManualClock } from '../../test/support/manual-clock.ts';
import type { TierLoad } from './endpoints/book.ts';
import type { CacheAwarePolicy } from './policies/cache-aware.ts';
import { StaticRoutingTable, type ModelRoute, type RouteEndpoint } from './routing/table.ts';
import {
  eventually,
  Gate,
  startFakeUpstream,
  type FakeUpstream,
} from '../../test/support/gateway/fake-upstream.ts';

let a: FakeUpstream;
let b: FakeUpstream;
let app: FastifyInstance;
let table: StaticRoutingTable;

function endpoint(id: string, up: FakeUpstream, over: Partial<RouteEndpoint> = {}): RouteEndpoint {
  return { id, url: up.url, role: 'standalone', fingerprint: 'fp1', verified: true, ready: true, ...over };
}

function route(
  over: Partial<ModelRoute> = {},
  settings: { routing?: object; admission?: object; reuse?: object } = {},
): ModelRoute {
  return {
    model: 'm',
    deployment: 'ns/m',
    fingerprint: 'fp1',
    salt: 'ns-policy',
    routing: RoutingSettings.parse({ policy: 'round-robin', ...settings.routing }),
    admission: Admission.parse({ adaptive: false, ...settings.admission }),
    reuse: ResultReuse.parse({ ...settings.reuse }),
    endpoints: [endpoint('a', a), endpoint('b', b)],
    ...over,
  };
}

async function listen(): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

const chat = (over: object = {}) => ({
  model: 'm',
  messages: [{ role: 'user', content: 'hello there' }],
  ...over,
});
const post = (url: string, body: object) => ({ method: 'POST' as const, url, payload: body });
const inFlight = () => app.gateway.inFlightOf('a') + app.gateway.inFlightOf('b');
const metricsText = async () => (await app.inject({ url: '/metrics' })).body;

beforeEach(async () => {
  a = await startFakeUpstream();
  b = await startFakeUpstream();
  table = new StaticRoutingTable([route()]);
  app = build({ table, clock: new ManualClock() });
});

afterEach(async () => {
  await app.close();
  await a.close();
  await b.close();
});

describe('service routes', () => {
  it('health, readiness, models, metrics', async () => {
    expect((await app.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok' });
    expect((await app.inject({ url: '/readyz' })).statusCode).toBe(200);
    table.ready = false;
    expect((await app.inject({ url: '/readyz' })).statusCode).toBe(503);
    expect((await app.inject({ url: '/v1/models' })).json()).toMatchObject({
      data: [{ id: 'm', object: 'model' }],
    });
    await app.inject(post('/v1/chat/completions', chat()));
    const metrics = await app.inject({ url: '/metrics' });
    expect(metrics.body).toContain('cacheroute_gateway_routing_decisions_total');
    expect(metrics.body).toContain(
      'cacheroute_gateway_requests_total{model="m",route="/v1/chat/completions",code="200"} 1',
    );
  });

  it('counts a streamed request in requests_total, as a whole one', async () => {
    const streamed = await app.inject(post('/v1/chat/completions', chat({ stream: true })));
    expect(streamed.statusCode).toBe(200);
    expect(streamed.body).toContain('data: [DONE]');
    await app.inject(post('/v1/chat/completions', chat()));
    expect(await metricsText()).toContain(
      'cacheroute_gateway_requests_total{model="m",route="/v1/chat/completions",code="200"} 2',
    );
  });

  it.each([
    [
      'no messages',
      '/v1/chat/completions',
      { model: 'm', messages: [] },
      400,
      'GW_BAD_REQUEST',
      'messages: at least one message is required',
    ],
    ['unknown model', '/v1/chat/completions', chat({ model: 'x' }), 404, 'GW_MODEL_NOT_FOUND', "Model 'x'"],
    [
      'generate without text or ids',
      '/generate',
      { model: 'm' },
      400,
      'GW_BAD_REQUEST',
      'exactly one of text',
    ],
    ['unknown route', '/v2/nothing', {}, 404, 'GW_NOT_FOUND', 'No route POST /v2/nothing'],
  ])('%s', async (_name, url, body, status, code, message) => {
    const res = await app.inject(post(url, body));
    expect(res.statusCode).toBe(status);
    expect(res.json()).toMatchObject({
      error: { code, message: expect.stringContaining(message) as unknown },
    });
  });

  it('malformed JSON is a 400 with a stable code', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      payload: '{',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'GW_BAD_REQUEST' } });
  });
});

describe('forwarding', () => {
  it('stamps the policy salt; a client salt is combined, never used alone', async () => {
    await app.inject(post('/v1/chat/completions', chat()));
    await app.inject(post('/v1/chat/completions', chat({ cache_salt: 'other-tenant' })));
    const salts = [...a.received, ...b.received].map((r) => r.body['cache_salt'] as string);
    expect(salts[0]).toBe('ns-policy');
    expect(salts[1]).toMatch(/^ns-policy\.[0-9a-f]{16}$/);
  });

  it('native /generate: model chosen from the body, removed before forwarding', async () => {
    const res = await app.inject(
      post('/generate', { model: 'm', text: 'hi', sampling_params: { max_new_tokens: 2 } }),
    );
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ text: 'ab' });
    const sent = [...a.received, ...b.received][0]?.body;
    expect(sent).not.toHaveProperty('model');
    expect(sent).toMatchObject({ text: 'hi', cache_salt: 'ns-policy' });
  });

  it('never routes to unready, unverified or disaggregated endpoints', async () => {
    table.replace([
      route({
        endpoints: [
          endpoint('a', a, { verified: false }),
          endpoint('b', b, { ready: false }),
          endpoint('c', b, { role: 'decode' }),
        ],
      }),
    ]);
    const res = await app.inject(post('/v1/chat/completions', chat()));
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ error: { code: 'GW_NO_ENDPOINT' } });
    expect(a.received.length + b.received.length).toBe(0);
    // Discovery is visible in the metrics: what is known, and why it is not routed to.
    const text = await metricsText();
    expect(text).toContain('cacheroute_gateway_endpoints{model="m",role="standalone",state="unverified"} 1');
    expect(text).toContain('cacheroute_gateway_endpoints{model="m",role="standalone",state="not_ready"} 1');
    expect(text).toContain('cacheroute_gateway_endpoints{model="m",role="decode",state="routable"} 1');
    table.replace([]);
    expect(await metricsText()).not.toContain('cacheroute_gateway_endpoints{');
  });

  it('retries on another endpoint before the first byte', async () => {
    a.mode = 'fail';
    const first = await app.inject(post('/v1/chat/completions', chat())); // round-robin starts at a
    expect(first.statusCode).toBe(200);
    expect(first.headers['x-cacheroute-endpoint']).toBe('b');
    expect(a.received).toHaveLength(1);
    expect(inFlight()).toBe(0);
    expect(await metricsText()).toContain(
      'cacheroute_gateway_upstream_failures_total{endpoint="a",reason="status"} 1',
    );
  });

  // ADR 0057: the stamp is the chosen endpoint's; a retry to another is stamped for that one.
  it('stamps a retry for the endpoint it goes to, and not where that one does not order by priority', async () => {
    table.replace([route({ endpoints: [endpoint('a', a, { priorityScheduling: true }), endpoint('b', b)] })]);
    a.mode = 'fail';
    const res = await app.inject(post('/v1/chat/completions', chat())); // round-robin starts at a
    expect(res.headers['x-cacheroute-endpoint']).toBe('b');
    expect(a.received[0]?.body).toHaveProperty('priority', 1);
    expect(b.received[0]?.body).not.toHaveProperty('priority');
    // Counted per stamped body sent: a's, not b's.
    expect(await metricsText()).toContain(
      'cacheroute_gateway_runtime_priority_stamps_total{model="m",bucket="short"} 1\n',
    );
  });

  // ADR 0036's burst test reads the tier's arrivals: a retry is the same client request, not another.
  it('counts a retried request as one arrival at the tier', async () => {
    const arrivals: number[] = [];
    const tierLoad: TierLoad = {
      update: () => undefined,
      peersOf: () => undefined,
      notePick: (at) => void arrivals.push(at),
    };
    await app.close();
    app = build({ table, clock: new ManualClock(), tierLoad });
    a.mode = 'fail';
    const res = await app.inject(post('/v1/chat/completions', chat())); // round-robin starts at a
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-cacheroute-endpoint']).toBe('b');
    expect(a.received).toHaveLength(1);
    expect(arrivals).toHaveLength(1);
  });

  it('does not retry an answer that broke after its first byte', async () => {
    a.mode = 'break';
    const res = await app.inject(post('/v1/chat/completions', chat())); // round-robin starts at a
    expect(res.statusCode).toBe(502);
    expect(res.json()).toMatchObject({ error: { code: 'GW_UPSTREAM_ERROR' } });
    expect(a.received).toHaveLength(1);
    expect(b.received).toHaveLength(0);
    expect(inFlight()).toBe(0);
    expect(await metricsText()).toContain(
      'cacheroute_gateway_upstream_failures_total{endpoint="a",reason="interrupted"} 1',
    );
  });

  it('retries when an endpoint refuses connections', async () => {
    await a.close();
    const res = await app.inject(post('/v1/chat/completions', chat()));
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-cacheroute-endpoint']).toBe('b');
    expect(await metricsText()).toContain(
      'cacheroute_gateway_upstream_failures_total{endpoint="a",reason="connect"} 1',
    );
  });

  it('an endpoint that refused a connection leaves every pick at once, before the table says so', async () => {
    await a.close();
    // Round-robin would send every other request to a; after its first refusal none goes there.
    for (let i = 0; i < 6; i++) {
      const res = await app.inject(post('/v1/chat/completions', chat()));
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-cacheroute-endpoint']).toBe('b');
    }
    expect(b.received).toHaveLength(6);
    expect(await metricsText()).toContain(
      'cacheroute_gateway_upstream_failures_total{endpoint="a",reason="connect"} 1',
    );
    expect(app.gateway.standing.list()).toEqual([
      expect.objectContaining({ id: 'a', reason: 'ECONNREFUSED' }),
    ]);
  });

  it('a 5xx answer is a failed attempt, not a gone endpoint', async () => {
    a.mode = 'fail';
    await app.inject(post('/v1/chat/completions', chat()));
    expect(app.gateway.standing.list()).toEqual([]);
  });

  it('all endpoints failing → 502 without upstream text', async () => {
    a.mode = 'fail';
    b.mode = 'fail';
    const res = await app.inject(post('/v1/chat/completions', chat()));
    expect(res.statusCode).toBe(502);
    expect(res.json()).toMatchObject({ error: { code: 'GW_UPSTREAM_ERROR' } });
    expect(res.body).not.toContain('secret');
    expect(inFlight()).toBe(0);
  });
});

describe('admission', () => {
  it('over the bound → 429 with Retry-After; the held request still completes', async () => {
    table.replace([route({}, { admission: { maxConcurrency: 1, maxQueue: 0 } })]);
    a.headGate = new Gate();
    b.headGate = new Gate();
    const held = app.inject(post('/v1/chat/completions', chat()));
    await eventually(() => a.headGate.waiting + b.headGate.waiting === 1);
    const rejected = await app.inject(post('/v1/chat/completions', chat()));
    expect(rejected.statusCode).toBe(429);
    expect(rejected.headers['retry-after']).toMatch(/^\d+$/);
    expect(rejected.json()).toMatchObject({ error: { code: 'GW_OVERLOADED', type: 'rate_limit_error' } });
    a.headGate.open();
    b.headGate.open();
    expect((await held).statusCode).toBe(200);
    expect(inFlight()).toBe(0);
  });

  it('draining → 503', async () => {
    app.gateway.admission
      .get('ns/m', { maxConcurrency: 64, maxQueue: 256, queueTimeoutMs: 30_000, adaptive: false })
      .drain();
    const res = await app.inject(post('/v1/chat/completions', chat()));
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ error: { code: 'GW_DRAINING' } });
  });
});

describe('result reuse', () => {
  beforeEach(() => table.replace([route({}, { reuse: { enabled: true } })]));

  it('a repeated greedy request is answered from the store with zero new generation', async () => {
    const first = await app.inject(post('/v1/chat/completions', chat({ temperature: 0 })));
    const second = await app.inject(
      post('/v1/chat/completions', chat({ temperature: 0, user: 'someone-else' })),
    );
    expect(a.received.length + b.received.length).toBe(1);
    expect(first.headers['x-cacheroute-reused']).toBeUndefined();
    expect(second.headers['x-cacheroute-reused']).toBe('store');
    expect(second.json()).toMatchObject({
      choices: [{ message: { content: 'ab' } }],
      usage: {
        prompt_tokens: 0,
        completion_tokens: 0,
        total_tokens: 0,
        reused_usage: { completion_tokens: 2 },
      },
    });
  });

  it('concurrent identical requests generate once', async () => {
    a.headGate = new Gate();
    b.headGate = new Gate();
    const r1 = app.inject(post('/v1/chat/completions', chat({ temperature: 0 })));
    await eventually(() => a.received.length + b.received.length === 1);
    const r2 = app.inject(post('/v1/chat/completions', chat({ temperature: 0 })));
    await eventually(() => app.gateway.reuseWaiting === 1);
    a.headGate.open();
    b.headGate.open();
    const [x, y] = await Promise.all([r1, r2]);
    expect(x.statusCode).toBe(200);
    expect(y.headers['x-cacheroute-reused']).toBe('inflight');
    expect(a.received.length + b.received.length).toBe(1);
  });

  it.each([
    ['sampled (temperature 0.7)', { temperature: 0.7 }],
    ['streaming', { temperature: 0, stream: true }],
  ])('%s requests are not reused', async (_name, over) => {
    await app.inject(post('/v1/chat/completions', chat(over)));
    await app.inject(post('/v1/chat/completions', chat(over)));
    expect(a.received.length + b.received.length).toBe(2);
  });

  it('an answer from an old-revision endpoint is not stored', async () => {
    table.replace([
      route({ endpoints: [endpoint('a', a, { fingerprint: 'fp0' })] }, { reuse: { enabled: true } }),
    ]);
    await app.inject(post('/v1/chat/completions', chat({ temperature: 0 })));
    await app.inject(post('/v1/chat/completions', chat({ temperature: 0 })));
    expect(a.received).toHaveLength(2);
  });
});

describe('streaming over real HTTP', () => {
  it('passes chunks through as they arrive, then completes and releases the endpoint', async () => {
    const base = await listen();
    a.streamGate = new Gate();
    b.streamGate = new Gate();
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat({ stream: true })),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain('"content":"a"'); // arrived while the upstream is still held
    expect(inFlight()).toBe(1);
    a.streamGate.open();
    b.streamGate.open();
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read())
      rest += new TextDecoder().decode(r.value);
    expect(rest).toContain('data: [DONE]');
    await eventually(() => inFlight() === 0);
  });

  it('a stream leaves the cache-aware prefill backlog at its first chunk, not at its end', async () => {
    table.replace([route({}, { routing: { policy: 'cache-aware' } })]);
    const base = await listen();
    for (const up of [a, b]) {
      up.headGate = new Gate();
      up.streamGate = new Gate();
    }
    const backlog = () => {
      const p = app.gateway.policyOf('ns/m') as CacheAwarePolicy | undefined;
      return (p?.backlogTokens('a') ?? 0) + (p?.backlogTokens('b') ?? 0);
    };
    const res = fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat({ stream: true, messages: [{ role: 'user', content: 'y'.repeat(2000) }] })),
    });
    await eventually(() => a.headGate.waiting + b.headGate.waiting === 1);
    expect(backlog()).toBeGreaterThan(0); // sent, prefill not over
    a.headGate.open();
    b.headGate.open();
    const reader = ((await res).body as ReadableStream<Uint8Array>).getReader();
    await reader.read(); // the first chunk
    await eventually(() => backlog() === 0);
    expect(inFlight()).toBe(1); // still streaming
    a.streamGate.open();
    b.streamGate.open();
    while (!(await reader.read()).done);
    await eventually(() => inFlight() === 0);
  });

  it('least-load weighs the prefill backlog it predicts from learned prefill rates', async () => {
    await app.close();
    const clock = new ManualClock();
    app = build({ table, clock });
    table.replace([route({}, { routing: { policy: 'least-load' } })]);
    const base = await listen();
    const send = (content: string) =>
      fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(chat({ stream: true, messages: [{ role: 'user', content }] })),
      });
    const endpointOf = async (res: Promise<Response>) => (await res).headers.get('x-cacheroute-endpoint');
    // Learn each endpoint's rate: a short prompt alone, 1 s to its first byte.
    for (const up of [a, b]) {
      up.headGate = new Gate();
      const learning = send('hello');
      await eventually(() => up.headGate.waiting === 1);
      clock.advance(1000);
      up.headGate.open();
      await (await learning).text();
    }
    // a: a long prompt not yet past prefill. b: a stream past its first byte. One request each.
    a.headGate = new Gate();
    const long = send('z'.repeat(20_000));
    await eventually(() => a.headGate.waiting === 1);
    b.streamGate = new Gate();
    const held = send('hello');
    expect(await endpointOf(held)).toBe('b');
    // Equal in-flight counts (the rotation alone would pick a): a's backlog sends it to b.
    const last = send('hello');
    await eventually(() => a.received.length + b.received.length === 5);
    expect(b.received).toHaveLength(3);
    a.headGate.open();
    b.streamGate.open();
    for (const res of [long, held, last]) await (await res).text();
    await eventually(() => inFlight() === 0);
  });

  it('a client abort mid-stream aborts the upstream and releases the endpoint', async () => {
    const base = await listen();
    a.streamGate = new Gate();
    b.streamGate = new Gate();
    const client = new AbortController();
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat({ stream: true })),
      signal: client.signal,
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    client.abort();
    await eventually(() => a.aborted.count + b.aborted.count === 1);
    await eventually(() => inFlight() === 0);
  });

  it('a client abort before the answer aborts the upstream (non-streaming)', async () => {
    const base = await listen();
    a.headGate = new Gate();
    b.headGate = new Gate();
    const client = new AbortController();
    const pending = fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat()),
      signal: client.signal,
    }).catch((e: unknown) => e);
    await eventually(() => a.headGate.waiting + b.headGate.waiting === 1);
    expect(inFlight()).toBe(1);
    client.abort();
    await pending;
    await eventually(() => a.aborted.count + b.aborted.count === 1);
    await eventually(() => inFlight() === 0);
  });

  it('an upstream that dies mid-stream ends the client stream with an error event', async () => {
    const base = await listen();
    a.mode = 'break';
    b.mode = 'break';
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat({ stream: true })),
    });
    const text = await res.text();
    expect(text).toContain('"content":"a"');
    expect(text).toContain('GW_UPSTREAM_ERROR');
    await eventually(() => inFlight() === 0);
  });
});

describe('cache-aware routing through the app', () => {
  it('sends a repeated long prefix to the endpoint that served it', async () => {
    table.replace([route({}, { routing: { policy: 'cache-aware' } })]);
    const long = 'x'.repeat(4000);
    const first = await app.inject(
      post('/v1/chat/completions', chat({ messages: [{ role: 'user', content: long }] })),
    );
    const owner = first.headers['x-cacheroute-endpoint'];
    for (let i = 0; i < 5; i++) {
      const res = await app.inject(
        post(
          '/v1/chat/completions',
          chat({ messages: [{ role: 'user', content: `${long} question ${i}` }] }),
        ),
      );
      expect(res.headers['x-cacheroute-endpoint']).toBe(owner);
    }
  });
});
