// What the fuzzing (app.fuzz.test.ts) found, one test each, against the SGLang
// simulator over real HTTP: a request at fault is the client's 4xx, reaches no
// runtime, is not retried on another and takes no runtime out of routing.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { bootstrapPortOf, startSim, type RunningSim } from '../../test/support/sim/testing.ts';
import { build, type BuildOptions } from './app.ts';
import { MAX_BATCH } from './request/shape.ts';
import type { RouteEndpoint } from './routing/table.ts';
import { StaticRoutingTable } from './routing/table.ts';
import { sendRaw } from '../../test/support/gateway/raw-http.ts';

let app: FastifyInstance | undefined;
let sims: RunningSim[] = [];
let servers: http.Server[] = [];

afterEach(async () => {
  await app?.close();
  app = undefined;
  await Promise.all(sims.map((s) => s.close()));
  sims = [];
  for (const s of servers) s.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  servers = [];
});

function endpoint(id: string, url: string): RouteEndpoint {
  return { id, url, role: 'standalone', fingerprint: 'fp', verified: true, ready: true };
}

async function startGateway(
  endpoints: RouteEndpoint[],
  opts: Partial<BuildOptions> = {},
): Promise<{ url: string; port: number }> {
  app = build({
    table: new StaticRoutingTable([
      {
        model: 'm',
        deployment: 'ns/m',
        fingerprint: 'fp',
        salt: 's',
        routing: RoutingSettings.parse({ policy: 'round-robin' }),
        admission: Admission.parse({}),
        reuse: ResultReuse.parse({ enabled: true, reusableWhen: ['temperatureZero'] }),
        endpoints,
      },
    ]),
    ...opts,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, port };
}

/** Two simulators behind the gateway; `received()` counts every request they were handed. */
async function withSims(opts: Partial<BuildOptions> = {}) {
  sims = await Promise.all([0, 1].map(() => startSim(['--model-path', 'm'])));
  const gw = await startGateway(
    sims.map((s, i) => endpoint(`sim${i}`, s.url)),
    opts,
  );
  return { ...gw, received: () => sims.reduce((n, s) => n + s.server.requestsReceived, 0) };
}

async function post(url: string, body: string | Buffer): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text) as unknown };
}

const codeOf = (json: unknown): unknown => (json as { error?: { code?: unknown } }).error?.code;
const chat = (extra: string): string =>
  `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":2${extra}}`;

describe('a request at fault is the client’s 4xx, sent to no runtime', () => {
  it('nesting 10,000 deep in a field the gateway passes through: 400, where it was 502 after two runtimes', async () => {
    const gw = await withSims();
    const deep = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
    // Without the bound, serialising it for the runtime overflowed the stack; that was taken for
    // a failed connection: retried on the second runtime, both marked down, 502.
    const plain = await post(`${gw.url}/v1/chat/completions`, chat(`,"x":${deep}`));
    expect([plain.status, codeOf(plain.json)]).toEqual([400, 'GW_BAD_REQUEST']);
    // Greedy: the reuse key (a canonical JSON of the body) overflowed too, a 500.
    const greedy = await post(`${gw.url}/v1/chat/completions`, chat(`,"temperature":0,"x":${deep}`));
    expect([greedy.status, codeOf(greedy.json)]).toEqual([400, 'GW_BAD_REQUEST']);
    expect(gw.received()).toBe(0);
    expect(app?.gateway.standing.list()).toEqual([]);
  });

  it('a body that cannot be serialised for the runtime is refused once, blaming no runtime', async () => {
    const gw = await withSims();
    // Past the HTTP parser's bound (a caller of serve() directly): the forward path's own defence.
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const served = app?.gateway.serve({
      kind: 'completion',
      path: '/v1/completions',
      id: 'r1',
      body: { model: 'm', prompt: 'hi', x: deep },
      headers: {},
      signal: new AbortController().signal,
      openSink: () => {
        throw new Error('not streamed');
      },
      log: app.log,
    });
    await expect(served).rejects.toMatchObject({ code: 'GW_BAD_REQUEST' });
    expect(gw.received()).toBe(0);
    expect(app?.gateway.standing.list()).toEqual([]);
    // Both runtimes still serve.
    expect((await post(`${gw.url}/v1/completions`, '{"model":"m","prompt":"a","max_tokens":1}')).status).toBe(
      200,
    );
  });

  it('a body that grows past the limit when re-encoded (bytes that are not UTF-8 triple) is 413, not sent', async () => {
    const limit = 1024 * 1024;
    const gw = await withSims({ bodyLimitBytes: limit });
    const raw = Buffer.concat([
      Buffer.from('{"model":"m","max_tokens":1,"prompt":"'),
      Buffer.alloc(400_000, 0xff), // 400 kB in, 1.2 MB once each byte is U+FFFD
      Buffer.from('"}'),
    ]);
    const res = await post(`${gw.url}/v1/completions`, raw);
    expect([res.status, codeOf(res.json)]).toEqual([413, 'GW_PAYLOAD_TOO_LARGE']);
    expect(gw.received()).toBe(0);
    expect(app?.gateway.standing.list()).toEqual([]);
  });

  it(`a batch of more than ${MAX_BATCH} prompts is refused (the runtime schedules each, admission counts one)`, async () => {
    const gw = await withSims();
    const text = Array.from({ length: MAX_BATCH + 1 }, () => 'a');
    const res = await post(`${gw.url}/generate`, JSON.stringify({ model: 'm', text }));
    expect([res.status, codeOf(res.json)]).toEqual([400, 'GW_BAD_REQUEST']);
    expect(JSON.stringify(res.json)).toContain(`at most ${MAX_BATCH} prompts`);
    expect(gw.received()).toBe(0);
  });

  it('60 MiB of empty objects is refused before it is parsed (it would take gigabytes once parsed)', async () => {
    const gw = await withSims();
    const body = `{"model":"m","prompt":"hi","x":[${'{},'.repeat(200_000)}{}]}`;
    const res = await post(`${gw.url}/v1/completions`, body);
    expect([res.status, codeOf(res.json)]).toEqual([400, 'GW_BAD_REQUEST']);
    expect(JSON.stringify(res.json)).toContain('JSON objects and arrays');
    expect(gw.received()).toBe(0);
  });

  it('the query string is not forwarded: a 5,000-character one reaches the runtime as the bare path', async () => {
    const gw = await withSims();
    const urls: string[] = [];
    for (const s of sims)
      s.server.server.on('request', (req: http.IncomingMessage) => urls.push(req.url ?? ''));
    const res = await post(`${gw.url}/v1/chat/completions?q=${'a'.repeat(5_000)}`, chat(''));
    expect(res.status).toBe(200);
    expect(urls).toEqual(['/v1/chat/completions']);
  });
});

