// Bad input never hurts: property-based fuzzing (fast-check, fixed seed) of
// every route and header, over real HTTP on loopback (Node's own parser and
// limits are part of what is tested; app.inject would skip them), in front of
// two SGLang simulators that count every request they are handed. Properties:
// no 5xx (none is deliberate here: the runtimes are healthy and admission is
// wide, so 502/503/504 would each be a bug), no uncaught error, a JSON error
// body in OpenAI's shape for every error the gateway makes itself, no runtime
// request for anything the gateway refused, exactly one for what it passed on
// (a runtime's refusal of the request is the client's answer, not retried),
// and the heap back where it was after huge requests. Prints one JSON line.

import type { AddressInfo } from 'node:net';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { Client } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digestApiKey } from '#api/gateway-keys.ts';
import { Admission, ResultReuse, RoutingSettings } from '#api';
import { bootstrapPortOf, startSim, type RunningSim } from '../../test/support/sim/testing.ts';
import { build } from './app.ts';
import { StaticRoutingTable, type ModelRoute } from './routing/table.ts';
import { buildTenantDirectory } from './tenancy/build-directory.ts';
import { KeyDirectory } from './tenancy/tenant.ts';
import { eventually } from '../../test/support/gateway/fake-upstream.ts';
import { render } from '../../test/support/gateway/fuzz-bodies.ts';
import { describeCase, httpCase, type HttpCase } from '../../test/support/gateway/fuzz-requests.ts';
import { describeRaw, isComplete, rawCase, renderRaw } from '../../test/support/gateway/fuzz-raw.ts';
import { sendRaw } from '../../test/support/gateway/raw-http.ts';

const SEED = 20261201;
const HTTP_CASES = 3000;
const RAW_CASES = 400;
const HUGE_REQUESTS = 8;
/** The same properties with API keys checked (--auth keys): a key of either tenant, or none. */
const KEYS_MODE_CASES = 1000;
const KEY_ALL = 'fuzz-key-all-models-'.padEnd(40, 'a');
const KEY_M_ONLY = 'fuzz-key-model-m-only-'.padEnd(40, 'b');

// A full collection between measurements, without a --expose-gc flag on the test runner.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

let sims: RunningSim[] = [];
/** A prefill/decode pair serving model `pd`. */
let pair: RunningSim[] = [];
let app: FastifyInstance;
let port = 0;
let client: Client;
/** The same table behind a gateway that checks keys. */
let keysApp: FastifyInstance;
let keysClient: Client;
const uncaught: unknown[] = [];
const onUncaught = (err: unknown): void => void uncaught.push(err);

const summary = {
  seed: SEED,
  cases: 0,
  statuses: {} as Record<string, number>,
  codes: {} as Record<string, number>,
  /** Wall time spent per kind of body (where the suite's time goes). */
  msByBody: {} as Record<string, number>,
  reachedRuntime: 0,
  noAnswer: 0,
  '5xx': 0,
  uncaught: 0,
  /** Statuses of the keys-mode cases (also counted in `statuses`). */
  keysMode: {} as Record<string, number>,
};

function count(into: Record<string, number>, key: string): void {
  into[key] = (into[key] ?? 0) + 1;
}

/** Requests each kind of runtime was handed so far. */
interface Reached {
  readonly standalone: number;
  readonly prefill: number;
  readonly decode: number;
}
function reachedSoFar(): Reached {
  const [prefill, decode] = pair.map((s) => s.server.requestsReceived);
  return {
    standalone: sims.reduce((n, s) => n + s.server.requestsReceived, 0),
    prefill: prefill ?? 0,
    decode: decode ?? 0,
  };
}
function reachedSince(before: Reached): Reached {
  const now = reachedSoFar();
  return {
    standalone: now.standalone - before.standalone,
    prefill: now.prefill - before.prefill,
    decode: now.decode - before.decode,
  };
}
/** A pair's prefill may still be in flight when the decode's answer is out: wait for both. */
async function pairSettled(): Promise<void> {
  await eventually(() => ['p0', 'd0'].every((id) => app.gateway.inFlightOf(id) === 0));
}

