import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { GatewayCacheReport } from '#api';
import { readGatewayTier } from './tier.ts';
import { worseEvents } from '../controllers/deployment/cache-health/prober.ts';

describe('worseEvents', () => {
  it('prefers an unusable view, then the larger lag', () => {
    const usable = { usable: true, reason: '', lagMs: 12_000 };
    const unusable = { usable: false, reason: 'events lag 9000 ms (bound 5000 ms)', lagMs: 9_000 };
    expect(worseEvents(usable, unusable)).toBe(unusable);
    expect(worseEvents(unusable, usable)).toBe(unusable);
    expect(
      worseEvents({ usable: true, reason: '', lagMs: null }, { usable: true, reason: '', lagMs: 300 }),
    ).toEqual({
      usable: true,
      reason: '',
      lagMs: 300,
    });
  });
});

describe('readGatewayTier', () => {
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => close?.());

  it("reads a replica's report by address, and says what to fix when none answers", async () => {
    const report: GatewayCacheReport = { instance: 'i-1', deployments: [] };
    const server = createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(req.url === '/cache-report.json' ? JSON.stringify(report) : '{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    close = () => new Promise((r) => server.close(() => r()));
    const port = (server.address() as AddressInfo).port;
    expect(await readGatewayTier(`http://127.0.0.1:${port}`, { timeoutMs: 2_000 })).toEqual({
      ok: true,
      replicas: [{ address: '127.0.0.1', ok: true, report }],
    });
    const down = await readGatewayTier('http://127.0.0.1:1', { timeoutMs: 2_000 });
    expect(down.ok && down.replicas[0]).toMatchObject({
      ok: false,
      error: expect.stringContaining('127.0.0.1:1'),
    });
    const unresolved = await readGatewayTier('http://no-such-gateway.invalid:9090', { timeoutMs: 2_000 });
    expect(unresolved).toMatchObject({
      ok: false,
      error: expect.stringContaining('resolve no-such-gateway.invalid') as unknown,
    });
  });
});
