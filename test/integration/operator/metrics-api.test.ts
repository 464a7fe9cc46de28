// The external metrics API through the real aggregation layer: kube-apiserver
// proxies `external.metrics.k8s.io` to the operator's metrics API (registered
// by an APIService, reached by aggregator routing at the host address), which
// reads a real gateway's load report while a simulator holds requests, and
// answers as an HPA reads it. Its own checks are shown too: a caller without
// the front-proxy certificate is refused, and a proxied user is authorized by
// a SubjectAccessReview against the same API server.
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { connect } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { build } from '../../../gateway/src/app.ts';
import { StaticRoutingTable } from '../../../gateway/src/routing/table.ts';
import { buildTestEndpoint, buildTestRoute } from '../../support/gateway/routes.ts';
import { Admission, validateResource, type DeploymentResource } from '#api';
import { startMetricsApi, type MetricsApi } from '../../../operator/src/metrics-api/start.ts';
import { KubeClient } from '#kube/client.ts';
import { loadClusterCredentials } from '#kube/cluster-credentials.ts';
import { createLogger } from '#kube/logger.ts';
import { ScaledClock } from '../../sim/clock.ts';
import { parseSimArgs } from '../../sim/config.ts';
import { SimServer, silentLogger } from '../../sim/server.ts';
import { buildDeploymentManifest } from '../../support/builders.ts';
import { eventually, kubectl, kubectlOk } from '../../support/kubectl.ts';
import {
  issueMetricsApiCert,
  METRICS_API_SERVICE,
  registerMetricsApi,
  unregisterMetricsApi,
} from '../../support/metrics-api.ts';
import { pkiPaths } from '../../support/pki.ts';

const cp = inject('controlPlane');
const kubeconfig = cp.kubeconfig;
const hostIP = process.env['CACHEROUTE_HOST_IP'];
const SERVICE = METRICS_API_SERVICE;
const NS = 'team';
const BASE = '/apis/external.metrics.k8s.io/v1beta1';

let sim: SimServer;
let gateway: FastifyInstance;
let client: KubeClient;
let api: MetricsApi;
let port: number;
const stop = new AbortController();
const held: Promise<unknown>[] = [];

interface MetricList {
  items: { metricName: string; metricLabels: Record<string, string>; value: string }[];
}

const raw = async (path: string): Promise<MetricList> =>
  JSON.parse(await kubectlOk(['get', '--raw', path], { kubeconfig })) as MetricList;

beforeAll(async () => {
  if (!hostIP)
    throw new Error('run inside hack/in-netns.sh: the API server dials the metrics API at the host address');
  // On wall time, as its main runs it: each answer takes about 3 s (30 tokens, 100 ms a step),
  // so requests stay in flight and queued while the metrics are read.
  const cfg = parseSimArgs([
    '--port',
    '0',
    '--model-path',
    'm',
    '--enable-metrics',
    '--sim-decode-base-ms',
    '100',
  ]);
  if (!cfg.ok) throw new Error(cfg.error);
  const clock = new ScaledClock(1);
  sim = new SimServer(cfg.value, {
    clock,
    logger: silentLogger,
    crash: () => undefined,
    toWallMs: (ms) => clock.toWallMs(ms),
  });
  const simUrl = `http://127.0.0.1:${await sim.listen()}`;
  const route = buildTestRoute(
    [buildTestEndpoint(`${NS}/chat-0`, simUrl)],
    { reuse: false },
    {
      deployment: `${NS}/chat`,
      admission: Admission.parse({
        adaptive: false,
        maxConcurrency: 1,
        maxQueue: 8,
        queueTimeoutSeconds: 60,
      }),
    },
  );
  gateway = build({ table: new StaticRoutingTable([route]), scrapeIntervalMs: 200 });
  await gateway.listen({ port: 0, host: '127.0.0.1' });
  const parsed = validateResource({
    ...buildDeploymentManifest({ name: 'chat' }),
    metadata: { name: 'chat', namespace: NS },
  });
  if (!parsed.ok || parsed.value.kind !== 'Deployment') throw new Error('sample');
  const deployment: DeploymentResource = parsed.value;

  const serving = await issueMetricsApiCert(cp.dir, hostIP);
  client = await KubeClient.fromKubeConfig(await loadClusterCredentials(kubeconfig), {
    userAgent: 'metrics-api-test',
  });
  // Port 0: the kernel picks; the port is read back once it serves, then registered.
  api = startMetricsApi(
    {
      client,
      deployments: () => [deployment],
      logger: createLogger({ level: 'warn' }),
      signal: stop.signal,
    },
    {
      host: hostIP,
      port: 0,
      certFile: serving.cert,
      keyFile: serving.key,
      gatewayAdminUrl: `http://127.0.0.1:${(gateway.server.address() as AddressInfo).port}`,
      // Fresh reads: the queue changes every 3 s here.
      maxSampleAgeMs: 100,
      reloadMs: 200,
    },
  );
  await eventually(() => expect(api.server()).toBeDefined());
  port = api.server()?.address().port ?? 0;

  await registerMetricsApi(kubeconfig, cp.dir, { hostIP, port });
}, 120_000);