beforeAll(async () => {
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUncaught);
  sims = await Promise.all(
    [0, 1].map(() => startSim(['--model-path', 'm', '--enable-cache-report', '--enable-metrics'])),
  );
  const route: ModelRoute = {
    model: 'm',
    deployment: 'ns/m',
    fingerprint: 'fp',
    salt: 'tenant-a',
    routing: RoutingSettings.parse({ policy: 'cache-aware' }),
    admission: Admission.parse({}),
    // Reuse on: greedy requests go through the reuse key (a canonical JSON of the body).
    reuse: ResultReuse.parse({ enabled: true, reusableWhen: ['temperatureZero'] }),
    endpoints: sims.map((s, i) => ({
      id: `sim${i}`,
      url: s.url,
      role: 'standalone',
      fingerprint: 'fp',
      verified: true,
      ready: true,
    })),
  };
  const pd = ['--model-path', 'pd', '--disaggregation-mode'];
  pair = [
    await startSim([...pd, 'prefill', '--disaggregation-bootstrap-port', '0']),
    await startSim([...pd, 'decode', '--sim-pd-timeout-ms', '5000']),
  ];
  const [prefill, decode] = pair as [RunningSim, RunningSim];
  const bootstrapPort = bootstrapPortOf(prefill);
  const verified = { fingerprint: 'fp', verified: true, ready: true } as const;
  const pdRoute: ModelRoute = {
    ...route,
    model: 'pd',
    deployment: 'ns/pd',
    reuse: ResultReuse.parse({}),
    endpoints: [
      { id: 'p0', url: prefill.url, role: 'prefill', bootstrapPort, ...verified },
      { id: 'd0', url: decode.url, role: 'decode', ...verified },
    ],
  };
  app = build({ table: new StaticRoutingTable([route, pdRoute]) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as AddressInfo).port;
  client = new Client(`http://127.0.0.1:${port}`, { headersTimeout: 60_000, bodyTimeout: 60_000 });
  keysApp = build({ table: new StaticRoutingTable([route, pdRoute]), tenants: buildFuzzTenants() });
  await keysApp.listen({ port: 0, host: '127.0.0.1' });
  const keysPort = (keysApp.server.address() as AddressInfo).port;
  keysClient = new Client(`http://127.0.0.1:${keysPort}`, { headersTimeout: 60_000, bodyTimeout: 60_000 });
});

afterAll(async () => {
  await client.close();
  await app.close();
  await keysClient.close();
  await keysApp.close();
  await Promise.all([...sims, ...pair].map((s) => s.close()));
  process.off('uncaughtException', onUncaught);
  process.off('unhandledRejection', onUncaught);
  summary.uncaught = uncaught.length;
  console.log(JSON.stringify({ fuzz: 'gateway', ...summary }));
});

interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Buffer;
}

/**
 * fast-check's own report prints the whole counterexample (a 60 MiB body, 150 headers):
 * this one names the case in a line and keeps the property's error.
 */
function reportBriefly<T>(describe: (c: T) => string): (d: fc.RunDetails<[T]>) => void {
  return (d) => {
    if (!d.failed) return;
    const c = d.counterexample?.[0];
    const what = c === undefined ? 'no counterexample' : describe(c);
    throw new Error(`seed ${d.seed}, case ${d.numRuns}: ${what}\n${String(d.errorInstance)}`, {
      cause: d.errorInstance,
    });
  };
}

/** Two tenants in namespace ns: one may call both models, one only `m`. */
function buildFuzzTenants(): KeyDirectory {
  const tenant = (name: string, models: string[]) => ({
    apiVersion: 'cacheroute.dev/v1alpha1',
    kind: 'Tenant',
    metadata: { namespace: 'ns', name },
    spec: { apiKeys: { secretRef: { name: `${name}-keys` } }, models },
  });
  const secret = (name: string, key: string) => ({ [`ns/${name}-keys`]: { k: digestApiKey(key) } });
  const dir = new KeyDirectory();
  dir.replace(
    buildTenantDirectory({
      tenants: [tenant('all', ['m', 'pd']), tenant('m-only', ['m'])],
      keyDigests: { ...secret('all', KEY_ALL), ...secret('m-only', KEY_M_ONLY) },
    }),
  );
  dir.ready = true;
  return dir;
}

/** A generated case with a tenant's key put first (later authorization headers make it invalid). */
const keysModeCase: fc.Arbitrary<HttpCase> = fc
  .tuple(httpCase, fc.constantFrom(KEY_ALL, KEY_M_ONLY, undefined))
  .map(([c, key]) =>
    key === undefined ? c : { ...c, headers: [['authorization', `Bearer ${key}`] as const, ...c.headers] },
  );

async function send(c: HttpCase, via: Client = client): Promise<Answer> {
  const res = await via.request({
    method: c.method,
    path: c.path,
    headers: c.headers.flat(),
    body: render(c.body) ?? null,
  });
  const body = Buffer.from(await res.body.arrayBuffer());
  return { status: res.statusCode, headers: res.headers, body };
}

