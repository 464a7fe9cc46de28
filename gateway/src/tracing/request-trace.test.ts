// The request spans on the real OpenTelemetry SDK, kept in memory (the integration test
// reads them from a real receiver): a prefill/decode pair, a stream, a refused admission.

import type { AddressInfo } from 'node:net';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { bootstrapPortOf, postJson, startSim, type RunningSim } from '../../../test/support/sim/testing.ts';
import { build } from '../app.ts';
import type { ModelRoute, RouteEndpoint } from '../routing/table.ts';
import { StaticRoutingTable } from '../routing/table.ts';
import {
  eventually,
  Gate,
  startFakeUpstream,
  type FakeUpstream,
} from '../../../test/support/gateway/fake-upstream.ts';
import { buildRequestTracer } from './request-trace.ts';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';
const traceparent = `00-${TRACE_ID}-${CLIENT_SPAN}-01`;

let exporter: InMemorySpanExporter;
let provider: TracerProvider;
let app: FastifyInstance | undefined;
let sims: RunningSim[] = [];
let fakes: FakeUpstream[] = [];

afterEach(async () => {
  await app?.close();
  app = undefined;
  await Promise.all([...sims.map((s) => s.close()), ...fakes.map((f) => f.close())]);
  sims = [];
  fakes = [];
  await provider?.shutdown();
});

async function serve(r: ModelRoute): Promise<string> {
  exporter = new InMemorySpanExporter();
  provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  app = build({ table: new StaticRoutingTable([r]), tracer: buildRequestTracer(provider.getTracer('test')) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

function buildRoute(endpoints: RouteEndpoint[], admission: object = {}): ModelRoute {
  return {
    model: 'm',
    deployment: 'ns/m',
    fingerprint: 'fp1',
    salt: 's',
    routing: RoutingSettings.parse({}),
    admission: Admission.parse({ adaptive: false, ...admission }),
    reuse: ResultReuse.parse({}),
    endpoints,
  };
}

const ep = (id: string, url: string, over: Partial<RouteEndpoint> = {}): RouteEndpoint => ({
  id,
  url,
  role: 'standalone',
  fingerprint: 'fp1',
  verified: true,
  ready: true,
  ...over,
});

const ofTrace = (): ReadableSpan[] =>
  exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === TRACE_ID);

/** The finished spans of the client's trace, once the server span has ended. */
async function spansOfTrace(): Promise<ReadableSpan[]> {
  await eventually(() => ofTrace().some((s) => s.parentSpanContext?.spanId === CLIENT_SPAN));
  return ofTrace();
}

const byName = (spans: ReadableSpan[], name: string): ReadableSpan[] => spans.filter((s) => s.name === name);
const serverOf = (spans: ReadableSpan[]): ReadableSpan => {
  const s = spans.find((x) => x.parentSpanContext?.spanId === CLIENT_SPAN);
  if (!s) throw new Error('no server span');
  return s;
};

describe('request spans', () => {
  it('prefill/decode: one route span naming both, an upstream span per side, all under the server span', async () => {
    const pd = ['--model-path', 'm', '--disaggregation-mode'];
    sims = [
      await startSim([...pd, 'prefill', '--disaggregation-bootstrap-port', '0']),
      await startSim([...pd, 'decode', '--sim-pd-timeout-ms', '5000']),
    ];
    const gw = await serve(
      buildRoute([
        ep('p0', sims[0]!.url, { role: 'prefill', bootstrapPort: bootstrapPortOf(sims[0]!) }),
        ep('d0', sims[1]!.url, { role: 'decode' }),
      ]),
    );
    const r = await postJson(
      `${gw}/generate`,
      { text: 'a b c', sampling_params: { max_new_tokens: 2 } },
      { traceparent },
    );
    expect(r.status).toBe(200);
    const spans = await spansOfTrace();
    const server = serverOf(spans);
    const children = spans.filter((s) => s.parentSpanContext?.spanId === server.spanContext().spanId);
    expect(children.map((s) => s.name).sort()).toEqual([
      'admission',
      'route',
      'upstream decode',
      'upstream prefill',
    ]);
    expect(byName(spans, 'route')[0]?.attributes).toMatchObject({
      'cacheroute.route.endpoint': 'p0',
      'cacheroute.route.decode_endpoint': 'd0',
    });
    expect(byName(spans, 'upstream prefill')[0]?.attributes).toMatchObject({
      'cacheroute.endpoint': 'p0',
      'cacheroute.upstream.role': 'prefill',
      'http.response.status_code': 200,
    });
    expect(byName(spans, 'upstream decode')[0]?.attributes).toMatchObject({
      'cacheroute.endpoint': 'd0',
      'http.response.status_code': 200,
    });
  });

  it('the route span carries the runtime priority stamped for its endpoint (ADR 0057)', async () => {
    const up = await startFakeUpstream();
    fakes.push(up);
    const gw = await serve(buildRoute([ep('a', up.url, { priorityScheduling: true })]));
    const r = await postJson(
      `${gw}/generate`,
      { text: 'a b c', sampling_params: { max_new_tokens: 2 } },
      { traceparent },
    );
    expect(r.status).toBe(200);
    expect(up.received[0]?.body).toHaveProperty('priority', 1);
    expect(byName(await spansOfTrace(), 'route')[0]?.attributes).toMatchObject({
      'cacheroute.route.runtime_priority': 1,
      'cacheroute.route.runtime_priority_bucket': 'short',
    });
  });

  it('a stream: the upstream span lasts until the last chunk, and the server span records the status', async () => {
    const up = await startFakeUpstream();
    fakes.push(up);
    up.streamGate = new Gate();
    const gw = await serve(buildRoute([ep('a', up.url)]));
    const stream = fetch(`${gw}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    }).then((r) => r.text());
    await eventually(() => up.received.length === 1 && up.streamGate.waiting === 1);
    // Past the first chunk and held: the attempt is not over.
    expect(byName(exporter.getFinishedSpans(), 'upstream standalone')).toEqual([]);
    up.streamGate.open();
    expect(await stream).toContain('data: [DONE]');
    const spans = await spansOfTrace();
    expect(byName(spans, 'upstream standalone')[0]?.attributes).toMatchObject({
      'http.response.status_code': 200,
    });
    expect(serverOf(spans).attributes).toMatchObject({
      'http.route': '/v1/chat/completions',
      'http.response.status_code': 200,
    });
  });

  it('a refused admission: its span says why, and nothing is routed or sent', async () => {
    const up = await startFakeUpstream();
    fakes.push(up);
    up.headGate = new Gate();
    const gw = await serve(buildRoute([ep('a', up.url)], { maxConcurrency: 1, maxQueue: 0 }));
    const held = postJson(`${gw}/generate`, { model: 'm', text: 'first' });
    await eventually(() => up.received.length === 1);
    const r = await postJson(`${gw}/generate`, { model: 'm', text: 'second' }, { traceparent });
    expect(r.status).toBe(429);
    const spans = await spansOfTrace();
    expect(spans.map((s) => s.name).sort()).toEqual(['POST /generate', 'admission']);
    expect(byName(spans, 'admission')[0]?.attributes).toMatchObject({
      'cacheroute.admission.outcome': 'rejected',
      'cacheroute.admission.reason': 'overloaded',
    });
    expect(serverOf(spans).attributes).toMatchObject({
      'http.response.status_code': 429,
      'error.type': 'GW_OVERLOADED',
    });
    up.headGate.open();
    expect((await held).status).toBe(200);
  });
});