afterAll(async () => {
  await unregisterMetricsApi(kubeconfig);
  stop.abort();
  await api?.close();
  expect(await Promise.all(held)).toEqual([200, 200, 200]);
  await gateway?.close();
  await sim?.close();
  await client?.close();
});

const chat = async (i: number): Promise<number> => {
  const r = await fetch(
    `http://127.0.0.1:${(gateway.server.address() as AddressInfo).port}/v1/chat/completions`,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'm',
        max_tokens: 30,
        messages: [{ role: 'user', content: `question ${i}` }],
      }),
    },
  );
  await r.text();
  return r.status;
};

describe('external.metrics.k8s.io through the aggregator', () => {
  it('serves the gateway tier’s load of a Deployment part, as an HPA selects it', async () => {
    const selector = encodeURIComponent('cacheroute.dev/deployment=chat,cacheroute.dev/part=standalone');
    const idle = await raw(
      `${BASE}/namespaces/${NS}/cacheroute_in_flight_requests?labelSelector=${selector}`,
    );
    expect(idle.items).toEqual([
      expect.objectContaining({
        metricName: 'cacheroute_in_flight_requests',
        metricLabels: { 'cacheroute.dev/deployment': 'chat', 'cacheroute.dev/part': 'standalone' },
        value: '0',
      }),
    ]);
    // One runs (maxConcurrency 1), two wait in the admission queue.
    for (let i = 0; i < 3; i++) held.push(chat(i));
    await eventually(
      async () => {
        const inFlight = await raw(
          `${BASE}/namespaces/${NS}/cacheroute_in_flight_requests?labelSelector=${selector}`,
        );
        const queued = await raw(
          `${BASE}/namespaces/${NS}/cacheroute_queued_requests?labelSelector=${selector}`,
        );
        expect([inFlight.items[0]?.value, queued.items[0]?.value]).toEqual(['1', '2']);
      },
      { timeoutMs: 20_000, intervalMs: 500 },
    );
    // The runtime's own figures, as the gateway scrapes them from its /metrics.
    const usage = await raw(`${BASE}/namespaces/${NS}/cacheroute_runtime_kv_usage?labelSelector=${selector}`);
    expect(usage.items).toHaveLength(1);
    // Another namespace, or a selector naming another Deployment, has no series.
    expect((await raw(`${BASE}/namespaces/other/cacheroute_in_flight_requests`)).items).toEqual([]);
    const elsewhere = encodeURIComponent('cacheroute.dev/deployment=other');
    expect(
      (await raw(`${BASE}/namespaces/${NS}/cacheroute_in_flight_requests?labelSelector=${elsewhere}`)).items,
    ).toEqual([]);
  }, 60_000);

  it('names the metrics it serves when asked for another', async () => {
    const r = await kubectl(['get', '--raw', `${BASE}/namespaces/${NS}/requests_per_second`], { kubeconfig });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('cacheroute serves cacheroute_queued_requests');
  });

  it('lets in only the aggregator, and only for users the API server authorizes', async () => {
    const pki = pkiPaths(join(cp.dir, 'pki'));
    const get = (opts: { cert?: boolean; user?: string; groups?: string[] }) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          {
            host: hostIP,
            port,
            path: `${BASE}/namespaces/${NS}/cacheroute_in_flight_requests`,
            ca: readFileSync(pki.servingCa.cert),
            servername: `${SERVICE.name}.${SERVICE.namespace}.svc`,
            ...(opts.cert
              ? { cert: readFileSync(pki.proxyClient.cert), key: readFileSync(pki.proxyClient.key) }
              : {}),
            headers: {
              ...(opts.user ? { 'X-Remote-User': opts.user } : {}),
              ...(opts.groups ? { 'X-Remote-Group': opts.groups } : {}),
            },
          },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end();
      });
    // Without the front-proxy certificate, headers claiming a user count for nothing.
    const anonymous = await get({ user: 'admin', groups: ['system:masters'] });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).toContain('front-proxy CA');
    // The aggregator's certificate, for a user RBAC gives nothing: the SubjectAccessReview says no.
    const nobody = await get({ cert: true, user: 'nobody' });
    expect(nobody.status).toBe(403);
    expect(nobody.body).toContain('nobody may not list cacheroute_in_flight_requests');
    const admin = await get({ cert: true, user: 'admin', groups: ['system:masters'] });
    expect(admin.status).toBe(200);
  });

  it('serves a renewed certificate without a restart', async () => {
    const fingerprint = () =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(
          {
            host: hostIP,
            port,
            servername: `${SERVICE.name}.${SERVICE.namespace}.svc`,
            rejectUnauthorized: false,
          },
          () => {
            resolve(socket.getPeerCertificate().fingerprint256);
            socket.end();
          },
        );
        socket.on('error', reject);
      });
    const before = await fingerprint();
    if (!hostIP) throw new Error('no host address');
    await issueMetricsApiCert(cp.dir, hostIP);
    await eventually(async () => expect(await fingerprint()).not.toBe(before), { timeoutMs: 10_000 });
  });
});
