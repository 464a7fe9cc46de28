import { describe, expect, it } from 'vitest';
import { buildTenantDirectory } from './build-directory.ts';
import { hashApiKey } from './tenant.ts';
import { digestApiKey, type ApiKeyDigests } from '#api/gateway-keys.ts';

const KEY = 'x'.repeat(32);

const tenant = (name: string, spec: object = {}, namespace = 'ns'): object => ({
  apiVersion: 'cacheroute.dev/v1alpha1',
  kind: 'Tenant',
  metadata: { namespace, name },
  spec: { apiKeys: { secretRef: { name: `${name}-keys` } }, models: ['m'], ...spec },
});
/** A key Secret as the gateway's keys Secret reflects it: each entry's digest. */
const secret = (name: string, data: Record<string, string>, namespace = 'ns'): ApiKeyDigests => ({
  [`${namespace}/${name}`]: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, digestApiKey(v)])),
});

describe('buildTenantDirectory', () => {
  it("maps each key's hash to its tenant, with models as namespace/name", () => {
    const built = buildTenantDirectory({
      tenants: [tenant('a', { limits: { requestsPerMinute: 5 }, priority: 7 })],
      keyDigests: secret('a-keys', { old: KEY, new: `${KEY}2\n` }),
    });
    expect(built.issues).toEqual([]);
    const t = built.byHash.get(hashApiKey(KEY));
    expect(t).toMatchObject({ id: 'ns/a', limits: { requestsPerMinute: 5 }, priority: 7 });
    expect([...(t?.deployments ?? [])]).toEqual(['ns/m']);
    // A trailing newline (echo into a Secret) is not part of the key.
    expect(built.byHash.get(hashApiKey(`${KEY}2`))).toBe(t);
    expect(built.byHash.has(KEY)).toBe(false); // keys are never held, only their hashes
  });

  it('a Secret in another namespace, or not seen (unlabelled), leaves the tenant keyless with a reason', () => {
    const built = buildTenantDirectory({
      tenants: [tenant('a')],
      keyDigests: secret('a-keys', { k: KEY }, 'other'),
    });
    expect(built.byHash.size).toBe(0);
    expect(built.tenants.map((t) => t.id)).toEqual(['ns/a']);
    expect(built.issues).toEqual([
      expect.objectContaining({
        tenant: 'ns/a',
        code: 'SecretNotFound',
        message: expect.stringContaining('cacheroute.dev/api-keys'),
      }),
    ]);
  });

  it('refuses a short key and an empty Secret, naming what to change', () => {
    const built = buildTenantDirectory({
      tenants: [tenant('a'), tenant('b')],
      keyDigests: { ...secret('a-keys', { short: 'hunter2', good: KEY }), ...secret('b-keys', {}) },
    });
    expect(built.byHash.size).toBe(1);
    expect(built.issues.map((i) => [i.tenant, i.code])).toEqual([
      ['ns/a', 'KeyTooShort'],
      ['ns/b', 'NoKeys'],
    ]);
    expect(built.issues[0]?.message).toContain('"short"');
    expect(built.issues[0]?.message).not.toContain('hunter2');
  });

  it('a key in two tenants belongs to neither', () => {
    const built = buildTenantDirectory({
      tenants: [tenant('a'), tenant('b')],
      keyDigests: { ...secret('a-keys', { k: KEY }), ...secret('b-keys', { k: KEY, own: `${KEY}b` }) },
    });
    expect(built.byHash.has(hashApiKey(KEY))).toBe(false);
    expect(built.byHash.get(hashApiKey(`${KEY}b`))?.id).toBe('ns/b');
    expect(built.issues.map((i) => [i.tenant, i.code])).toEqual([
      ['ns/a', 'KeyShared'],
      ['ns/b', 'KeyShared'],
    ]);
  });

  it('leaves out a Tenant the API server would refuse', () => {
    const built = buildTenantDirectory({
      tenants: [tenant('a', { models: [] }), tenant('b', { priority: 1000 })],
      keyDigests: { ...secret('a-keys', { k: KEY }), ...secret('b-keys', { k: `${KEY}b` }) },
    });
    expect(built.tenants).toEqual([]);
    expect(built.byHash.size).toBe(0);
  });
});
