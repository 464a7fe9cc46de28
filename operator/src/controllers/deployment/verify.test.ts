import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type RunningSim } from '../../../../test/support/sim/testing.ts';
import type { RuntimeIdentity } from '../../sglang-client/identity.ts';
import { SGLANG_VERSION } from '#sglang/catalogue.ts';
import { checkReportedApiKey, readIdentity } from './verify.ts';

const KEY = 'a'.repeat(64);
const DECLARED: RuntimeIdentity = {
  modelPath: '/models',
  servedModelName: 'llama',
  tokenizerPath: '/models',
  version: SGLANG_VERSION,
  hicache: false,
  hisparse: false,
  radixCache: true,
  disaggregationMode: 'null',
  tensorParallel: 1,
  priorityScheduling: false,
};

describe('readIdentity against a runtime started with --api-key', () => {
  let sim: RunningSim;
  beforeAll(async () => {
    sim = await startSim(['--model-path', '/models', '--served-model-name', 'llama', '--api-key', KEY]);
  });
  afterAll(() => sim.close());

  it('verifies with the key, and the key is nowhere in what it returns', async () => {
    const r = await readIdentity(sim.url, DECLARED, { timeoutMs: 5000, dataParallel: 1, apiKey: KEY });
    expect(r).toMatchObject({ ok: true, mismatches: '' });
    expect(JSON.stringify(r)).not.toContain(KEY);
  });

  it('is refused without the key (SGLang answers 401), and says so without a key in the message', async () => {
    const r = await readIdentity(sim.url, DECLARED, { timeoutMs: 5000, dataParallel: 1 });
    expect(r).toEqual({ ok: false, error: `GET ${sim.url}/server_info: HTTP 401` });
  });

  it('is refused with another key', async () => {
    const other = 'b'.repeat(64);
    const r = await readIdentity(sim.url, DECLARED, { timeoutMs: 5000, dataParallel: 1, apiKey: other });
    expect(r.ok).toBe(false);
    expect(JSON.stringify(r)).not.toContain(other);
  });
});

describe('readIdentity against a runtime that reports another key than its Secret', () => {
  // A runtime that checks no key and lists another in /server_info: it was not started with
  // the key its Secret holds for its fingerprint, whatever else it reports.
  let server: Server;
  let url = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      const body =
        req.url === '/server_info'
          ? {
              model_path: '/models',
              served_model_name: 'llama',
              version: SGLANG_VERSION,
              api_key: 'd'.repeat(64),
            }
          : { model_path: '/models' };
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('is a mismatch that names neither key', async () => {
    const r = await readIdentity(url, DECLARED, { timeoutMs: 5000, dataParallel: 1, apiKey: KEY });
    expect(r).toMatchObject({
      ok: true,
      mismatches: 'apiKey: the runtime runs with another API key than its Secret holds for its fingerprint',
    });
    expect(JSON.stringify(r)).not.toContain('d'.repeat(64));
  });
});

describe('checkReportedApiKey', () => {
  it.each([
    ['the expected key', KEY, KEY, undefined],
    ['none (a pod started before runtime keys)', null, KEY, undefined],
    ['none, and none expected', undefined, undefined, undefined],
    [
      'another key',
      'c'.repeat(64),
      KEY,
      'apiKey: the runtime runs with another API key than its Secret holds for its fingerprint',
    ],
    [
      'a key where none is expected',
      KEY,
      undefined,
      'apiKey: the runtime runs with another API key than its Secret holds for its fingerprint',
    ],
  ])('a runtime reporting %s', (_what, reported, expected, want) => {
    expect(checkReportedApiKey(reported, expected)).toBe(want);
  });
});

describe('readIdentity against a runtime that lies about its data-parallel ranks', () => {
  // The runtime's image is the namespace user's: what it says of its event publishers goes to
  // status and from there to every gateway replica, so it is held to the Deployment's spec.
  let server: Server;
  let url = '';
  let reportedRanks = 0;
  beforeAll(async () => {
    server = createServer((req, res) => {
      const body =
        req.url === '/server_info'
          ? {
              model_path: '/models',
              served_model_name: 'llama',
              version: SGLANG_VERSION,
              kv_events: {
                publisher: 'zmq',
                endpoint_port_base: 5557,
                topic: 'kv',
                block_size: 16,
                dp_size: reportedRanks,
              },
            }
          : { model_path: '/models' };
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('ranks beyond parallelism.data: a mismatch, and no events copied', async () => {
    reportedRanks = 2 ** 32;
    const r = await readIdentity(url, DECLARED, { timeoutMs: 5000, dataParallel: 2 });
    expect(r).toEqual({
      ok: true,
      reported: expect.anything() as unknown,
      mismatches: 'events: reports 4294967296 data-parallel ranks; its spec declares 2 (parallelism.data)',
    });
  });

  it('ranks within parallelism.data: verified, its events copied', async () => {
    reportedRanks = 2;
    const r = await readIdentity(url, DECLARED, { timeoutMs: 5000, dataParallel: 2 });
    expect(r).toMatchObject({ ok: true, mismatches: '', events: { port: 5557, ranks: 2, blockSize: 16 } });
  });
});

describe('readIdentity: the runtime orders its queue by a stamped priority (spec.serving.priorityScheduling)', () => {
  const base = ['--model-path', '/models', '--served-model-name', 'llama'];
  const on = [
    '--enable-priority-scheduling',
    '--disable-priority-preemption',
    '--default-priority-value',
    '0',
  ];
  const sims: RunningSim[] = [];
  afterAll(async () => Promise.all(sims.map((s) => s.close())));
  const read = async (argv: readonly string[], declared: boolean) => {
    const sim = await startSim([...base, ...argv]);
    sims.push(sim);
    return readIdentity(
      sim.url,
      { ...DECLARED, priorityScheduling: declared },
      { timeoutMs: 5000, dataParallel: 1 },
    );
  };

  it('verifies a runtime started with the flags the operator renders, and reports it on', async () => {
    const r = await read(on, true);
    expect(r).toMatchObject({ ok: true, mismatches: '', reported: { priorityScheduling: true } });
  });

  it('is a mismatch when the runtime reads priorities the other way round, ranks unstamped requests last, or runs without them', async () => {
    const reversed = await read([...on, '--schedule-low-priority-values-first'], true);
    expect(reversed).toMatchObject({
      ok: true,
      mismatches: 'priorityScheduling: declared true, runtime reports false',
    });
    // The flags before ADR 0057's amendment: an unstamped request would run after every stamp.
    const noDefault = await read(on.slice(0, 2), true);
    expect(noDefault).toMatchObject({
      ok: true,
      mismatches: 'priorityScheduling: declared true, runtime reports false',
    });
    const off = await read([], true);
    expect(off).toMatchObject({
      ok: true,
      mismatches: 'priorityScheduling: declared true, runtime reports false',
    });
    const undeclared = await read(on, false);
    expect(undeclared).toMatchObject({
      ok: true,
      mismatches: 'priorityScheduling: declared false, runtime reports true',
    });
  });
});
