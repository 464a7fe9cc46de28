// Tracing against a real OTLP receiver (a minimal OpenTelemetry Collector, hack/otlp-receiver): the gateway's
// spans continue the client's W3C trace context and reach the runtime's request as its
// traceparent; admission, the routing decision, each upstream attempt and the reuse
// lookup are children of the server span; the operator's reconciles are spans of their
// own. Spans are read back from what the receiver wrote, not from the exporter.
//
// Between the gateway and the SGLang simulator sits a recording relay (a few lines of
// node:http): it keeps the trace headers each request carried and passes the request on.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { KubeClient } from '#kube/client.ts';
import { Manager } from '../../../operator/src/manager/manager.ts';
import { TerminalError, type Reconciler } from '../../../operator/src/manager/reconcile.ts';
import { Resources } from '#kube/resources.ts';
import { startTracing } from '#kube/tracing.ts';
import { parseTracingConfig } from '#kube/tracing-config.ts';
import { build } from '../../../gateway/src/app.ts';
import { StaticRoutingTable, type ModelRoute } from '../../../gateway/src/routing/table.ts';
import { GATEWAY_SERVER, spawnGateway, writeRoutesFile } from '../../support/gateway/gateway-process.ts';
import { startGatewayTracing, type GatewayTracing } from '../../../gateway/src/tracing/start.ts';
import { postJson, startSim, type RunningSim } from '../../support/sim/testing.ts';
import {
  startOtlpReceiver,
  type ReceivedSpan,
  type RunningOtlpReceiver,
} from '../../support/otlp-receiver.ts';
import { createTestNamespace, eventually, kubectlOk } from '../../support/kubectl.ts';

const kubeconfig = inject('kubeconfig');

let receiver: RunningOtlpReceiver;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
});
afterAll(async () => {
  await receiver?.stop();
});

