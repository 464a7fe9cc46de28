// Two replicas' endpoint books joined by a real load exchange (ZeroMQ on
// loopback, ports the kernel picked): what one sends to a runtime shows in the
// other's view of it. Delivery is awaited, never timed.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { monotonicClock } from '#kube/clock.ts';
import { LoadExchange } from '../fleet/load-exchange.ts';
import { buildMetrics } from '../metrics/index.ts';
import { CacheAwarePolicy } from '../policies/index.ts';
import type { RouteEndpoint } from '../routing/table.ts';
import { buildInput, range } from '../../../test/support/gateway/policies.ts';
import { EndpointBook } from './book.ts';

const open: LoadExchange[] = [];
afterEach(() => {
  for (const x of open.splice(0)) x.close();
});

async function replica(
  self: string,
): Promise<{ book: EndpointBook; address: string; exchange: LoadExchange }> {
  const exchange = new LoadExchange({ self, heartbeatMs: 20 });
  open.push(exchange);
  const address = await exchange.bind('tcp://127.0.0.1:*');
  const book = new EndpointBook({
    metrics: buildMetrics(),
    clock: monotonicClock,
    runtimeLoad: () => ({ queued: 0, running: 3, waitingUncachedTokens: 120 }),
    tier: exchange,
  });
  return { book, address, exchange };
}

const runtime = { id: 'w0', url: 'http://10.0.0.1:30000', role: 'standalone' } as RouteEndpoint;
const until = (check: () => void): Promise<void> => vi.waitFor(check, { timeout: 4_000, interval: 10 });

describe('EndpointBook with a load exchange', () => {
  it("shows the other replica's in flight and predicted prefill and decode, and the runtime's counts", async () => {
    const a = await replica('gw-a');
    const b = await replica('gw-b');
    a.exchange.connect([b.address]);
    b.exchange.connect([a.address]);
    const policy = new CacheAwarePolicy({
      matchThreshold: 0.3,
      balanceAbsThreshold: 64,
      balanceRelThreshold: 1.5,
      maxTreeTokens: 4096,
      blockTokens: 4,
      costWeight: 64,
      decodeWeight: 4,
    });
    const req = buildInput('r1', range(0, 40), { maxTokens: 300 });
    const guard = a.book.track('w0');
    a.book.observe(policy, { kind: 'routed', endpoint: 'w0', input: req });
    await until(() =>
      expect(b.book.view(runtime).peers).toEqual({ inFlight: 1, prefillTokens: 40, decodeTokens: 300 }),
    );
    expect(b.book.view(runtime)).toMatchObject({ inFlight: 0, running: 3, waitingUncachedTokens: 120 });
    // a hears b (nothing on w0), never its own share.
    await until(() =>
      expect(a.book.view(runtime).peers).toEqual({ inFlight: 0, prefillTokens: 0, decodeTokens: 0 }),
    );
    a.book.observe(policy, { kind: 'first-token', endpoint: 'w0', input: req });
    await until(() => expect(b.book.view(runtime).peers?.prefillTokens).toBe(0));
    a.book.observe(policy, { kind: 'completed', endpoint: 'w0', input: req });
    guard.release();
    await until(() =>
      expect(b.book.view(runtime).peers).toEqual({ inFlight: 0, prefillTokens: 0, decodeTokens: 0 }),
    );
  });
});
