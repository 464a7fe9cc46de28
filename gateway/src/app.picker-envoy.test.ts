// The endpoint picker (epp/) behind a real Envoy 1.40 with GIE's kind of
// bootstrap (ext_proc FULL_DUPLEX_STREAMED, ORIGINAL_DST on the picked
// header), simulators (test/sim) as the runtimes: what Envoy's clients get,
// and what reaches which runtime. Every port bound on 0 and read back.

import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { Admission } from '#api';
import { digestApiKey } from '#api/gateway-keys.ts';
import { startEnvoy, untilPickerMarkedDown, type RunningEnvoy } from '../../test/support/envoy.ts';
import {
  eventually,
  Gate,
  startFakeUpstream,
  type FakeUpstream,
} from '../../test/support/gateway/fake-upstream.ts';
import { buildTestEndpoint, buildTestRoute } from '../../test/support/gateway/routes.ts';
import { ManualClock } from '../../test/support/manual-clock.ts';
import { buildSimTokenizer } from '../../test/bench/sim-tokenizer.ts';
import {
  bootstrapPortOf,
  routeEventsOf,
  startSim,
  startSimWithKvEvents,
  type RunningSim,
} from '../../test/support/sim/testing.ts';
import { build, type BuildOptions } from './app.ts';
import { RuntimeKeys } from './discovery/runtime-keys.ts';
import type { CacheAwarePolicy } from './policies/cache-aware.ts';
import type { ModelRoute, RouteEndpoint } from './routing/table.ts';
import { StaticRoutingTable } from './routing/table.ts';
import { startEndpointPicker } from './server.ts';
import { buildTenantDirectory } from './tenancy/build-directory.ts';
import { KeyDirectory, OPEN_DIRECTORY, type TenantDirectory } from './tenancy/tenant.ts';

interface Stack {
  readonly app: FastifyInstance;
  readonly epp: Awaited<ReturnType<typeof startEndpointPicker>>;
  readonly envoy: RunningEnvoy;
  readonly sims: readonly RunningSim[];
}

let stacks: Stack[] = [];

afterEach(async () => {
  for (const s of stacks) {
    await s.envoy.close();
    await s.epp.close();
    await s.app.close();
    await Promise.all(s.sims.map((sim) => sim.close()));
  }
  stacks = [];
});

interface SetupOptions {
  endpoint?: (i: number) => Partial<RouteEndpoint>;
  policy?: string;
  reuse?: boolean;
  admission?: ModelRoute['admission'];
  tenants?: TenantDirectory;
  /** The pool's failureMode FailOpen (Envoy's fallback to the pool: test/support/envoy.ts). */
  failOpen?: boolean;
  /** FailOpen: Envoy's runtime key per pool endpoint (url's host:port → key), as pool-route.ts reads them. */
  failOpenKeys?: (urls: readonly string[]) => Record<string, string>;
  responseBody?: boolean;
  subsetHint?: (urls: readonly string[]) => string[];
  /** Envoy's ext_proc graceful close (test/support/envoy.ts; default on). */
  gracefulClose?: boolean;
  /** The ext_proc stream to the answer's end (test/support/envoy.ts; default on). */
  untilResponseEnd?: boolean;
  /** The simulators' own arguments after the common ones. */
  simArgs?: readonly string[];
  /** The route's endpoints as given (a prefill/decode pair), instead of one per url. */
  endpoints?: readonly RouteEndpoint[];
  app?: Partial<BuildOptions>;
}

async function setup(n: number, opts: SetupOptions = {}): Promise<Stack> {
  const sims = await Promise.all(
    Array.from({ length: n }, () =>
      startSim(['--model-path', 'm', '--enable-cache-report', '--enable-metrics', ...(opts.simArgs ?? [])]),
    ),
  );
  return setupOver(
    sims.map((s) => s.url),
    opts,
    sims,
  );
}