/**
 * What must hold of any answer, whoever made it. `reached`: requests the runtimes were handed
 * meanwhile (a pair's counted once it settled).
 */
function checkAnswer(
  a: { status: number; body: Buffer; endpoint: unknown; method: string },
  reached: Reached,
): void {
  count(summary.statuses, String(a.status));
  summary.reachedRuntime += reached.standalone + reached.prefill + reached.decode;
  if (a.status >= 500) summary['5xx']++;
  expect(a.status, 'no 5xx').toBeLessThan(500);
  if (a.endpoint === 'p0' || a.endpoint === 'd0') {
    // A pair's answer (its refusal included): each of the two asked at most once, nothing else.
    expect(reached.standalone).toBe(0);
    expect(Math.max(reached.prefill, reached.decode), 'a pair is asked once').toBe(1);
  } else if (a.endpoint !== undefined) {
    // A runtime's answer passed on (its own 4xx included): one runtime asked, once.
    expect(reached, 'a runtime answer comes from one request, not retried').toEqual({
      standalone: 1,
      prefill: 0,
      decode: 0,
    });
  } else {
    expect(reached, 'nothing the gateway answered itself reached a runtime').toEqual({
      standalone: 0,
      prefill: 0,
      decode: 0,
    });
  }
  if (a.endpoint !== undefined) {
    if (a.status >= 400) expect(() => JSON.parse(a.body.toString()) as unknown).not.toThrow();
    return;
  }
  if (a.status < 400 || a.method === 'HEAD') return;
  const json = JSON.parse(a.body.toString()) as {
    error?: { message?: unknown; type?: unknown; code?: unknown };
  };
  expect(typeof json.error?.message).toBe('string');
  expect(typeof json.error?.type).toBe('string');
  expect(String(json.error?.code)).toMatch(/^GW_[A-Z_]+$/);
  count(summary.codes, String(json.error?.code));
}

/**
 * Bodies near the 64 MiB limit, as Buffers: the strings they are made from are garbage by the
 * time the baseline is taken, and a string body would be flattened (a heap copy) when first sent.
 */
function buildHugeBodies(mib: number): Buffer[] {
  const filler = 'a'.repeat(mib * 1024 * 1024);
  return [
    // Refused: the model is unknown.
    JSON.stringify({ model: 'nope', messages: [{ role: 'user', content: filler }] }),
    // Millions of tiny containers: 60 MiB of text, gigabytes once parsed.
    `{"model":"m","messages":[{"role":"user","content":"x"}],"x":[${'{},'.repeat((mib * 1024 * 1024) / 3 - 10)}{}]}`,
    // Passed on: the runtime gets 60 MiB of an unknown field.
    JSON.stringify({ model: 'm', prompt: 'hi', max_tokens: 1, x_extra: filler }),
  ].map((b) => Buffer.from(b));
}