describe('prefill/decode: a refusal by the prefill is the client’s answer', () => {
  it('a request the runtimes refuse is their 400, where it was 502 with the decode marked down', async () => {
    const pd = ['--model-path', 'm', '--disaggregation-mode'];
    sims = [
      await startSim([...pd, 'prefill', '--disaggregation-bootstrap-port', '0']),
      await startSim([...pd, 'decode', '--sim-pd-timeout-ms', '5000']),
    ];
    const [prefill, decode] = sims as [RunningSim, RunningSim];
    const gw = await startGateway([
      { ...endpoint('p0', prefill.url), role: 'prefill', bootstrapPort: bootstrapPortOf(prefill) },
      { ...endpoint('d0', decode.url), role: 'decode' },
    ]);
    // Refused by both; the prefill answers first and used to abort the decode, which was then
    // taken for a failed connection. Several rounds: which one answers first is a race.
    const refused = [
      { model: 'm', prompt: 'hi', max_tokens: -1 },
      { model: 'm', prompt: 'hi', top_p: 7 },
      { model: 'm', prompt: 'a'.repeat(200_000), max_tokens: 1 },
    ];
    for (let round = 0; round < 3; round++)
      for (const body of refused) {
        const res = await post(`${gw.url}/v1/completions`, JSON.stringify(body));
        expect(res.status).toBe(400);
        expect(res.json).toMatchObject({ object: 'error' });
      }
    expect(app?.gateway.standing.list()).toEqual([]);
    const ok = await post(`${gw.url}/v1/completions`, '{"model":"m","prompt":"hi","max_tokens":2}');
    expect(ok.status).toBe(200);
  });
});

describe('refusals before any route have the JSON error body', () => {
  it('request line and headers past 16 KiB: 431 GW_HEADERS_TOO_LARGE', async () => {
    const gw = await withSims();
    const res = await fetch(`${gw.url}/v1/chat/completions?q=${'a'.repeat(20_000)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: chat(''),
    });
    expect(res.status).toBe(431);
    expect(codeOf(await res.json())).toBe('GW_HEADERS_TOO_LARGE');
    expect(gw.received()).toBe(0);
  });

  it('a broken request line, a %-escape that does not decode, CONNECT', async () => {
    const gw = await withSims();
    const answers = await Promise.all(
      [
        'POST /v1/completions HTTP/1.1x\r\nHost: g\r\n\r\n',
        'POST /v1/%zz HTTP/1.1\r\nHost: g\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
        'CONNECT gateway:443 HTTP/1.1\r\nHost: gateway:443\r\n\r\n',
      ].map((r) => sendRaw(gw.port, Buffer.from(r))),
    );
    expect(answers.map((a) => [a?.status, codeOf(JSON.parse(a?.body.toString() ?? 'null'))])).toEqual([
      [400, 'GW_BAD_REQUEST'],
      [400, 'GW_BAD_REQUEST'],
      [404, 'GW_NOT_FOUND'],
    ]);
    expect(gw.received()).toBe(0);
  });
});

describe('a runtime’s own refusal is passed back once, not retried on another runtime', () => {
  /** A runtime that answers the status the request body names in `x_status`, counting requests. */
  async function statusRuntime(hits: { n: number }): Promise<string> {
    const server = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        hits.n++;
        const status = Number((JSON.parse(raw) as { x_status?: unknown }).x_status ?? 200);
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'error', message: `refused with ${status}`, code: status }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    servers.push(server);
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it.each([400, 404, 413, 414, 422, 429, 431])('%i: the client gets it, from one runtime', async (status) => {
    const hits = { n: 0 };
    const gw = await startGateway([
      endpoint('a', await statusRuntime(hits)),
      endpoint('b', await statusRuntime(hits)),
    ]);
    const res = await post(
      `${gw.url}/v1/completions`,
      JSON.stringify({ model: 'm', prompt: 'x', x_status: status }),
    );
    expect(res.status).toBe(status);
    expect(res.json).toMatchObject({ message: `refused with ${status}` });
    expect(hits.n).toBe(1);
    expect(app?.gateway.standing.list()).toEqual([]);
  });

  it('500 (the runtime failed): tried on the other runtime, then 502', async () => {
    const hits = { n: 0 };
    const gw = await startGateway([
      endpoint('a', await statusRuntime(hits)),
      endpoint('b', await statusRuntime(hits)),
    ]);
    const res = await post(
      `${gw.url}/v1/completions`,
      JSON.stringify({ model: 'm', prompt: 'x', x_status: 500 }),
    );
    expect([res.status, codeOf(res.json)]).toEqual([502, 'GW_UPSTREAM_ERROR']);
    expect(hits.n).toBe(2);
  });
});
