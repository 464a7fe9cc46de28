import { describe, expect, it } from 'vitest';
import { buildTestEndpoint as ep } from '../../../test/support/gateway/routes.ts';
import {
  computeRuntimePriority,
  computeUncachedTokens,
  SHORT_UNCACHED_TOKENS,
  stampRuntimePriority,
} from './runtime-priority.ts';

const on = ep('a', 'http://10.0.0.1:30000', { priorityScheduling: true });
const alsoOn = ep('b', 'http://10.0.0.2:30000', { priorityScheduling: true });
const off = ep('c', 'http://10.0.0.3:30000');

describe('computeRuntimePriority', () => {
  it.each([
    [0, 1, 1],
    [0, SHORT_UNCACHED_TOKENS - 1, 1],
    [0, SHORT_UNCACHED_TOKENS, 0],
    [0, 90_000, 0],
    [5, 10, 11],
    [5, 9000, 10],
    [-3, 10, -5],
    [-3, 9000, -6],
  ])('tenant %i, %i uncached tokens: %i', (tenant, uncached, want) => {
    expect(computeRuntimePriority(tenant, uncached)).toBe(want);
  });

  it("keeps the tenant's priority the major key (higher runs first, SGLang's default sign)", () => {
    const tenants = [-100, -1, 0, 1, 100];
    for (const [i, t] of tenants.entries()) {
      const next = tenants[i + 1];
      if (next === undefined) continue;
      // The lower tenant's short prompt still runs after the higher tenant's long one.
      expect(computeRuntimePriority(t, 1)).toBeLessThan(computeRuntimePriority(next, 1_000_000));
    }
    // Within a tenant, the short uncached bucket first.
    expect(computeRuntimePriority(0, 100)).toBeGreaterThan(computeRuntimePriority(0, 5000));
  });
});

describe('computeUncachedTokens', () => {
  it('counts what the endpoint holds on device or host as cached, not what is in storage', () => {
    expect(computeUncachedTokens(5000, undefined)).toBe(5000);
    expect(computeUncachedTokens(5000, { deviceTokens: 3000, hostTokens: 1000, storageTokens: 900 })).toBe(
      1000,
    );
    expect(computeUncachedTokens(10, { deviceTokens: 16, hostTokens: 0, storageTokens: 0 })).toBe(0);
  });
});

describe('stampRuntimePriority', () => {
  const body = { model: 'm', messages: [] };

  it('stamps when every endpoint the body may reach orders by priority', () => {
    expect(
      stampRuntimePriority(body, { endpoints: [on, alsoOn], tenantPriority: 2, uncachedTokens: 10 }),
    ).toEqual({ ...body, priority: 5 });
    // The caller's object is left as it was.
    expect(body).not.toHaveProperty('priority');
  });

  it('leaves the body as it is when one of them does not (or none is given)', () => {
    expect(stampRuntimePriority(body, { endpoints: [off], tenantPriority: 0, uncachedTokens: 10 })).toBe(
      body,
    );
    expect(stampRuntimePriority(body, { endpoints: [on, off], tenantPriority: 0, uncachedTokens: 10 })).toBe(
      body,
    );
    expect(stampRuntimePriority(body, { endpoints: [], tenantPriority: 0, uncachedTokens: 10 })).toBe(body);
  });

  it("keeps a client's own priority (a policy that allows the field)", () => {
    const own = { ...body, priority: 7 };
    expect(stampRuntimePriority(own, { endpoints: [on], tenantPriority: 0, uncachedTokens: 10 })).toBe(own);
    // null is SGLang's absent: stamped.
    const nul = { ...body, priority: null };
    expect(stampRuntimePriority(nul, { endpoints: [on], tenantPriority: 0, uncachedTokens: 10 })).toEqual({
      ...body,
      priority: 1,
    });
  });
});