describe('bad input never hurts', () => {
  it(`${HTTP_CASES} requests over any route, header and body`, async () => {
    await fc.assert(
      fc.asyncProperty(httpCase, async (c) => {
        summary.cases++;
        const before = reachedSoFar();
        const started = performance.now();
        const a = await send(c).catch((err: unknown) => {
          throw new Error(`no answer: ${String(err)}`);
        });
        const ms = performance.now() - started;
        summary.msByBody[c.body.kind] = Math.round((summary.msByBody[c.body.kind] ?? 0) + ms);
        const endpoint = a.headers['x-cacheroute-endpoint'];
        if (endpoint === 'p0' || endpoint === 'd0') await pairSettled();
        try {
          checkAnswer({ status: a.status, body: a.body, endpoint, method: c.method }, reachedSince(before));
        } catch (err) {
          throw new Error(`${String(err)}\n  answer: ${a.status} ${a.body.toString().slice(0, 300)}`, {
            cause: err,
          });
        }
      }),
      // Shrinking a 60 MiB case is slow and the case descriptions are small already.
      { seed: SEED, numRuns: HTTP_CASES, endOnFailure: true, reporter: reportBriefly(describeCase) },
    );
    expect(uncaught).toEqual([]);
  }, 240_000);

  it(`${KEYS_MODE_CASES} requests with API keys checked: no valid key, nothing reaches a runtime`, async () => {
    await fc.assert(
      fc.asyncProperty(keysModeCase, async (c) => {
        summary.cases++;
        const before = reachedSoFar();
        const a = await send(c, keysClient).catch((err: unknown) => {
          throw new Error(`no answer: ${String(err)}`);
        });
        const endpoint = a.headers['x-cacheroute-endpoint'];
        if (endpoint === 'p0' || endpoint === 'd0') await pairSettled();
        count(summary.keysMode, String(a.status));
        try {
          checkAnswer({ status: a.status, body: a.body, endpoint, method: c.method }, reachedSince(before));
          const authorization = c.headers.filter(([n]) => n.toLowerCase() === 'authorization');
          const onlyValidKey =
            authorization.length === 1 &&
            [KEY_ALL, KEY_M_ONLY].some((k) => authorization[0]?.[1] === `Bearer ${k}`);
          // Without exactly one valid key, an API route answers 401 (431 comes before routing). Status,
          // metrics and probes share this app's port here; with --admin-port they have a listener of their own.
          const api = /^\/(v1\/|generate)/.test(c.path);
          if (api && !onlyValidKey && [200, 403, 429].includes(a.status))
            throw new Error(`status ${a.status} without a valid key`);
        } catch (err) {
          throw new Error(`${String(err)}\n  answer: ${a.status} ${a.body.toString().slice(0, 300)}`, {
            cause: err,
          });
        }
      }),
      { seed: SEED, numRuns: KEYS_MODE_CASES, endOnFailure: true, reporter: reportBriefly(describeCase) },
    );
    expect(summary.keysMode['401'] ?? 0).toBeGreaterThan(0);
    expect(summary.keysMode['200'] ?? 0).toBeGreaterThan(0);
    expect(uncaught).toEqual([]);
  }, 240_000);

  it(`${RAW_CASES} requests broken at the HTTP level (request line, header syntax, framing)`, async () => {
    await fc.assert(
      fc.asyncProperty(rawCase, async (c) => {
        summary.cases++;
        const before = reachedSoFar();
        const a = await sendRaw(port, renderRaw(c));
        const reached = reachedSince(before);
        if (!a) {
          // Only a request still missing bytes may go unanswered.
          summary.noAnswer++;
          expect(isComplete(c), 'no answer to a complete request').toBe(false);
          expect(reached).toEqual({ standalone: 0, prefill: 0, decode: 0 });
          return;
        }
        try {
          checkAnswer(
            {
              status: a.status,
              body: a.body,
              endpoint: a.headers.get('x-cacheroute-endpoint'),
              method: c.method,
            },
            reached,
          );
        } catch (err) {
          throw new Error(`${String(err)}\n  answer: ${a.status} ${a.body.toString().slice(0, 300)}`, {
            cause: err,
          });
        }
      }),
      { seed: SEED, numRuns: RAW_CASES, endOnFailure: true, reporter: reportBriefly(describeRaw) },
    );
    expect(uncaught).toEqual([]);
  }, 120_000);

  it(`the heap returns to where it was after ${HUGE_REQUESTS} requests near the body limit`, async () => {
    const mib = 60;
    const bodies = buildHugeBodies(mib);
    gc();
    const baseline = process.memoryUsage().heapUsed;
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 2);
    const statuses: number[] = [];
    for (let i = 0; i < HUGE_REQUESTS; i++) {
      const body = bodies[i % bodies.length] as Buffer;
      const path = i % bodies.length === 2 ? '/v1/completions' : '/v1/chat/completions';
      const res = await client.request({
        method: 'POST',
        path,
        headers: { 'content-type': 'application/json' },
        body,
      });
      await res.body.dump();
      statuses.push(res.statusCode);
      summary.cases++;
      count(summary.statuses, String(res.statusCode));
      peak = Math.max(peak, process.memoryUsage().heapUsed);
    }
    clearInterval(sampler);
    gc();
    const after = process.memoryUsage().heapUsed;
    const mb = (n: number): number => Math.round(n / 1e6);
    const figures = { baselineMB: mb(baseline), peakMB: mb(peak), afterMB: mb(after), statuses };
    console.log(JSON.stringify({ fuzz: 'gateway-heap', bodyMiB: mib, ...figures }));
    expect(statuses.every((s) => s < 500)).toBe(true);
    // Nothing of the bodies is kept: the heap ends within 32 MB of where it started.
    expect(after - baseline).toBeLessThan(32e6);
    // A request costs a small multiple of its body, not the gigabytes its parse could build.
    expect(peak - baseline).toBeLessThan(8 * mib * 1024 * 1024);
    expect(uncaught).toEqual([]);
  }, 120_000);
});
