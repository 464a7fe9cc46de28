import { describe, expect, it } from 'vitest';
import { GATEWAY_KEYS_DATA, hashApiKey } from '#api/gateway-keys.ts';
import { buildGatewayKeys, buildGatewayKeysSecret } from './build.ts';

const KEY = 'k'.repeat(40);
const b64 = (s: string): string => Buffer.from(s).toString('base64');
const secret = (
  namespace: string,
  name: string,
  labels: Record<string, string>,
  data: Record<string, string>,
) => ({
  metadata: { namespace, name, labels },
  data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])),
});
const tenant = (namespace: string, name: string, secretName: string) => ({
  apiVersion: 'cacheroute.dev/v1alpha1',
  kind: 'Tenant',
  metadata: { namespace, name },
  spec: { apiKeys: { secretRef: { name: secretName } }, models: ['m'] },
});
const API = { 'cacheroute.dev/api-keys': 'true' };
const RUNTIME = { 'cacheroute.dev/runtime-api-key': 'true' };

describe('buildGatewayKeys: Tenant key Secrets', () => {
  it('reflects a Secret a Tenant names as digests and lengths, never the key', () => {
    const keys = buildGatewayKeys({
      tenants: [tenant('team-a', 'a', 'a-keys')],
      apiKeySecrets: [secret('team-a', 'a-keys', API, { old: `${KEY}\n`, short: 'hunter2' })],
      runtimeKeySecrets: [],
    });
    expect(keys.apiKeyDigests).toEqual({
      'team-a/a-keys': {
        old: { sha256: hashApiKey(KEY), length: 40 },
        short: { sha256: hashApiKey('hunter2'), length: 7 },
      },
    });
    const kept = buildGatewayKeysSecret({ namespace: 'gw', name: 'keys' }, keys);
    expect(JSON.stringify(kept)).not.toContain(b64(KEY));
    const digests = kept.data?.[GATEWAY_KEYS_DATA.apiKeyDigests] ?? '';
    expect(Buffer.from(digests, 'base64').toString()).toContain(hashApiKey(KEY));
    expect(Buffer.from(digests, 'base64').toString()).not.toContain(KEY);
  });

  it('leaves out a labelled Secret no Tenant of its namespace names', () => {
    const keys = buildGatewayKeys({
      // A Tenant in team-b naming a-keys names team-b/a-keys, not team-a's.
      tenants: [tenant('team-b', 'b', 'a-keys'), tenant('team-a', 'bad', '')],
      apiKeySecrets: [
        secret('team-a', 'a-keys', API, { k: KEY }),
        secret('team-a', 'other', API, { k: KEY }),
      ],
      runtimeKeySecrets: [],
    });
    expect(keys.apiKeyDigests).toEqual({});
  });
});

describe('buildGatewayKeys: runtime key Secrets', () => {
  it("maps each Deployment's fingerprints to their keys, decoded", () => {
    const keys = buildGatewayKeys({
      tenants: [],
      apiKeySecrets: [],
      runtimeKeySecrets: [
        secret(
          'team-a',
          'llama-runtime-api-key',
          { ...RUNTIME, 'cacheroute.dev/deployment': 'llama' },
          { f2: 'k2', f1: 'k1' },
        ),
        secret(
          'team-b',
          'llama-runtime-api-key',
          { ...RUNTIME, 'cacheroute.dev/deployment': 'llama' },
          { f1: 'kb' },
        ),
      ],
    });
    expect(keys.runtimeKeys).toEqual({
      'team-a/llama': { f1: 'k1', f2: 'k2' },
      'team-b/llama': { f1: 'kb' },
    });
  });

  it('takes a Secret only under the name the operator gives its Deployment', () => {
    const keys = buildGatewayKeys({
      tenants: [],
      apiKeySecrets: [],
      runtimeKeySecrets: [
        // Labelled for llama by someone else: it must not decide what llama's runtimes are sent.
        secret('team-a', 'impostor', { ...RUNTIME, 'cacheroute.dev/deployment': 'llama' }, { f1: 'bad-key' }),
        secret('team-a', 'other-runtime-api-key', RUNTIME, { f1: 'bad-key' }),
        'not an object',
      ],
    });
    expect(keys.runtimeKeys).toEqual({});
  });
});