/** A W3C trace context as a client would send it: a fresh trace, its own span. */
function clientContext(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

interface Relay {
  readonly url: string;
  readonly seen: { traceparent: string | undefined; tracestate: string | undefined }[];
  close(): Promise<void>;
}

/** Records each request's trace headers and passes the request on to `target`. */
async function startRelay(target: string): Promise<Relay> {
  const seen: Relay['seen'] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const h = req.headers;
      if (req.method === 'POST')
        seen.push({ traceparent: one(h.traceparent), tracestate: one(h.tracestate) });
      void fetch(new URL(req.url ?? '/', target), {
        method: req.method ?? 'GET',
        headers: { 'content-type': one(h['content-type']) ?? 'application/json' },
        ...(req.method === 'POST' ? { body: Buffer.concat(chunks) } : {}),
      }).then(
        async (up) => {
          res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' });
          res.end(Buffer.from(await up.arrayBuffer()));
        },
        () => res.writeHead(502).end(),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

const one = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

function buildRoute(endpoints: string[], settings: { routing?: object; reuse?: object }): ModelRoute {
  return {
    model: 'm',
    deployment: 'ns/m',
    fingerprint: 'fp1',
    salt: 'tenant-a',
    routing: RoutingSettings.parse({ policy: 'cache-aware', ...settings.routing }),
    admission: Admission.parse({}),
    reuse: ResultReuse.parse({ ...settings.reuse }),
    endpoints: endpoints.map((url, i) => ({
      id: `ep${i}`,
      url,
      role: 'standalone',
      fingerprint: 'fp1',
      verified: true,
      ready: true,
    })),
  };
}

describe('gateway tracing (real OTLP receiver)', () => {
  let sim: RunningSim;
  let relay: Relay;
  let tracing: GatewayTracing;
  let app: FastifyInstance | undefined;
  const service = `cacheroute-gateway-${randomBytes(3).toString('hex')}`;

  beforeAll(async () => {
    sim = await startSim(['--model-path', 'm', '--enable-cache-report']);
    relay = await startRelay(sim.url);
    const started = await startGatewayTracing({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_SERVICE_NAME: service,
    });
    if (!started.ok || !started.value) throw new Error(`tracing did not start: ${JSON.stringify(started)}`);
    tracing = started.value;
  });
  afterAll(async () => {
    await tracing?.shutdown();
    await relay?.close();
    await sim?.close();
  });

  async function serve(route: ModelRoute): Promise<string> {
    app = build({ table: new StaticRoutingTable([route]), tracer: tracing.tracer });
    await app.listen({ port: 0, host: '127.0.0.1' });
    onTestFinished(async () => {
      await app?.close();
      app = undefined;
    });
    return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  }

  /** The client's trace once it holds the server span and `children` spans under it. */
  async function readTrace(traceId: string, children: number): Promise<ReceivedSpan[]> {
    return eventually(async () => {
      await tracing.flush();
      const t = receiver.spans().filter((s) => s.traceId === traceId);
      if (t.length < children + 1) throw new Error(`trace ${traceId}: ${t.length} spans`);
      return t;
    });
  }

  const named = (t: ReceivedSpan[], name: string): ReceivedSpan[] => t.filter((s) => s.name === name);
  const attrs = (s: ReceivedSpan | undefined): ReceivedSpan['attributes'] => s?.attributes ?? {};

  it('continues the client trace: server span under the client span, admission/route/upstream under it, and the runtime gets the upstream span as its traceparent', async () => {
    const gw = await serve(buildRoute([relay.url], {}));
    const client = clientContext();
    const res = await postJson(
      `${gw}/generate`,
      {
        model: 'm',
        text: 'The quick brown fox jumps over the lazy dog',
        sampling_params: { max_new_tokens: 4 },
      },
      { traceparent: client.traceparent, tracestate: 'vendor=abc' },
    );
    expect(res.status).toBe(200);
    const t = await readTrace(client.traceId, 3);
    const [server] = named(t, 'POST /generate');
    if (!server) throw new Error(`no server span in ${t.map((s) => s.name).join(', ')}`);
    expect(server).toMatchObject({ parentSpanId: client.spanId, service, kind: 'server', status: 'unset' });
    expect(server.attributes).toMatchObject({
      'http.route': '/generate',
      'http.response.status_code': 200,
      'cacheroute.model': 'm',
      'cacheroute.deployment': 'ns/m',
    });

    const [admission] = named(t, 'admission');
    const [route] = named(t, 'route');
    const [upstream] = named(t, 'upstream standalone');
    for (const s of [admission, route, upstream]) expect(s?.parentSpanId).toBe(server.spanId);
    expect(attrs(admission)).toMatchObject({
      'cacheroute.admission.outcome': 'admitted',
      'cacheroute.deployment': 'ns/m',
    });
    const routeTags = attrs(route);
    expect(routeTags).toMatchObject({
      'cacheroute.route.policy': 'cache-aware',
      'cacheroute.route.endpoint': 'ep0',
      'cacheroute.deployment': 'ns/m',
      'cacheroute.route.match_source': 'tree',
      'cacheroute.route.matched_tokens': 0,
      'cacheroute.route.attempt': 0,
    });
    expect(routeTags['cacheroute.route.prompt_tokens']).toBeGreaterThan(0);
    expect(upstream).toMatchObject({ kind: 'client', status: 'unset' });
    expect(attrs(upstream)).toMatchObject({
      'cacheroute.endpoint': 'ep0',
      'cacheroute.upstream.attempt': 0,
      'http.response.status_code': 200,
    });

    // What the runtime received: the same trace, the upstream attempt's span as its parent.
    expect(relay.seen.at(-1)).toEqual({
      traceparent: `00-${client.traceId}-${upstream?.spanId}-01`,
      tracestate: 'vendor=abc',
    });
  });

  it('a retried attempt: one upstream span per attempt, the failed one marked as an error', async () => {
    // round-robin picks the dead endpoint first; the retry goes to the live one.
    // Port 1: below the ephemeral range, so no port-0 bind takes it; nothing listens there.
    const dead = 'http://127.0.0.1:1';
    const gw = await serve(buildRoute([dead, relay.url], { routing: { policy: 'round-robin' } }));
    const client = clientContext();
    const res = await postJson(
      `${gw}/generate`,
      { model: 'm', text: 'retry me' },
      { traceparent: client.traceparent },
    );
    expect(res.status).toBe(200);
    const t = await readTrace(client.traceId, 5);
    const ups = named(t, 'upstream standalone');
    expect(ups).toHaveLength(2);
    const byAttempt = new Map(ups.map((u) => [u.attributes['cacheroute.upstream.attempt'], u]));
    expect(byAttempt.get(0)).toMatchObject({
      status: 'error',
      events: ['exception'],
      attributes: expect.objectContaining({ 'cacheroute.endpoint': 'ep0' }),
    });
    expect(byAttempt.get(1)).toMatchObject({
      status: 'unset',
      attributes: expect.objectContaining({ 'cacheroute.endpoint': 'ep1', 'http.response.status_code': 200 }),
    });
    expect(
      named(t, 'route')
        .map((s) => s.attributes['cacheroute.route.attempt'])
        .sort(),
    ).toEqual([0, 1]);
  });

  it('reuse: a miss is a `fresh` reuse span beside the forward, a hit is a `store` span and no upstream', async () => {
    const gw = await serve(buildRoute([relay.url], { reuse: { enabled: true } }));
    const body = { model: 'm', text: 'reuse me', sampling_params: { temperature: 0, max_new_tokens: 4 } };
    const first = clientContext();
    expect((await postJson(`${gw}/generate`, body, { traceparent: first.traceparent })).status).toBe(200);
    const second = clientContext();
    const hit = await postJson(`${gw}/generate`, body, { traceparent: second.traceparent });
    expect(hit.headers.get('x-cacheroute-reused')).toBe('store');

    const miss = await readTrace(first.traceId, 4);
    expect(named(miss, 'reuse').map(attrs)).toEqual([
      expect.objectContaining({ 'cacheroute.reuse.source': 'fresh', 'cacheroute.reuse.hit': false }),
    ]);
    expect(named(miss, 'upstream standalone')).toHaveLength(1);
    const reused = await readTrace(second.traceId, 1);
    expect(named(reused, 'reuse').map(attrs)).toEqual([
      expect.objectContaining({ 'cacheroute.reuse.source': 'store', 'cacheroute.reuse.hit': true }),
    ]);
    expect(named(reused, 'upstream standalone')).toEqual([]);
    expect(named(reused, 'admission')).toEqual([]);
  });
});

describe('the gateway process (server.ts) traced from its environment', () => {
  it('OTEL_* turn it on; the spans of the last requests are exported when it stops', async () => {
    const sim = await startSim(['--model-path', 'm']);
    const relay = await startRelay(sim.url);
    const routes = writeRoutesFile(relay.url);
    onTestFinished(async () => {
      routes.remove();
      await relay.close();
      await sim.close();
    });
    const service = `gateway-process-${randomBytes(3).toString('hex')}`;
    const gw = await spawnGateway(routes.path, [], {
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_SERVICE_NAME: service,
        OTEL_RESOURCE_ATTRIBUTES: 'k8s.pod.name=gw-0',
      },
    });
    const client = clientContext();
    const res = await postJson(
      `${gw.url}/generate`,
      { model: 'm', text: 'hi' },
      { traceparent: client.traceparent },
    );
    expect(res.status).toBe(200);
    // The batch exporter's delay (5 s) has not passed: SIGTERM's drain exports what is left.
    gw.proc.kill('SIGTERM');
    expect((await gw.exited)[0]).toBe(0);
    const spans = receiver.spans().filter((s) => s.traceId === client.traceId);
    expect(spans.map((s) => s.name).sort()).toEqual([
      'POST /generate',
      'admission',
      'route',
      'upstream standalone',
    ]);
    expect(spans.every((s) => s.service === service)).toBe(true);
    expect(relay.seen.at(-1)?.traceparent).toMatch(new RegExp(`^00-${client.traceId}-[0-9a-f]{16}-01$`));
  });

  it('a setting it cannot honour stops it at start, naming the variable', async () => {
    const routes = writeRoutesFile('http://127.0.0.1:9');
    onTestFinished(() => routes.remove());
    const proc = spawn(
      process.execPath,
      [GATEWAY_SERVER, '--routes', routes.path, '--auth', 'open', '--port', '0'],
      {
        env: {
          ...process.env,
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    proc.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
    onTestFinished(() => void proc.kill('SIGKILL'));
    const exit = await Promise.race([
      once(proc, 'exit').then(([code]) => code as number | null),
      new Promise<'still running'>((r) => setTimeout(() => r('still running'), 20_000)),
    ]);
    expect(exit).toBe(2);
    expect(stderr).toContain('OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is supported');
  });
});

describe('operator tracing (real OTLP receiver, real API server)', () => {
  it('a reconcile is a span: controller, key, result; a requeue and a terminal error say so', async () => {
    const service = `cacheroute-operator-${randomBytes(3).toString('hex')}`;
    const config = parseTracingConfig(
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`, OTEL_SERVICE_NAME: service },
      'cacheroute-operator',
    );
    if (!config.ok || !config.value) throw new Error('no tracing config');
    const tracing = await startTracing(config.value);
    onTestFinished(() => tracing.shutdown());
    const ns = await createTestNamespace(kubeconfig, 'tracing');
    const kc = new KubeConfig();
    kc.loadFromString(readFileSync(kubeconfig, 'utf8'));
    const client = await KubeClient.fromKubeConfig(kc);
    const reconciler: Reconciler = {
      reconcile(key) {
        if (key.name === 'poll') return Promise.resolve({ requeueAfterMs: 60_000 });
        if (key.name === 'invalid') return Promise.reject(new TerminalError('invalid spec'));
        return Promise.resolve();
      },
    };
    const manager = new Manager({ client, namespaces: [ns], leaderElection: false, http: false });
    manager.addController({ name: 'traced', primary: Resources.configMaps, reconciler });
    await manager.start();
    onTestFinished(async () => {
      await manager.stop();
      await manager.wait();
      await client.close();
    });
    for (const name of ['plain', 'poll', 'invalid'])
      await kubectlOk(['create', 'configmap', name, '-n', ns], { kubeconfig });

    const spans = await eventually(
      async () => {
        await tracing.flush();
        const found = receiver
          .spans()
          .filter((s) => s.service === service && s.name === 'reconcile traced' && s.parentSpanId === '');
        const ours = new Map(
          found
            .filter((s) => s.attributes['k8s.namespace.name'] === ns)
            .map((s) => [s.attributes['cacheroute.object.key'], { ...s.attributes, status: s.status }]),
        );
        if (ours.size < 3) throw new Error(`reconcile spans so far: ${[...ours.keys()].join(', ')}`);
        return ours;
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    expect(spans.get(`${ns}/plain`)).toMatchObject({
      'cacheroute.controller': 'traced',
      'cacheroute.reconcile.result': 'success',
      'cacheroute.reconcile.retries': 0,
      status: 'unset',
    });
    expect(spans.get(`${ns}/poll`)).toMatchObject({
      'cacheroute.reconcile.result': 'requeue_after',
      'cacheroute.reconcile.requeue_after_ms': 60_000,
    });
    expect(spans.get(`${ns}/invalid`)).toMatchObject({
      'cacheroute.reconcile.result': 'terminal_error',
      status: 'error',
    });
  });
});
