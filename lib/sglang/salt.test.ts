import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { combineCacheSalt, computeCacheSalt, computeTenantSalt } from './salt.ts';

describe('cache salts', () => {
  it('keeps a tenant inside its policy salt, apart from every other tenant, the same on every call', () => {
    const policy = computeCacheSalt('team-a', 'llama-r1');
    const a = computeTenantSalt(policy, 'ns/tenant-a');
    expect(a).toBe(
      `${policy}.t${createHash('sha256').update('tenant\0ns/tenant-a').digest('hex').slice(0, 16)}`,
    );
    expect(computeTenantSalt(policy, 'ns/tenant-a')).toBe(a);
    expect(computeTenantSalt(policy, 'ns/tenant-b')).not.toBe(a);
    expect(computeTenantSalt(computeCacheSalt('team-b', 'llama-r1'), 'ns/tenant-a').startsWith(policy)).toBe(
      false,
    );
  });

  it("narrows a salt with the client's own, never leaving it", () => {
    const policy = computeCacheSalt('team-a', 'llama-r1');
    expect(combineCacheSalt(policy, undefined)).toBe(policy);
    expect(combineCacheSalt(policy, 'mine').startsWith(`${policy}.`)).toBe(true);
  });
});
