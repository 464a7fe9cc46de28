import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryInstant, queryRange } from './prometheus-api.ts';

// A stand-in Prometheus: answers each query with what ANSWERS holds for it.
const ANSWERS: Record<string, unknown> = {
  up: {
    status: 'success',
    data: { resultType: 'vector', result: [{ metric: { job: 'a' }, value: [1, '1'] }] },
  },
  '1': { status: 'success', data: { resultType: 'scalar', result: [1, '1'] } },
  'rate(x[1m])': {
    status: 'success',
    data: { resultType: 'matrix', result: [{ metric: { job: 'a' }, values: [[10, '0.5']] }] },
  },
  'sum(': { status: 'error', errorType: 'bad_data', error: 'parse error' },
};
let server: Server;
let url = '';
const asked: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    asked.push(`${u.pathname} ${[...u.searchParams.keys()].join(',')}`);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(ANSWERS[u.searchParams.get('query') ?? ''] ?? {}));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('the Prometheus query API', () => {
  it('parses instant and range answers, a scalar as one series without labels', async () => {
    expect(await queryInstant(url, 'up')).toEqual([{ metric: { job: 'a' }, value: [1, '1'] }]);
    expect(await queryInstant(url, '1')).toEqual([{ metric: {}, value: [1, '1'] }]);
    expect(await queryRange(url, 'rate(x[1m])', { start: 0, end: 60, step: 15 })).toEqual([
      { metric: { job: 'a' }, values: [[10, '0.5']] },
    ]);
    expect(asked).toEqual([
      '/api/v1/query query',
      '/api/v1/query query',
      '/api/v1/query_range query,start,end,step',
    ]);
  });

  it("throws with the query and Prometheus' error", async () => {
    await expect(queryInstant(url, 'sum(')).rejects.toThrow('sum(: parse error');
    await expect(queryRange(url, 'up', { start: 0, end: 60, step: 15 })).rejects.toThrow();
  });
});