/** `app`'s endpoint picker on loopback ports the kernel picks, never draining. */
function startLoopbackPicker(
  app: FastifyInstance,
  tenants: TenantDirectory,
): ReturnType<typeof startEndpointPicker> {
  return startEndpointPicker(
    app,
    { mode: 'picker', port: 0, healthPort: 0 },
    '127.0.0.1',
    tenants,
    () => true,
  );
}

/** Envoy → the picker → `urls` (endpoints sim0, sim1, ... or, over one recording runtime, `e`). */
async function setupOver(
  urls: readonly string[],
  opts: SetupOptions,
  sims: readonly RunningSim[] = [],
): Promise<Stack> {
  const id = (i: number): string => (sims.length === 0 ? 'e' : `sim${i}`);
  const table = new StaticRoutingTable([
    buildTestRoute(
      opts.endpoints ?? urls.map((url, i) => buildTestEndpoint(id(i), url, opts.endpoint?.(i))),
      { policy: opts.policy ?? 'cache-aware', reuse: opts.reuse ?? false },
      opts.admission ? { admission: opts.admission } : {},
    ),
  ]);
  const tenants = opts.tenants ?? OPEN_DIRECTORY;
  const app = build({ table, tenants, ...opts.app });
  const epp = await startLoopbackPicker(app, tenants);
  const envoy = await startEnvoy({
    kind: 'picker',
    pickerPort: epp.port,
    ...(opts.failOpen
      ? {
          failOpen: {
            pool: urls.map((u) => new URL(u).host),
            pickerHealthPort: epp.healthPort,
            ...(opts.failOpenKeys ? { runtimeKeys: opts.failOpenKeys(urls) } : {}),
          },
        }
      : {}),
    responseBody: opts.responseBody ?? false,
    ...(opts.subsetHint ? { subsetHint: opts.subsetHint(urls) } : {}),
    ...(opts.gracefulClose !== undefined ? { gracefulClose: opts.gracefulClose } : {}),
    ...(opts.untilResponseEnd !== undefined ? { untilResponseEnd: opts.untilResponseEnd } : {}),
  });
  const stack = { app, epp, envoy, sims };
  stacks.push(stack);
  return stack;
}

/** Requests a simulator has served (its own sglang:num_requests_total). */
async function servedCount(sim: RunningSim): Promise<number> {
  const text = await (await fetch(`${sim.url}/metrics`)).text();
  const m = /sglang:num_requests_total\{[^}]*\} (\d+)/.exec(text);
  return m ? Number(m[1]) : 0;
}

/** Envoy's counters whose names start with `prefix` (its admin /stats). */
async function envoyCounters(envoy: RunningEnvoy, prefix: string): Promise<Record<string, number>> {
  const filter = encodeURIComponent(`^${prefix.replaceAll('.', '\\.')}`);
  const text = await (await fetch(`${envoy.adminUrl}/stats?filter=${filter}`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^(\S+): (\d+)$/gm)) out[m[1] ?? ''] = Number(m[2]);
  return out;
}

/** The ext_proc cluster's host health flags, as Envoy's admin /clusters lists them. */
const KEY_A = 'a'.repeat(40);
const RUNTIME_KEY = 'f'.repeat(64);

function tenantDirectory(): KeyDirectory {
  const dir = new KeyDirectory();
  const tenant = (name: string, models: string[], limits?: object): object => ({
    apiVersion: 'cacheroute.dev/v1alpha1',
    kind: 'Tenant',
    metadata: { namespace: 'ns', name },
    spec: { apiKeys: { secretRef: { name: `${name}-keys` } }, models, ...(limits ? { limits } : {}) },
  });
  dir.replace(
    buildTenantDirectory({
      tenants: [tenant('a', ['m'], { requestsPerMinute: 2 })],
      keyDigests: { 'ns/a-keys': { k: digestApiKey(KEY_A) } },
    }),
  );
  dir.ready = true;
  return dir;
}

