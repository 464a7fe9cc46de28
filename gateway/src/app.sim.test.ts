// The gateway against the SGLang simulator (test/sim), in-process on virtual
// time, over real HTTP: cache affinity, salts, streaming, reuse, retries.

import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { Admission, GATEWAY_CACHE_REPORT_PATH, GatewayCacheReport, ResultReuse, RoutingSettings } from '#api';
import {
  bootstrapPortOf,
  postJson,
  postSse,
  startSim,
  type RunningSim,
} from '../../test/support/sim/testing.ts';
import { build } from './app.ts';
import type { CacheReport } from './policies/index.ts';
import { StaticRoutingTable, type ModelRoute } from './routing/table.ts';
import { eventually } from '../../test/support/gateway/fake-upstream.ts';

type Json = Record<string, unknown>;
const ids = (from: number, n: number): number[] =>
  Array.from({ length: n }, (_, i) => 300 + ((from + i) % 30000));
const meta = (r: { json: unknown }): Json => (r.json as { meta_info: Json }).meta_info;

let sims: RunningSim[] = [];
let app: FastifyInstance | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
  await Promise.all(sims.map((s) => s.close()));
  sims = [];
});

async function setup(
  simArgs: string[][],
  settings: { routing?: object; reuse?: object; admission?: object } = {},
): Promise<string> {
  sims = await Promise.all(
    simArgs.map((a) => startSim(['--model-path', 'm', '--enable-cache-report', '--enable-metrics', ...a])),
  );
  const route: ModelRoute = {
    model: 'm',
    deployment: 'ns/m',
    fingerprint: 'fp1',
    salt: 'tenant-a',
    routing: RoutingSettings.parse({ policy: 'cache-aware', ...settings.routing }),
    admission: Admission.parse({ ...settings.admission }),
    reuse: ResultReuse.parse({ ...settings.reuse }),
    endpoints: sims.map((s, i) => ({
      id: `sim${i}`,
      url: s.url,
      role: 'standalone',
      fingerprint: 'fp1',
      verified: true,
      ready: true,
    })),
  };
  app = build({ table: new StaticRoutingTable([route]) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

describe('gateway ↔ simulator', () => {
  it('cache-aware: a shared prefix returns to the endpoint that holds it, and the runtime confirms the hit', () =>
    setup([[], [], []]).then(async (gw) => {
      const prompt = ids(0, 1000);
      const first = await postJson(`${gw}/generate`, {
        model: 'm',
        input_ids: prompt,
        sampling_params: { max_new_tokens: 1 },
      });
      expect(first.status).toBe(200);
      const owner = first.headers.get('x-cacheroute-endpoint');
      for (let i = 0; i < 4; i++) {
        const r = await postJson(`${gw}/generate`, {
          model: 'm',
          input_ids: [...prompt, ...ids(5000 + i * 50, 50)],
          sampling_params: { max_new_tokens: 1 },
        });
        expect(r.headers.get('x-cacheroute-endpoint')).toBe(owner);
        expect(meta(r)['cached_tokens']).toBeGreaterThanOrEqual(960);
      }
    }));

  it('stamps the salt: the runtime keeps the tenant prefix apart from unsalted traffic', () =>
    setup([[]]).then(async (gw) => {
      const prompt = ids(0, 500);
      await postJson(`${gw}/generate`, {
        model: 'm',
        input_ids: prompt,
        sampling_params: { max_new_tokens: 1 },
      });
      const direct = await postJson(`${sims[0]?.url}/generate`, {
        input_ids: prompt,
        sampling_params: { max_new_tokens: 1 },
      });
      expect(meta(direct)['cached_tokens']).toBe(0);
      const viaGateway = await postJson(`${gw}/generate`, {
        model: 'm',
        input_ids: prompt,
        sampling_params: { max_new_tokens: 1 },
      });
      expect(meta(viaGateway)['cached_tokens']).toBeGreaterThan(0);
    }));

  it('streams OpenAI chat completions through', () =>
    setup([[]]).then(async (gw) => {
      const r = await postSse(`${gw}/v1/chat/completions`, {
        model: 'm',
        messages: [{ role: 'user', content: 'Tell me a story' }],
        max_tokens: 8,
        stream: true,
      });
      expect(r.status).toBe(200);
      expect(r.events.length).toBeGreaterThan(2);
      expect(r.events.at(-1)).toBe('[DONE]');
      expect(app?.gateway.inFlightOf('sim0')).toBe(0);
    }));

  it("a streamed chat that did not ask for usage still teaches the policy the runtime's cache report, and the client sees no usage event", () =>
    setup([[]]).then(async (gw) => {
      const reports: (CacheReport | undefined)[] = [];
      const stream = (includeUsage: boolean) =>
        postSse(`${gw}/v1/chat/completions`, {
          model: 'm',
          messages: [{ role: 'user', content: 'Tell me a story about a ship' }],
          max_tokens: 4,
          stream: true,
          ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
        });
      const first = await stream(false); // the policy exists once it served a request
      expect(first.events.some((e) => e.includes('"usage"'))).toBe(false);
      const policy = app?.gateway.policyOf('ns/m');
      if (!policy?.observe) throw new Error('no policy');
      const observe = policy.observe.bind(policy);
      policy.observe = (o) => {
        if (o.kind === 'completed') reports.push(o.report);
        observe(o);
      };
      const quiet = await stream(false);
      expect(quiet.events.at(-1)).toBe('[DONE]');
      expect(quiet.events.some((e) => e.includes('"usage"'))).toBe(false);
      expect(reports.at(-1)).toMatchObject({
        promptTokens: expect.any(Number),
        cachedTokens: expect.any(Number),
      });
      expect(reports.at(-1)?.cachedTokens).toBeGreaterThan(0);
      const asked = await stream(true);
      expect(asked.events.filter((e) => e.includes('"usage"'))).toHaveLength(1);
    }));

  it('reuses a greedy result and de-duplicates concurrent identical requests', () =>
    setup([[]], { reuse: { enabled: true } }).then(async (gw) => {
      const body = {
        model: 'm',
        messages: [{ role: 'user', content: 'What is 2+2?' }],
        max_tokens: 8,
        temperature: 0,
      };
      const [x, y] = await Promise.all([
        postJson(`${gw}/v1/chat/completions`, body),
        postJson(`${gw}/v1/chat/completions`, body),
      ]);
      const z = await postJson(`${gw}/v1/chat/completions`, body);
      expect([x.status, y.status, z.status]).toEqual([200, 200, 200]);
      // One generated; the other shared it in flight or, if it came late, from the store.
      const sources = [x, y].map((r) => r.headers.get('x-cacheroute-reused'));
      expect(sources.filter((s) => s === null)).toHaveLength(1);
      expect(sources.filter((s) => s === 'inflight' || s === 'store')).toHaveLength(1);
      expect(z.headers.get('x-cacheroute-reused')).toBe('store');
      expect((z.json as { choices: unknown }).choices).toEqual((x.json as { choices: unknown }).choices);
      const metrics = await (await fetch(`${sims[0]?.url}/metrics`)).text();
      expect(metrics).toMatch(/sglang:num_requests_total\{[^}]*\} 1\b/);
    }));

  it('retries on another endpoint when the first fails before answering', () =>
    setup(
      [
        ['--sim-fail-first', '1'],
        ['--sim-fail-first', '1'],
      ],
      { routing: { policy: 'round-robin' } },
    ).then(async (gw) => {
      const r = await postJson(`${gw}/generate`, {
        model: 'm',
        text: 'hello',
        sampling_params: { max_new_tokens: 1 },
      });
      // Both fail their first request: the retry hits the second's failure → 502, no upstream text.
      expect(r.status).toBe(502);
      expect(JSON.stringify(r.json)).not.toContain('Simulated');
      const ok = await postJson(`${gw}/generate`, {
        model: 'm',
        text: 'hello',
        sampling_params: { max_new_tokens: 1 },
      });
      expect(ok.status).toBe(200);
    }));

  it('prefill/decode: pairs same-fingerprint endpoints, stamps bootstrap, returns the decode answer', async () => {
    const pd = ['--model-path', 'm', '--enable-cache-report', '--disaggregation-mode'];
    sims = [
      await startSim([...pd, 'prefill', '--disaggregation-bootstrap-port', '0']),
      await startSim([...pd, 'decode', '--sim-pd-timeout-ms', '5000']),
      await startSim([...pd, 'decode', '--sim-pd-timeout-ms', '50']), // old revision: must never pair
    ];
    const [prefill, decode, oldDecode] = sims as [RunningSim, RunningSim, RunningSim];
    const bsPort = bootstrapPortOf(prefill);
    const route: ModelRoute = {
      model: 'm',
      deployment: 'ns/m',
      fingerprint: 'fp1',
      salt: 'tenant-a',
      routing: RoutingSettings.parse({}),
      admission: Admission.parse({}),
      reuse: ResultReuse.parse({}),
      endpoints: [
        {
          id: 'p0',
          url: prefill.url,
          role: 'prefill',
          fingerprint: 'fp1',
          verified: true,
          ready: true,
          bootstrapPort: bsPort,
        },
        { id: 'd0', url: decode.url, role: 'decode', fingerprint: 'fp1', verified: true, ready: true },
        { id: 'd-old', url: oldDecode.url, role: 'decode', fingerprint: 'fp0', verified: true, ready: true },
      ],
    };
    app = build({ table: new StaticRoutingTable([route]) });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const gw = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    for (let i = 0; i < 3; i++) {
      const r = await postJson(`${gw}/generate`, {
        model: 'm',
        text: ' ba be bo',
        sampling_params: { max_new_tokens: 4 },
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-cacheroute-endpoint')).toBe('d0');
      expect(meta(r)['completion_tokens']).toBe(4); // the decode's answer, not the prefill's single token
    }
    const stream = await postSse(`${gw}/v1/chat/completions`, {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
      stream: true,
    });
    expect(stream.events.at(-1)).toBe('[DONE]');
    await eventually(() => ['p0', 'd0', 'd-old'].every((id) => app?.gateway.inFlightOf(id) === 0));
    // A streamed pair request is counted like a whole one (make run REAL_SGLANG=pd once seemed not to).
    const metrics = (await app.inject({ url: '/metrics' })).body;
    expect(metrics).toContain('cacheroute_gateway_requests_total{model="m",route="/generate",code="200"} 3');
    expect(metrics).toContain(
      'cacheroute_gateway_requests_total{model="m",route="/v1/chat/completions",code="200"} 1',
    );
  });

  // The bug this guards: the prefill's answer was never taken as its first byte, so a prefill
  // endpoint never learned a rate and a prefill part's predicted backlog (the signal its
  // autoscaler reads, cacheroute_prefill_backlog_seconds) was unknown whenever it had work.
  it('prefill/decode: the prefill endpoint learns its prefill rate from its answers', async () => {
    const pd = ['--model-path', 'm', '--enable-cache-report', '--disaggregation-mode'];
    sims = [
      await startSim([...pd, 'prefill', '--disaggregation-bootstrap-port', '0']),
      await startSim([...pd, 'decode', '--sim-pd-timeout-ms', '5000']),
    ];
    const [prefill, decode] = sims as [RunningSim, RunningSim];
    const bsPort = bootstrapPortOf(prefill);
    const route: ModelRoute = {
      model: 'm',
      deployment: 'ns/m',
      fingerprint: 'fp1',
      salt: 's',
      routing: RoutingSettings.parse({}),
      admission: Admission.parse({}),
      reuse: ResultReuse.parse({}),
      endpoints: [
        {
          id: 'p0',
          url: prefill.url,
          role: 'prefill',
          fingerprint: 'fp1',
          verified: true,
          ready: true,
          bootstrapPort: bsPort,
        },
        { id: 'd0', url: decode.url, role: 'decode', fingerprint: 'fp1', verified: true, ready: true },
      ],
    };
    app = build({ table: new StaticRoutingTable([route]) });
    const r = await app.inject({
      method: 'POST',
      url: '/generate',
      payload: { model: 'm', text: ' ba'.repeat(2000), sampling_params: { max_new_tokens: 2 } },
    });
    expect(r.statusCode).toBe(200);
    const report = GatewayCacheReport.parse((await app.inject({ url: GATEWAY_CACHE_REPORT_PATH })).json());
    const load = report.deployments[0]?.endpoints.find((e) => e.pod === 'p0')?.load;
    expect(load?.pendingPrefillTokens).toBe(0);
    expect(load?.prefillTokensPerSecond).toBeGreaterThan(0);
  });

  it('prefill/decode: no decode of the prefill identity → 503, nothing sent', async () => {
    sims = [await startSim(['--model-path', 'm'])];
    const route: ModelRoute = {
      model: 'm',
      deployment: 'ns/m',
      fingerprint: 'fp1',
      salt: 's',
      routing: RoutingSettings.parse({}),
      admission: Admission.parse({}),
      reuse: ResultReuse.parse({}),
      endpoints: [
        { id: 'p0', url: sims[0]!.url, role: 'prefill', fingerprint: 'fp1', verified: true, ready: true },
        { id: 'd0', url: sims[0]!.url, role: 'decode', fingerprint: 'fp0', verified: true, ready: true },
      ],
    };
    app = build({ table: new StaticRoutingTable([route]) });
    const r = await app.inject({ method: 'POST', url: '/generate', payload: { text: 'x' } });
    expect(r.statusCode).toBe(503);
    expect(r.json()).toMatchObject({ error: { code: 'GW_NO_ENDPOINT' } });
  });
});