async function chat(
  envoy: RunningEnvoy,
  content: string | { role: string; content: string }[],
  headers: Record<string, string> = {},
): Promise<{ status: number; endpoint: string | null; headers: Headers; json: Record<string, unknown> }> {
  const messages = typeof content === 'string' ? [{ role: 'user', content }] : content;
  const res = await fetch(`${envoy.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm', messages, max_tokens: 4 }),
  });
  const text = await res.text();
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = { text };
  }
  return {
    status: res.status,
    endpoint: res.headers.get('x-cacheroute-endpoint'),
    headers: res.headers,
    json,
  };
}

/** A streamed chat answer through Envoy: resolves at its headers (the first byte). */
function streamChat(envoy: RunningEnvoy, content: string, maxTokens?: number): Promise<Response> {
  return fetch(`${envoy.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'm',
      messages: [{ role: 'user', content }],
      stream: true,
      ...(maxTokens !== undefined ? { max_tokens: maxTokens } : {}),
    }),
  });
}

describe('the endpoint picker behind a real Envoy', () => {
  it('routes every request to a verified endpoint, never to another', async () => {
    const { envoy, app } = await setup(3, {
      endpoint: (i) => ({ verified: i !== 1 }),
      policy: 'round-robin',
    });
    const served: (string | null)[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await chat(envoy, `question number ${i}`);
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      served.push(r.endpoint);
    }
    expect(new Set(served)).toEqual(new Set(['sim0', 'sim2']));
    await eventually(() => app.gateway.inFlightOf('sim0') + app.gateway.inFlightOf('sim2') === 0);
  });

  it('spreads its requests over every picker replica Envoy names, one ext_proc stream each', async () => {
    // Each replica routes to its own runtime only, so where a request lands says which replica picked.
    const sims = await Promise.all([0, 1].map(() => startSim(['--model-path', 'm', '--enable-metrics'])));
    const replicas = await Promise.all(
      sims.map(async (sim, i) => {
        const table = new StaticRoutingTable([buildTestRoute([buildTestEndpoint(`sim${i}`, sim.url)])]);
        const app = build({ table, tenants: OPEN_DIRECTORY });
        return { app, epp: await startLoopbackPicker(app, OPEN_DIRECTORY) };
      }),
    );
    const [first, ...more] = replicas.map((r) => r.epp.port);
    const envoy = await startEnvoy({ kind: 'picker', pickerPort: first ?? 0, morePickerPorts: more });
    // Closing Envoy twice is harmless; each replica's app and picker close with their own stack.
    stacks.push(...replicas.map((r, i) => ({ ...r, envoy, sims: sims.slice(i, i + 1) })));
    const served: (string | null)[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await chat(envoy, `question number ${i}`);
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      served.push(r.endpoint);
    }
    expect(served.filter((e) => e === 'sim0').length).toBeGreaterThan(0);
    expect(served.filter((e) => e === 'sim1').length).toBeGreaterThan(0);
  });

  it('keeps a conversation on the endpoint that holds its prefix, turn after turn', async () => {
    const { envoy } = await setup(3);
    const system = { role: 'system', content: 'You are a careful assistant. '.repeat(40) };
    for (let c = 0; c < 4; c++) {
      const turns: { role: string; content: string }[] = [system];
      const served = new Set<string | null>();
      for (let t = 0; t < 3; t++) {
        turns.push({
          role: 'user',
          content: `conversation ${c}, question ${t}: ${'tell me more '.repeat(20)}`,
        });
        const r = await chat(envoy, turns);
        expect(r.status).toBe(200);
        served.add(r.endpoint);
        turns.push({ role: 'assistant', content: `answer ${t} of conversation ${c}` });
      }
      expect(served.size, `conversation ${c}: ${[...served].join(', ')}`).toBe(1);
    }
  });

  it('503 as an ImmediateResponse when no endpoint is ready and verified; no runtime sees the request', async () => {
    const { envoy, sims } = await setup(2, { endpoint: () => ({ ready: false }) });
    const r = await chat(envoy, 'anyone there?');
    expect(r.status).toBe(503);
    expect(r.json).toMatchObject({ error: { code: 'GW_NO_ENDPOINT' } });
    expect(await Promise.all(sims.map(servedCount))).toEqual([0, 0]);
  });

  it("tenants' keys and limits: 401, 403, then 429 with Retry-After, as ImmediateResponses", async () => {
    const { envoy, sims } = await setup(1, { tenants: tenantDirectory() });
    const none = await chat(envoy, 'hello');
    expect(none.status).toBe(401);
    expect(none.json).toMatchObject({ error: { code: 'GW_UNAUTHORIZED' } });
    const auth = { authorization: `Bearer ${KEY_A}` };
    const forbidden = await fetch(`${envoy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth },
      body: JSON.stringify({ model: 'other', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect([403, 404], await forbidden.text()).toContain(forbidden.status);
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof chat>> | undefined;
    for (let i = 0; i < 3; i++) {
      const r = await chat(envoy, `question ${i}`, auth);
      statuses.push(r.status);
      if (r.status === 429) limited = r;
    }
    expect(statuses).toEqual([200, 200, 429]);
    expect(limited?.json).toMatchObject({ error: { code: 'GW_RATE_LIMITED' } });
    expect(Number(limited?.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await servedCount(sims[0] as RunningSim)).toBe(2);
  });

  it("honours the data plane's subset hint: picks only within it, 503 when none of it fits", async () => {
    const hostOf = (url: string): string => new URL(url).host;
    const within = await setup(3, { policy: 'round-robin', subsetHint: (urls) => [hostOf(urls[2] ?? '')] });
    const served = new Set<string | null>();
    for (let i = 0; i < 4; i++) served.add((await chat(within.envoy, `hinted ${i}`)).endpoint);
    expect(served).toEqual(new Set(['sim2']));
    const outside = await setup(2, { subsetHint: () => ['127.0.0.1:1'] });
    const r = await chat(outside.envoy, 'nowhere');
    expect(r.status).toBe(503);
    expect(r.json).toMatchObject({ error: { code: 'GW_NO_ENDPOINT' } });
  });

  it('prefill/decode: Envoy carries the request to the decode, the picker sends the prefill its copy', async () => {
    const pd = ['--model-path', 'm', '--enable-cache-report', '--enable-metrics', '--disaggregation-mode'];
    const sims = [
      await startSim([...pd, 'prefill', '--disaggregation-bootstrap-port', '0']),
      await startSim([...pd, 'decode', '--sim-pd-timeout-ms', '5000']),
    ];
    const [prefill, decode] = sims as [RunningSim, RunningSim];
    const endpoints: RouteEndpoint[] = [
      buildTestEndpoint('p0', prefill.url, { role: 'prefill', bootstrapPort: bootstrapPortOf(prefill) }),
      buildTestEndpoint('d0', decode.url, { role: 'decode' }),
    ];
    const { envoy, app } = await setupOver([], { endpoints }, sims);
    for (let i = 0; i < 2; i++) {
      const r = await fetch(`${envoy.url}/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', text: ` ba be bo ${i}`, sampling_params: { max_new_tokens: 4 } }),
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-cacheroute-endpoint')).toBe('d0');
      const answer = (await r.json()) as { meta_info: Record<string, unknown> };
      // The decode's answer (4 tokens), which it gives only once the prefill of its room is over.
      expect(answer.meta_info['completion_tokens']).toBe(4);
    }
    expect(await servedCount(prefill)).toBe(2);
    await eventually(() => ['p0', 'd0'].every((id) => app.gateway.inFlightOf(id) === 0));
  });

  it('a picker outage fails closed: Envoy answers 5xx and no runtime sees the request', async () => {
    const { envoy, epp, sims } = await setup(2);
    expect((await chat(envoy, 'before')).status).toBe(200);
    await epp.close();
    const r = await chat(envoy, 'during the outage');
    expect(r.status).toBeGreaterThanOrEqual(500);
    expect((await Promise.all(sims.map(servedCount))).reduce((a, b) => a + b)).toBe(1);
  });

  it('a picker outage fails open for a FailOpen pool: Envoy serves every request from the pool', async () => {
    const { envoy, epp, sims } = await setup(2, { failOpen: true, policy: 'round-robin' });
    const before = await chat(envoy, 'before');
    expect(before.status).toBe(200);
    expect(before.endpoint).toMatch(/^sim[01]$/);
    await epp.close();
    // Envoy stops asking the picker once its health check has seen it down (every second).
    await untilPickerMarkedDown(envoy);
    const during: number[] = [];
    for (let i = 0; i < 4; i++) {
      // A client's own destination is dropped: the pool's round robin chooses.
      const r = await chat(envoy, `during the outage ${i}`, {
        'x-gateway-destination-endpoint': '127.0.0.1:1',
      });
      during.push(r.status);
      expect(r.endpoint, 'no picker answered').toBeNull();
    }
    expect(during).toEqual([200, 200, 200, 200]);
    const served = await Promise.all(sims.map(servedCount));
    expect(served.reduce((a, b) => a + b)).toBe(5);
    // Round robin over the pool, both endpoints.
    expect(served.every((n) => n >= 2)).toBe(true);
  }, 30_000);

  // Envoy 1.40 by default cancels each ext_proc stream when its request is done: one RST_STREAM
  // per request on the picker's connection. Node's rapid-reset guard (1,000 at once, 33 a second)
  // once ended that connection with GOAWAY every ~1,000 requests, and under load the streams in
  // flight on it became Envoy's 500s (docs/picker.md, "Under load").
  it("keeps its connection through thousands of requests that Envoy's default close cancels", async () => {
    const { envoy } = await setup(1, {
      gracefulClose: false,
      policy: 'round-robin',
      simArgs: ['--sim-decode-base-ms', '0', '--sim-decode-per-req-ms', '0'],
    });
    const total = 3000;
    const statuses = new Map<number, number>();
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < total) {
        next++;
        const { status } = await chat(envoy, 'hi');
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    expect(Object.fromEntries(statuses)).toEqual({ 200: total });
    const stats = await envoyCounters(envoy, 'cluster.ext_proc.');
    // Every stream was cancelled by Envoy (the shape that failed), on one connection, never sent away.
    expect(stats['cluster.ext_proc.upstream_rq_tx_reset']).toBe(total);
    expect(stats['cluster.ext_proc.upstream_cx_total']).toBe(1);
    expect(stats['cluster.ext_proc.upstream_cx_close_notify'] ?? 0).toBe(0);
  }, 180_000);

  it('a runtime that drains leaves the pick at the next /ready poll', async () => {
    const clock = new ManualClock();
    const { envoy, app, sims } = await setup(3, {
      policy: 'round-robin',
      app: { clock, readyPollIntervalMs: 1000 },
    });
    const before = new Set<string | null>();
    for (let i = 0; i < 6; i++) before.add((await chat(envoy, `q${i}`)).endpoint);
    expect(before).toEqual(new Set(['sim0', 'sim1', 'sim2']));
    void sims[0]?.server.terminate();
    clock.advance(1000);
    await eventually(() => app.gateway.standing.list().length > 0);
    const after: (string | null)[] = [];
    for (let i = 0; i < 6; i++) after.push((await chat(envoy, `later ${i}`)).endpoint);
    expect(after).not.toContain('sim0');
    expect(new Set(after)).toEqual(new Set(['sim1', 'sim2']));
  });

  it('returns an answer the proxy stored as an ImmediateResponse (both modes share one store)', async () => {
    const { envoy, app, sims } = await setup(1, { reuse: true });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address();
    const proxy = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    const body = {
      model: 'm',
      messages: [{ role: 'user', content: 'What is 2+2?' }],
      max_tokens: 8,
      temperature: 0,
    };
    const post = (base: string): Promise<Response> =>
      fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const first = await post(proxy);
    expect(first.status).toBe(200);
    const viaEnvoy = await post(envoy.url);
    expect(viaEnvoy.status).toBe(200);
    expect(viaEnvoy.headers.get('x-cacheroute-reused')).toBe('store');
    expect(((await viaEnvoy.json()) as { choices: unknown }).choices).toEqual(
      ((await first.json()) as { choices: unknown }).choices,
    );
    expect(await servedCount(sims[0] as RunningSim)).toBe(1);
  });
});

describe('the endpoint picker behind a real Envoy, a recording runtime behind it', () => {
  let up: FakeUpstream | undefined;
  afterEach(async () => {
    await up?.close();
    up = undefined;
  });

  it("stamps the tenant's cache salt into the body the runtime gets", async () => {
    up = await startFakeUpstream();
    const { envoy } = await setupOver([up.url], { tenants: tenantDirectory() });
    const r = await chat(envoy, 'salted?', { authorization: `Bearer ${KEY_A}` });
    expect(r.status).toBe(200);
    const got = up.received[0]?.body;
    expect(got?.['messages']).toEqual([{ role: 'user', content: 'salted?' }]);
    expect(got?.['cache_salt']).toEqual(expect.stringMatching(/.+/));
    expect(got?.['cache_salt']).not.toBe('s');
    // The tenant's key is the picker's to check, never the runtime's to see.
    expect(up.received[0]?.authorization).toBeUndefined();
  });

  it("sends the runtime its own API key in place of the tenant's", async () => {
    const sim = await startSim(['--model-path', 'm', '--api-key', RUNTIME_KEY]);
    const keys = new RuntimeKeys();
    keys.replace({ keys: new Map([['ns/m', new Map([['fp1', RUNTIME_KEY]])]]), issues: [] });
    keys.ready = true;
    const { envoy } = await setupOver([sim.url], { tenants: tenantDirectory(), app: { runtimeKeys: keys } }, [
      sim,
    ]);
    const r = await chat(envoy, 'with the runtime key', { authorization: `Bearer ${KEY_A}` });
    expect(r.status, JSON.stringify(r.json)).toBe(200);
  });

  // Every runtime the operator starts takes requests only with its key (--api-key), and only the
  // picker adds it: a FailOpen fallback without Envoy's own copy got the runtimes' 401.
  it("fails open to runtimes that want their key: Envoy sets each endpoint's, the client's never reaches them", async () => {
    const key = (i: number): string => String(i + 1).repeat(64);
    const sims = await Promise.all(
      [0, 1].map((i) => startSim(['--model-path', 'm', '--enable-metrics', '--api-key', key(i)])),
    );
    const keys = new RuntimeKeys();
    keys.replace({
      keys: new Map([['ns/m', new Map([0, 1].map((i) => [`fp${i}`, key(i)]))]]),
      issues: [],
    });
    keys.ready = true;
    const urls = sims.map((s) => s.url);
    const { envoy, epp } = await setupOver(
      urls,
      {
        policy: 'round-robin',
        endpoint: (i) => ({ fingerprint: `fp${i}` }),
        tenants: tenantDirectory(),
        app: { runtimeKeys: keys },
        failOpen: true,
        failOpenKeys: (u) => Object.fromEntries(u.map((url, i) => [new URL(url).host, key(i)])),
      },
      sims,
    );
    // Picker up: it swaps the tenant's key for the runtime's; Envoy's router then sets the same
    // one again (after ext_proc), for the endpoint the picker named.
    for (let i = 0; i < 2; i++)
      expect((await chat(envoy, `picked ${i}`, { authorization: `Bearer ${KEY_A}` })).status).toBe(200);
    await epp.close();
    await untilPickerMarkedDown(envoy);
    // Picker down: no tenant is checked (FailOpen), and the client's Authorization is overwritten.
    const during: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await chat(envoy, `during the outage ${i}`, { authorization: 'Bearer wrong' });
      during.push(r.status);
      expect(r.endpoint, 'no picker answered').toBeNull();
    }
    expect(during).toEqual([200, 200, 200, 200]);
    // Round robin over both runtimes, each with its own key.
    expect((await Promise.all(sims.map(servedCount))).every((n) => n >= 3)).toBe(true);
  }, 30_000);

  it("Envoy's runtime key wins over the picker's: the router sets it after ext_proc", async () => {
    const sim = await startSim(['--model-path', 'm', '--api-key', RUNTIME_KEY]);
    const keys = new RuntimeKeys();
    keys.replace({ keys: new Map([['ns/m', new Map([['fp1', RUNTIME_KEY]])]]), issues: [] });
    keys.ready = true;
    // Envoy given a stale key (as after a rotation it did not see): the runtime refuses the
    // request the picker had authorised, so the router's header is the one that left Envoy.
    const { envoy } = await setupOver(
      [sim.url],
      {
        tenants: tenantDirectory(),
        app: { runtimeKeys: keys },
        failOpen: true,
        failOpenKeys: (u) => ({ [new URL(u[0] ?? '').host]: 'stale' }),
      },
      [sim],
    );
    const r = await chat(envoy, 'picked, then overwritten', { authorization: `Bearer ${KEY_A}` });
    expect(r.endpoint).toBe('sim0');
    expect(r.status).toBe(401);
  });

  // Envoy closes the ext_proc stream after the last phase it sends: with response trailers SEND
  // (the bootstrap's default) or the body through the picker, the stream lasts to the answer's
  // end; with neither it ends at the response headers (the old bootstrap, untilResponseEnd off).
  for (const [name, opts, heldAfterFirstByte] of [
    ['until its answer ends (response trailers SEND, the default)', {}, true],
    ['until its answer ends (response body through the picker)', { responseBody: true }, true],
    ['at its response headers (trailers SKIP, the old bootstrap)', { untilResponseEnd: false }, false],
  ] as const)
    it(`holds the request in flight ${name}`, async () => {
      const upstream = await startFakeUpstream();
      up = upstream;
      upstream.streamGate = new Gate();
      const { envoy, app } = await setupOver([upstream.url], opts);
      const res = await streamChat(envoy, 'stream');
      expect(res.status).toBe(200);
      await upstream.streamGate.untilWaiting(1);
      if (heldAfterFirstByte) expect(app.gateway.inFlightOf('e')).toBe(1);
      else await eventually(() => app.gateway.inFlightOf('e') === 0);
      upstream.streamGate.open();
      const text = await res.text();
      expect(text).toContain('data: [DONE]');
      await eventually(() => app.gateway.inFlightOf('e') === 0);
    });

  it("holds the admission slot until the answer's end, not its first byte", async () => {
    const upstream = await startFakeUpstream();
    up = upstream;
    upstream.streamGate = new Gate();
    const admission = Admission.parse({ adaptive: false, maxConcurrency: 1, maxQueue: 0 });
    const { envoy, app } = await setupOver([upstream.url], { admission });
    const streaming = await streamChat(envoy, 'a long answer');
    expect(streaming.status).toBe(200);
    await upstream.streamGate.untilWaiting(1);
    // The first answer is decoding: its slot is taken.
    const shed = await chat(envoy, 'while it streams');
    expect(shed.status).toBe(429);
    upstream.streamGate.open();
    expect(await streaming.text()).toContain('data: [DONE]');
    await eventually(() => app.gateway.inFlightOf('e') === 0);
    expect((await chat(envoy, 'after it ended')).status).toBe(200);
  });

  it('lowers the decode load as an answer streams past it, at the pace its streams end', async () => {
    const upstream = await startFakeUpstream();
    up = upstream;
    const clock = new ManualClock();
    const { envoy, app } = await setupOver([upstream.url], { app: { clock } });
    const stream = async (content: string): Promise<{ res: Response; gate: Gate }> => {
      const gate = new Gate();
      upstream.streamGate = gate;
      const res = await streamChat(envoy, content, 64);
      expect(res.status).toBe(200);
      await gate.untilWaiting(1);
      return { res, gate };
    };
    const policy = (): CacheAwarePolicy => app.gateway.policyOf('ns/m') as CacheAwarePolicy;
    // The first answer: 64 tokens predicted (max_tokens), its stream ends 1,000 ms after its first byte.
    const first = await stream('first');
    expect(policy().decodeTokens('e')).toBe(64);
    clock.advance(1000);
    first.gate.open();
    await first.res.text();
    await eventually(() => policy().decodeTokens('e') === 0);
    // The second: held whole at its first byte, then at half that time half of it is still to come.
    const second = await stream('second');
    expect(policy().decodeTokens('e')).toBe(64);
    clock.advance(500);
    expect(policy().decodeTokens('e')).toBe(32);
    second.gate.open();
    await second.res.text();
    await eventually(() => policy().decodeTokens('e') === 0);
  });

  it("learns its answers' real output lengths from the runtime's KV events (ADR 0049)", async () => {
    const sim = await startSimWithKvEvents(['--model-path', 'm', '--page-size', '1']);
    const events = routeEventsOf(sim, 1);
    // The simulator's own tokenizer: the picker knows each prompt's exact tokens, as --tokenizers gives it.
    const { envoy, app, epp } = await setupOver(
      [sim.url],
      { endpoint: () => ({ events }), app: { tokenizers: new Map([['m', buildSimTokenizer()]]) } },
      [sim],
    );
    await until(() => app.gateway.kvIndex.usability('sim0').usable);
    for (const [i, tokens] of [12, 30, 7].entries()) {
      const res = await streamChat(envoy, `answer ${i} of three`, tokens);
      expect(res.status).toBe(200);
      await res.text();
    }
    await until(() => epp.decodeEstimate.lengthsOf('sim0')?.observations === 3);
    expect(epp.decodeEstimate.realPaceOf('sim0')).toBeGreaterThan(0);
  });

  it('sheds with 429 and Retry-After when admission is full, as an ImmediateResponse', async () => {
    up = await startFakeUpstream();
    up.headGate = new Gate();
    const admission = Admission.parse({ adaptive: false, maxConcurrency: 1, maxQueue: 0 });
    const { envoy } = await setupOver([up.url], { admission });
    const held = chat(envoy, 'first');
    await up.headGate.untilWaiting(1);
    const shed = await chat(envoy, 'second');
    expect(shed.status).toBe(429);
    expect(Number(shed.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(up.received).toHaveLength(1);
    up.headGate.open();
    expect((await held).status).toBe(200);
  });

  // The pick's wait is aborted only while it waits (an abort costs a DOMException, so a stream
  // ending after its pick aborts nothing): a client leaving mid-wait must still free its place.
  it('gives up its place in the admission queue when the client leaves while it waits', async () => {
    up = await startFakeUpstream();
    up.headGate = new Gate();
    const admission = Admission.parse({ adaptive: false, maxConcurrency: 1, maxQueue: 1 });
    const { app, envoy } = await setupOver([up.url], { admission });
    const queued = (): number =>
      app.gateway.admission.entries().reduce((n, [, ctl]) => n + ctl.snapshot().queued, 0);
    const held = chat(envoy, 'first');
    await up.headGate.untilWaiting(1);
    const leaving = new AbortController();
    const gone = fetch(`${envoy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'second' }], max_tokens: 4 }),
      signal: leaving.signal,
    }).catch((err: unknown) => err);
    await until(() => queued() === 1);
    leaving.abort();
    await gone;
    await until(() => queued() === 0);
    up.headGate.open();
    expect((await held).status).toBe(200);
    expect(up.received).toHaveLength(1);
  });
});

/** Polls `cond` until it holds (a bound only against a hang; no timing is asserted). */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('condition not reached in 4 s');
}
